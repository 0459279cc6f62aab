//! Reading the journal: pages of entries in id order, and calls per minute.
//!
//! The reader has a read-only connection of its own (WAL lets it read while the writer
//! writes), opened at first use and used only off the async threads (its callers run it in
//! `spawn_blocking`). Entries recorded but not yet committed are in the journal's in-memory tail:
//! a page reads the database's blocks (`block.rs`) and then the tail's entries past them, so
//! nothing recorded is missed. When the writer is further behind than the tail reaches back (a
//! burst outran it), the reader has it write what waits first.
//!
//! A block that cannot be read (its body does not unpack, or sits in a page SQLite finds
//! damaged) is skipped, not the whole read: in its place the reader yields a `gap` entry at the block's first id that says
//! so and how many entries it held ([`corrupt_gap`]).
//!
//! Who may see what is not decided here: a [`Filter`] carries the query's columns (tested first
//! as texts on each line, so most entries a filter drops are never decoded, then exactly) and the
//! caller's exact test, applied to each entry in id order. A scan stops after [`SCAN_LIMIT`]
//! entries decoded (or [`LINE_LIMIT`] looked at), and the page's `next` is where it stopped, so a
//! filter that drops most entries never breaks pagination.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hangar_core::journal::{Happened, JournalEvent, MinuteCount};
use hangar_core::sync::Unpoisoned;
use hangar_core::time::rfc3339_millis;
use rusqlite::{Connection, OpenFlags, OptionalExtension};

use super::block;
use super::schema::latest_written;
use super::{Columns, Journal, Recorded};

/// Blocks read from the database at a time.
const CHUNK: i64 = 8;
/// The most entries one page decodes before it answers with what it found.
pub const SCAN_LIMIT: usize = 10_000;
/// The most entries one page looks at (most only as text) before it answers.
pub const LINE_LIMIT: usize = 1_000_000;
/// How long a read waits for a lock the writer holds (a checkpoint) before it fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
#[error("cannot read the journal {path}: {source}")]
pub struct ReadError {
    path: PathBuf,
    source: rusqlite::Error,
}

/// The journal's read side; one connection, one read at a time.
pub struct Reader {
    path: PathBuf,
    connection: Mutex<Option<Connection>>,
}

/// Which entries a read wants.
#[derive(Clone, Default)]
pub struct Filter {
    /// Only entries of this kind (`audit`, `state`, ...).
    pub kind: Option<&'static str>,
    /// Audit entries of this identity only.
    pub identity: Option<String>,
    pub mcp_server: Option<String>,
    /// `ok`, `is_error`, `error`, or an error type.
    pub outcome: Option<String>,
    /// The caller's own test, after the columns above.
    pub keep: Option<Keep>,
}

pub type Keep = Arc<dyn Fn(&JournalEvent) -> bool + Send + Sync>;

/// What one scan found, in id order, and where the next one starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub events: Vec<JournalEvent>,
    pub next: u64,
}

/// The outcomes an audit entry's `outcome` holds; any other filter value is an error type.
const OUTCOMES: [&str; 3] = ["ok", "is_error", "error"];

impl Filter {
    /// Texts an entry that passes the columns has in its line, as serde_json writes them: each
    /// group needs one of its texts. A superset of [`Filter::matches`] (a text may also appear
    /// inside an entry's arguments), so only lines that pass are decoded and tested exactly.
    fn texts(&self) -> Vec<Vec<String>> {
        let field = |key: &str, value: &str| format!("\"{key}\":{}", serde_json::Value::from(value));
        let mut groups = Vec::new();
        if let Some(kind) = self.kind {
            groups.push(vec![field("kind", kind)]);
        }
        if let Some(identity) = &self.identity {
            groups.push(vec![field("identity", identity)]);
        }
        if let Some(server) = &self.mcp_server {
            // A state change names its server `mcp_server_id`.
            groups.push(vec![field("mcp_server", server), field("mcp_server_id", server)]);
        }
        if let Some(outcome) = &self.outcome {
            let key = if OUTCOMES.contains(&outcome.as_str()) { "outcome" } else { "error_type" };
            groups.push(vec![field(key, outcome)]);
        }
        groups
    }

    /// Whether `event` passes: the columns and `keep`.
    pub fn matches(&self, event: &JournalEvent) -> bool {
        let Columns { identity, outcome, error_type } = Columns::of(&event.what);
        let wanted = |filter: &Option<String>, value: Option<&str>| filter.as_deref().is_none_or(|f| value == Some(f));
        self.kind.is_none_or(|kind| event.what.kind() == kind)
            && wanted(&self.identity, identity)
            && wanted(&self.mcp_server, event.what.mcp_server())
            && self
                .outcome
                .as_deref()
                .is_none_or(|f| if OUTCOMES.contains(&f) { outcome == Some(f) } else { error_type == Some(f) })
            && self.keep.as_ref().is_none_or(|keep| keep(event))
    }
}

/// One page's scan: what it found, how far it looked, and its bounds.
struct Scan<'a> {
    filter: &'a Filter,
    texts: Vec<Vec<String>>,
    limit: usize,
    events: Vec<JournalEvent>,
    /// The id of the last entry examined.
    last: Option<u64>,
    decoded: usize,
    looked_at: usize,
}

impl<'a> Scan<'a> {
    fn new(filter: &'a Filter, limit: usize) -> Scan<'a> {
        Scan { filter, texts: filter.texts(), limit, events: Vec::new(), last: None, decoded: 0, looked_at: 0 }
    }

    /// Examines a written entry's line; `Break` once the page is done.
    fn line(&mut self, id: u64, line: &str) -> ControlFlow<()> {
        self.last = Some(id);
        self.looked_at += 1;
        if self.texts.iter().all(|any| any.iter().any(|text| line.contains(text.as_str()))) {
            match serde_json::from_str::<JournalEvent>(line) {
                Ok(event) => return self.event(event),
                Err(err) => tracing::warn!(id, %err, "a journal entry does not decode; skipped"),
            }
        }
        self.done()
    }

    /// Examines an entry as decoded (from the tail, or from its line).
    fn event(&mut self, event: JournalEvent) -> ControlFlow<()> {
        self.last = Some(event.id);
        self.decoded += 1;
        if self.filter.matches(&event) {
            self.events.push(event);
        }
        self.done()
    }

    fn done(&self) -> ControlFlow<()> {
        let done = self.events.len() >= self.limit || self.decoded >= SCAN_LIMIT || self.looked_at >= LINE_LIMIT;
        if done { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    }
}

/// A block as read: its bounds, and its text unless it does not unpack.
pub(crate) struct Stored {
    pub first_id: i64,
    pub last_id: i64,
    pub first_at_ms: i64,
    pub entries: i64,
    pub body: Result<block::Body, String>,
}

impl Stored {
    /// From a row of `first_id, last_id, first_at_ms, entries, body`; a body that does not
    /// unpack is kept as its error, so one corrupt row does not fail the read.
    pub fn of(row: &rusqlite::Row<'_>) -> rusqlite::Result<Stored> {
        use rusqlite::types::FromSql;
        let body = row
            .get_ref(4)
            .map_err(|err| err.to_string())
            .and_then(|value| block::Body::column_result(value).map_err(|err| err.to_string()));
        Ok(Stored { first_id: row.get(0)?, last_id: row.get(1)?, first_at_ms: row.get(2)?, entries: row.get(3)?, body })
    }
}

/// Which blocks a [`chunk`] reads: from this first id on, oldest first (`Older`), or before it,
/// newest first (`Newer`).
#[derive(Clone, Copy)]
enum Direction {
    Older(i64),
    Newer(i64),
}

/// Up to [`CHUNK`] blocks in `direction`. Should SQLite find a page of them damaged (a torn
/// write, a bad disk), they are read again one at a time: their bounds from the table's own
/// pages, then each body on its own, so only the blocks whose bodies sit in damaged pages come
/// back as errors (and readers skip them with a gap), not the whole read.
fn chunk(connection: &Connection, direction: Direction) -> rusqlite::Result<Vec<Stored>> {
    const COLUMNS: &str = "SELECT first_id, last_id, first_at_ms, entries, body FROM blocks";
    const BOUNDS: &str = "SELECT first_id, last_id, first_at_ms, entries FROM blocks";
    let (filter, bound) = match direction {
        Direction::Older(from) => ("WHERE first_id >= ?1 ORDER BY first_id LIMIT ?2", from),
        Direction::Newer(before) => ("WHERE first_id < ?1 ORDER BY first_id DESC LIMIT ?2", before),
    };
    let whole = connection
        .prepare_cached(&format!("{COLUMNS} {filter}"))?
        .query_map([bound, CHUNK], Stored::of)?
        .collect::<rusqlite::Result<Vec<_>>>();
    match whole {
        Err(err) if err.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseCorrupt) => {
            tracing::warn!(%err, "a damaged page in the journal; its blocks are read one by one");
        }
        whole => return whole,
    }
    let bounds: Vec<(i64, i64, i64, i64)> = connection
        .prepare_cached(&format!("{BOUNDS} {filter}"))?
        .query_map([bound, CHUNK], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut body = connection.prepare_cached("SELECT body FROM blocks WHERE first_id = ?1")?;
    Ok(bounds
        .into_iter()
        .map(|(first_id, last_id, first_at_ms, entries)| {
            let body = body.query_row([first_id], |row| row.get::<_, block::Body>(0)).map_err(|err| err.to_string());
            Stored { first_id, last_id, first_at_ms, entries, body }
        })
        .collect())
}

/// The `gap` entry that stands in for a corrupt block: at its first id and time, saying which
/// entries were lost and why.
pub(crate) fn corrupt_gap(stored: &Stored, err: &str) -> JournalEvent {
    tracing::warn!(first_id = stored.first_id, last_id = stored.last_id, %err, "a corrupt journal block was skipped");
    let reason = format!(
        "a corrupt block of the journal (entries {} to {}) could not be read and was skipped",
        stored.first_id, stored.last_id
    );
    let what = Happened::Gap { dropped: stored.entries.max(0) as u64, reason: Some(reason) };
    Recorded { id: stored.first_id.max(0) as u64, at_ms: stored.first_at_ms, what }.event()
}

impl Reader {
    /// A reader of the journal at `path`; the connection opens at the first read.
    pub fn new(path: &Path) -> Reader {
        Reader { path: path.to_owned(), connection: Mutex::new(None) }
    }

    /// Runs `read` on the connection (opening it if need be) in one read transaction, so it sees
    /// one state of the database; a failed read drops the connection so the next one starts
    /// afresh. Blocking.
    fn with<T>(&self, read: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, ReadError> {
        let mut connection = self.connection.locked();
        let failed = |source| ReadError { path: self.path.clone(), source };
        let open = match connection.take() {
            Some(open) => open,
            None => {
                let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                let opened = Connection::open_with_flags(&self.path, flags).map_err(failed)?;
                opened.busy_timeout(BUSY_TIMEOUT).map_err(failed)?;
                opened
            }
        };
        let result = open.unchecked_transaction().and_then(|tx| {
            let result = read(&tx)?;
            tx.finish()?;
            Ok(result)
        });
        let result = result.map_err(failed)?;
        *connection = Some(open);
        Ok(result)
    }

    /// The entries after `since` that pass `filter`, oldest first: at most `limit`, examining at
    /// most [`SCAN_LIMIT`]; `next` is the id of the last entry examined (`since` if none).
    pub fn after(&self, journal: &Journal, since: u64, limit: usize, filter: &Filter) -> Result<Found, ReadError> {
        let (mut tail, complete) = journal.tail_after(since);
        if !complete {
            // Entries older than the tail may still wait for the writer (a reader far
            // behind a burst): have them written first, so neither source misses them.
            journal.flush();
            tail = journal.tail_after(since).0;
        }
        let mut scan = Scan::new(filter, limit);
        let since_i64 = since.min(i64::MAX as u64) as i64;
        let stopped = self.with(|connection| {
            // The block that holds the entry after `since`, if one does, and those after it.
            let mut from: i64 = connection.query_row(
                "SELECT COALESCE((SELECT first_id FROM blocks WHERE first_id <= ?1 ORDER BY first_id DESC LIMIT 1), 0)",
                [since_i64.saturating_add(1)],
                |row| row.get(0),
            )?;
            loop {
                let rows = chunk(connection, Direction::Older(from))?;
                for stored in &rows {
                    let first_id = &stored.first_id;
                    from = first_id + 1;
                    let body = match &stored.body {
                        Ok(body) => body,
                        Err(_) if stored.last_id as u64 <= scan.last.unwrap_or(since) => continue,
                        Err(err) => {
                            if scan.event(corrupt_gap(stored, err)).is_break() {
                                scan.last = Some(stored.last_id as u64);
                                return Ok(true);
                            }
                            scan.last = Some(stored.last_id as u64);
                            continue;
                        }
                    };
                    for (id, line) in block::lines(&body.0) {
                        let Some(id) = id else {
                            tracing::warn!(block = first_id, "a journal line has no id; skipped");
                            continue;
                        };
                        if id > scan.last.unwrap_or(since) && scan.line(id, line).is_break() {
                            return Ok(true);
                        }
                    }
                }
                if (rows.len() as i64) < CHUNK {
                    return Ok(false);
                }
            }
        })?;
        if !stopped {
            // Past what is written: the tail's entries not yet in a block.
            let after = scan.last.unwrap_or(since);
            for event in tail.into_iter().filter(|e| e.id > after) {
                if scan.event(event).is_break() {
                    break;
                }
            }
        }
        Ok(Found { next: scan.last.unwrap_or(since), events: scan.events })
    }

    /// The newest `limit` entries that pass `filter`, oldest first, examining at most
    /// [`SCAN_LIMIT`]; `next` is the newest id recorded (where a reader goes on from).
    pub fn newest(&self, journal: &Journal, limit: usize, filter: &Filter) -> Result<Found, ReadError> {
        let (written, (), unwritten) = self.unwritten(journal, |connection| Ok((latest_written(connection)?, ())))?;
        let mut scan = Scan::new(filter, limit);
        let newest = unwritten.last().map_or(written, |e| e.id);
        self.with(|connection| {
            // Newest first: the tail's entries not yet written, then the blocks, newest first
            // (those written by then, as `written` says: any later ones are in the tail).
            for recorded in unwritten.iter().rev() {
                if scan.event(recorded.event()).is_break() {
                    return Ok(());
                }
            }
            let mut before = written.min(i64::MAX as u64 - 1) as i64 + 1;
            loop {
                let rows = chunk(connection, Direction::Newer(before))?;
                for stored in &rows {
                    before = stored.first_id;
                    let body = match &stored.body {
                        Ok(body) => body,
                        Err(err) => {
                            if scan.event(corrupt_gap(stored, err)).is_break() {
                                return Ok(());
                            }
                            continue;
                        }
                    };
                    for (id, line) in block::lines(&body.0).rev() {
                        let Some(id) = id else { continue };
                        if scan.line(id, line).is_break() {
                            return Ok(());
                        }
                    }
                }
                if (rows.len() as i64) < CHUNK {
                    return Ok(());
                }
            }
        })?;
        let mut events = scan.events;
        events.reverse();
        Ok(Found { events, next: newest.max(written) })
    }

    /// An id from which a scan (`after`) sees every entry recorded at `at_ms` or later: just
    /// before the newest block that began before then (a block may straddle the time, so a
    /// few earlier entries follow too), or 0. Blocks are found newest first by id, so a
    /// recent time costs a few rows.
    pub fn id_before(&self, at_ms: i64) -> Result<u64, ReadError> {
        let first: Option<i64> = self.with(|connection| {
            connection
                .query_row(
                    "SELECT first_id FROM blocks WHERE first_at_ms < ?1 ORDER BY first_id DESC LIMIT 1",
                    [at_ms],
                    |row| row.get(0),
                )
                .optional()
        })?;
        Ok(first.map_or(0, |id| id.saturating_sub(1).max(0) as u64))
    }

    /// The newest id recorded: in the database or, not yet written, in the tail.
    pub fn latest_id(&self, journal: &Journal) -> Result<u64, ReadError> {
        let written = self.with(latest_written)?;
        Ok(journal.newest_id().max(written))
    }

    /// The newest id written and what else `read` finds (`read` reads that id too, in one read
    /// transaction as every read), with the tail's entries past that id. Had the tail moved on
    /// past it, what waits is written first and both are read again.
    fn unwritten<T>(
        &self,
        journal: &Journal,
        read: impl Fn(&Connection) -> rusqlite::Result<(u64, T)>,
    ) -> Result<(u64, T, Vec<Arc<Recorded>>), ReadError> {
        let once = || {
            let (written, found) = self.with(&read)?;
            let (unwritten, complete) = journal.recorded_after(written);
            Ok::<_, ReadError>((written, found, unwritten, complete))
        };
        let (written, found, unwritten, complete) = once()?;
        if complete {
            return Ok((written, found, unwritten));
        }
        journal.flush();
        let (written, found, unwritten, complete) = once()?;
        if !complete {
            tracing::debug!("the journal's writer fell behind its tail again while a reader waited");
        }
        Ok((written, found, unwritten))
    }

    /// Tool calls and their failures per minute over the `minutes` minutes up to `now` (the current
    /// minute included), oldest first, every minute present. `keep(mcp_server, identity)` says
    /// which entries count: those written (counted by the writer in `minutes`) and those still
    /// only in the tail.
    pub fn rates(
        &self,
        journal: &Journal,
        minutes: u32,
        now: SystemTime,
        keep: impl Fn(&str, &str) -> bool,
    ) -> Result<Vec<MinuteCount>, ReadError> {
        let now_minute = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs() / 60;
        let first = now_minute.saturating_sub(u64::from(minutes.max(1)) - 1);
        let (_, groups, tail) = self.unwritten(journal, |connection| {
            let written = latest_written(connection)?;
            let mut statement = connection
                .prepare_cached("SELECT minute, mcp_server, identity, calls, errors FROM minutes WHERE minute >= ?1")?;
            let rows = statement.query_map([first as i64], |row| {
                Ok((
                    row.get::<_, i64>(0)?,
                    row.get::<_, String>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, i64>(3)?,
                    row.get::<_, i64>(4)?,
                ))
            })?;
            Ok((written, rows.collect::<rusqlite::Result<Vec<_>>>()?))
        })?;
        // The tail holds only entries past what `groups` counted.
        let unwritten = tail.iter().filter_map(|recorded| match &recorded.what {
            Happened::Audit(entry) if super::unwritten::counts_as_call(entry) => {
                let minute = recorded.at_ms / 60_000;
                let failed = entry.outcome != hangar_core::journal::CallOutcome::Ok;
                Some((minute, entry.mcp_server.clone(), entry.identity.clone(), 1, i64::from(failed)))
            }
            _ => None,
        });
        let groups: Vec<_> = groups.into_iter().chain(unwritten).collect();
        let mut counts: BTreeMap<u64, (u64, u64)> = (first..=now_minute).map(|m| (m, (0, 0))).collect();
        for (minute, server, identity, calls, errors) in groups {
            if let Some(count) = counts.get_mut(&(minute.max(0) as u64))
                && keep(&server, &identity)
            {
                count.0 += calls.max(0) as u64;
                count.1 += errors.max(0) as u64;
            }
        }
        Ok(counts
            .into_iter()
            .map(|(minute, (calls, errors))| MinuteCount {
                at: rfc3339_millis(UNIX_EPOCH + Duration::from_secs(minute * 60)),
                calls,
                errors,
            })
            .collect())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use hangar_core::journal::{AuditEntry, CallOutcome};

    use super::*;

    fn call(identity: &str, mcp_server: &str, outcome: CallOutcome, error_type: Option<&str>) -> Happened {
        Happened::Audit(AuditEntry {
            id: 0,
            at: String::new(),
            identity: identity.into(),
            profile: None,
            mcp_server: mcp_server.into(),
            tool: Some("add".into()),
            method: "tools/call".into(),
            outcome,
            error_type: error_type.map(str::to_owned),
            duration_ms: 1.0,
            bytes_in: 1,
            bytes_out: 1,
            arguments: None,
            trace_id: None,
            rule: None,
            redacted: Vec::new(),
            approval: None,
        })
    }

    /// A block whose body sits in a page SQLite finds damaged is skipped with a gap; the blocks
    /// around it are read.
    #[test]
    fn a_damaged_page_costs_only_the_blocks_in_it() {
        use std::io::{Seek, SeekFrom, Write};
        let (_dir, journal, reader) = opened();
        let mut state = 7_u64;
        let noise: String = (0..200_000)
            .map(|_| {
                state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                char::from_digit((state >> 60) as u32, 16).unwrap()
            })
            .collect();
        let small = journal.record(call("a", "math", CallOutcome::Ok, None));
        journal.flush();
        let big = Happened::Audit(AuditEntry {
            arguments: Some(serde_json::json!({"text": noise})),
            ..match call("b", "math", CallOutcome::Ok, None) {
                Happened::Audit(entry) => entry,
                _ => unreachable!(),
            }
        });
        let big = journal.record(big);
        journal.flush();
        let last = journal.record(call("c", "math", CallOutcome::Ok, None));
        journal.flush();
        let db = Connection::open(journal.path()).unwrap();
        db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
        let page_size: u64 = db.pragma_query_value(None, "page_size", |row| row.get(0)).unwrap();
        let pages: u64 = db.pragma_query_value(None, "page_count", |row| row.get(0)).unwrap();
        drop(db);
        // The big block's body fills most pages: one in the middle is one of its overflow pages.
        let mut file = std::fs::OpenOptions::new().write(true).open(journal.path()).unwrap();
        file.seek(SeekFrom::Start(pages / 2 * page_size)).unwrap();
        file.write_all(&vec![0; page_size as usize]).unwrap();
        drop(file);
        let found = reader.after(&journal, 0, 100, &Filter::default()).unwrap();
        assert_eq!(ids(&found), [small, big, last], "{found:?}");
        let Happened::Gap { reason: Some(reason), dropped: 1 } = &found.events[1].what else {
            panic!("{:?}", found.events[1])
        };
        assert!(reason.contains("corrupt"), "{reason}");
        let newest = reader.newest(&journal, 100, &Filter::default()).unwrap();
        assert_eq!(ids(&newest), [small, big, last]);
    }

    fn ids(found: &Found) -> Vec<u64> {
        found.events.iter().map(|e| e.id).collect()
    }

    fn opened() -> (tempfile::TempDir, Arc<Journal>, Reader) {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let reader = Reader::new(journal.path());
        (dir, journal, reader)
    }

    #[test]
    fn pages_follow_each_other_with_filters_in_sql_and_on_the_tail() {
        let (_dir, journal, reader) = opened();
        for n in 0..30 {
            let (who, outcome, error) = match n % 3 {
                0 => ("ci", CallOutcome::Ok, None),
                1 => ("ci", CallOutcome::Error, Some("forbidden")),
                _ => ("dev", CallOutcome::IsError, None),
            };
            journal.record(call(who, if n % 2 == 0 { "math" } else { "web" }, outcome, error));
        }
        journal.record(Happened::Gap { dropped: 1, reason: None });
        // Half written, half only in the tail: the pages must not care.
        journal.flush();
        for _ in 0..10 {
            journal.record(call("ci", "math", CallOutcome::Ok, None));
        }
        let audit = Filter { kind: Some("audit"), ..Filter::default() };
        let mut since = 0;
        let mut all = Vec::new();
        loop {
            let page = reader.after(&journal, since, 7, &audit).unwrap();
            if page.events.is_empty() {
                break;
            }
            all.extend(ids(&page));
            since = page.next;
        }
        assert_eq!(all, (1..=30).chain(32..=41).collect::<Vec<_>>(), "every audit entry once, in order");

        let forbidden = Filter { outcome: Some("forbidden".into()), ..audit.clone() };
        assert_eq!(ids(&reader.after(&journal, 0, 100, &forbidden).unwrap()), (2..=29).step_by(3).collect::<Vec<_>>());
        let is_error = Filter { outcome: Some("is_error".into()), identity: Some("dev".into()), ..audit.clone() };
        assert_eq!(reader.after(&journal, 0, 100, &is_error).unwrap().events.len(), 10);
        let web_ok = Filter { outcome: Some("ok".into()), mcp_server: Some("web".into()), ..audit.clone() };
        assert_eq!(ids(&reader.after(&journal, 0, 100, &web_ok).unwrap()), [4, 10, 16, 22, 28]);

        let newest = reader.newest(&journal, 3, &audit).unwrap();
        assert_eq!((ids(&newest), newest.next), (vec![39, 40, 41], 41), "newest last; next is the latest");
        let ci_math = Filter { identity: Some("ci".into()), mcp_server: Some("math".into()), ..audit };
        assert_eq!(ids(&reader.newest(&journal, 2, &ci_math).unwrap()), [40, 41]);
    }

    #[test]
    fn a_burst_longer_than_the_tail_is_read_whole_before_it_is_written() {
        let (_dir, journal, reader) = opened();
        // Recorded faster than the writer's commit interval: most of them wait for it, far more
        // than the tail holds.
        let burst = 4 * crate::journal::TAIL as u64 + 7;
        for n in 0..burst {
            let outcome = if n % 4 == 0 { CallOutcome::Error } else { CallOutcome::Ok };
            journal.record(call("ci", "math", outcome, None));
        }
        assert_eq!(reader.latest_id(&journal).unwrap(), burst);
        let newest = reader.newest(&journal, burst as usize, &Filter::default()).unwrap();
        assert_eq!(ids(&newest), (1..=burst).collect::<Vec<_>>(), "every entry, once, in order");
        assert_eq!(newest.next, burst);
        let rates = reader.rates(&journal, 5, SystemTime::now(), |_, _| true).unwrap();
        let total = rates.iter().fold((0, 0), |(c, e), m| (c + m.calls, e + m.errors));
        assert_eq!(total, (burst, burst.div_ceil(4)), "each call counted once");
        for n in 0..burst {
            journal.record(call("ci", if n % 2 == 0 { "math" } else { "web" }, CallOutcome::Ok, None));
        }
        let web = Filter { mcp_server: Some("web".into()), ..Filter::default() };
        let page = reader.after(&journal, burst, burst as usize, &web).unwrap();
        assert_eq!(ids(&page), (burst + 2..=2 * burst).step_by(2).collect::<Vec<_>>());
    }

    #[test]
    fn a_filter_that_drops_nearly_everything_still_moves_the_cursor() {
        let (_dir, journal, reader) = opened();
        for _ in 0..(SCAN_LIMIT + 5) {
            journal.record(call("ci", "hidden", CallOutcome::Ok, None));
        }
        journal.record(call("ci", "seen", CallOutcome::Ok, None));
        journal.flush();
        let written =
            reader.with(|c| c.query_row("SELECT SUM(entries) FROM blocks", [], |r| r.get::<_, i64>(0))).unwrap();
        assert_eq!(written, SCAN_LIMIT as i64 + 6);
        let keep: Keep = Arc::new(|e: &JournalEvent| e.what.mcp_server() == Some("seen"));
        let filter = Filter { keep: Some(keep), ..Filter::default() };
        let first = reader.after(&journal, 0, 10, &filter).unwrap();
        assert!(first.events.is_empty(), "{:?}", (ids(&first), first.next));
        assert_eq!(first.next, SCAN_LIMIT as u64, "bounded, and continued from where it stopped");
        let second = reader.after(&journal, first.next, 10, &filter).unwrap();
        assert_eq!(ids(&second), [SCAN_LIMIT as u64 + 6]);
    }

    #[test]
    fn rates_count_calls_and_failures_per_minute_as_keep_allows() {
        let (_dir, journal, reader) = opened();
        journal.record(call("ci", "math", CallOutcome::Ok, None));
        journal.record(call("ci", "math", CallOutcome::IsError, None));
        journal.record(call("dev", "math", CallOutcome::Error, Some("timeout")));
        journal.record(Happened::Gap { dropped: 2, reason: None });
        // An admin action is audited, but is no call: the chart leaves it out.
        let Happened::Audit(mut start) = call("ci", "math", CallOutcome::Error, Some("forbidden")) else { return };
        (start.method, start.tool) = ("start".into(), None);
        journal.record(Happened::Audit(start.clone()));
        journal.flush();
        let now = SystemTime::now();
        let all = reader.rates(&journal, 5, now, |_, _| true).unwrap();
        assert_eq!(all.len(), 5);
        let last = all.last().unwrap();
        // The entries may have landed in the minute before `now` if it just turned.
        let total: (u64, u64) = all.iter().fold((0, 0), |(c, e), m| (c + m.calls, e + m.errors));
        assert_eq!(total, (3, 2));
        assert!(last.at.ends_with(":00.000Z"), "{}", last.at);
        let ci_only = reader.rates(&journal, 5, now, |_, identity| identity == "ci").unwrap();
        assert_eq!(ci_only.iter().map(|m| (m.calls, m.errors)).fold((0, 0), |a, m| (a.0 + m.0, a.1 + m.1)), (2, 1));
        // Not written yet (or just written): counted once either way, an admin action never.
        journal.record(call("ci", "math", CallOutcome::Ok, None));
        journal.record(Happened::Audit(start));
        let more = reader.rates(&journal, 5, SystemTime::now(), |_, _| true).unwrap();
        assert_eq!(more.iter().map(|m| m.calls).sum::<u64>(), 4);
    }
}
