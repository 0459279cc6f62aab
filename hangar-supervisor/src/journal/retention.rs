//! Pruning: entries older than `journal.retention_days` go (hourly, and at start); per-minute
//! counts older than the chart reaches go too. Freed pages go back to the file system
//! (`auto_vacuum = INCREMENTAL`, set when the database is created), so the file never grows
//! forever. Run by the writer thread; the time is passed in.
//!
//! The size cap, `journal.max_mb`, is held as the journal grows: after every batch the writer
//! compares the pages in use with it ([`over_cap`], two pragmas), and past it [`fit`] makes room
//! in this order, so that no identity's calls vanish while another's, newer and larger, stay:
//! 1. the arguments of audit entries go, oldest first, over every identity: each entry stays,
//!    its `arguments` reading [`ARGUMENTS_PRUNED`] (a caller's bulk is in its arguments: without
//!    them an entry is a few hundred bytes whoever made it);
//! 2. only once no entry has arguments left to drop do whole entries go, oldest first, a whole
//!    block at a time.

use hangar_core::journal::{Happened, JournalConfig, JournalEvent};
use rusqlite::{Connection, OptionalExtension};

use super::block::{self, Body};
use super::line;

/// What an audit entry's `arguments` read once the size cap took them.
pub const ARGUMENTS_PRUNED: &str = "[pruned: journal.max_mb]";
/// How many blocks one step of [`fit`] rewrites before it measures again.
const BLOCKS_PER_STEP: i64 = 8;

const DAY_MS: i64 = 24 * 3600 * 1000;

#[derive(Debug, Default, PartialEq)]
pub struct Pruned {
    pub by_age: usize,
    pub by_size: usize,
    /// Entries whose arguments the size cap took (the entries stay).
    pub arguments: usize,
}

impl Pruned {
    pub fn any(&self) -> bool {
        self.by_age + self.by_size + self.arguments > 0
    }
}

/// Where arguments were last taken up to: blocks starting at or before `first_id` have none
/// left. In memory only; after a restart the first pass reads the oldest blocks again.
#[derive(Debug, Default)]
pub struct Stripped {
    pub first_id: i64,
}

pub fn prune(connection: &Connection, now_ms: i64, config: &JournalConfig) -> rusqlite::Result<Pruned> {
    let cutoff = now_ms.saturating_sub(i64::from(config.retention_days).saturating_mul(DAY_MS));
    // Whole blocks: those before the first whose newest entry is as recent as the cutoff (ids
    // and times rise together), or all. A block that straddles the cutoff stays until its
    // newest entry is old enough.
    let first_kept: Option<i64> = connection
        .query_row("SELECT first_id FROM blocks WHERE last_at_ms >= ?1 ORDER BY first_id LIMIT 1", [cutoff], |row| {
            row.get(0)
        })
        .optional()?;
    let by_age = delete_blocks_before(connection, first_kept.unwrap_or(i64::MAX))?;
    // The chart's counts reach back a day at most, and never past the retention.
    let charted_from = now_ms.saturating_sub(i64::from(super::CHARTED_MINUTES) * 60_000).max(cutoff);
    connection.execute("DELETE FROM minutes WHERE minute < ?1", [charted_from.div_euclid(60_000)])?;
    let mut pruned = fit(connection, config, &mut Stripped::default())?;
    pruned.by_age = by_age;
    if by_age > 0 && pruned.by_size + pruned.arguments == 0 {
        vacuum(connection)?;
    }
    Ok(pruned)
}

/// Whether the database holds more than `journal.max_mb` (cheap: two pragmas).
pub fn over_cap(connection: &Connection, config: &JournalConfig) -> rusqlite::Result<bool> {
    Ok(used_bytes(connection)? > cap(config))
}

fn cap(config: &JournalConfig) -> u64 {
    config.max_mb.saturating_mul(1024 * 1024)
}

/// Brings the database within `journal.max_mb`: arguments first (oldest first, from past
/// `stripped`), then whole blocks (oldest first). See the module's doc.
pub fn fit(connection: &Connection, config: &JournalConfig, stripped: &mut Stripped) -> rusqlite::Result<Pruned> {
    let cap = cap(config);
    let mut pruned = Pruned::default();
    while used_bytes(connection)? > cap {
        let taken = strip_arguments(connection, stripped)?;
        match taken {
            None => break,
            Some(entries) => pruned.arguments += entries,
        }
    }
    loop {
        let used = used_bytes(connection)?;
        if used <= cap {
            break;
        }
        // The share of the blocks that is over the cap, as a first guess (and at least one).
        let blocks: i64 = connection.query_row("SELECT COUNT(*) FROM blocks", [], |row| row.get(0))?;
        let over = ((blocks as u128 * u128::from(used - cap)).div_ceil(u128::from(used)) as i64).max(1);
        let Some(last_over): Option<i64> = connection.query_row(
            "SELECT MAX(first_id) FROM (SELECT first_id FROM blocks ORDER BY first_id LIMIT ?1)",
            [over],
            |row| row.get(0),
        )?
        else {
            break;
        };
        let deleted = delete_blocks_before(connection, last_over.saturating_add(1))?;
        if deleted == 0 {
            break;
        }
        pruned.by_size += deleted;
    }
    if pruned.by_size + pruned.arguments > 0 {
        vacuum(connection)?;
    }
    Ok(pruned)
}

/// Gives freed pages back to the file system.
fn vacuum(connection: &Connection) -> rusqlite::Result<()> {
    // Each step of the pragma gives back one page: run it to the end.
    let mut vacuum = connection.prepare("PRAGMA incremental_vacuum")?;
    let mut steps = vacuum.query([])?;
    while steps.next()?.is_some() {}
    Ok(())
}

/// Takes the arguments of the audit entries in the next few blocks past `stripped`: how many
/// entries lost them, or `None` when no block is left to look at. A block that cannot be read
/// (corrupt) is passed over, as readers pass it.
fn strip_arguments(connection: &Connection, stripped: &mut Stripped) -> rusqlite::Result<Option<usize>> {
    let mut select = connection
        .prepare_cached("SELECT first_id, body FROM blocks WHERE first_id > ?1 ORDER BY first_id LIMIT ?2")?;
    let rows: Vec<(i64, rusqlite::Result<Body>)> = select
        .query_map([stripped.first_id, BLOCKS_PER_STEP], |row| Ok((row.get(0)?, row.get::<_, Body>(1))))?
        .collect::<rusqlite::Result<_>>()?;
    let Some((last, _)) = rows.last() else { return Ok(None) };
    let last = *last;
    let mut taken = 0;
    let mut packer = block::Packer::default();
    let mut update = connection.prepare_cached("UPDATE blocks SET body = ?2 WHERE first_id = ?1")?;
    for (first_id, body) in rows {
        let Ok(body) = body else { continue };
        let (text, entries) = without_arguments(&body.0);
        if entries == 0 {
            continue;
        }
        let packed = packer.pack(&text).map_err(|err| rusqlite::Error::ToSqlConversionFailure(err.into()))?;
        update.execute(rusqlite::params![first_id, packed])?;
        taken += entries;
    }
    stripped.first_id = last;
    Ok(Some(taken))
}

/// A block's text with its audit entries' arguments taken, and how many entries lost them.
fn without_arguments(body: &str) -> (Vec<u8>, usize) {
    let mut out = Vec::with_capacity(body.len());
    let mut taken = 0;
    for (n, (_, text)) in block::lines(body).enumerate() {
        if n > 0 {
            out.push(b'\n');
        }
        let event = text.contains("\"arguments\":").then(|| serde_json::from_str::<JournalEvent>(text).ok()).flatten();
        match event {
            Some(JournalEvent { id, what: Happened::Audit(mut entry), .. })
                if entry.arguments.as_ref().is_some_and(|a| a.as_str() != Some(ARGUMENTS_PRUNED)) =>
            {
                let at = std::mem::take(&mut entry.at);
                entry.id = 0;
                entry.arguments = Some(serde_json::Value::String(ARGUMENTS_PRUNED.to_owned()));
                line::write(&mut out, id, &at, &Happened::Audit(entry));
                taken += 1;
            }
            _ => out.extend_from_slice(text.as_bytes()),
        }
    }
    (out, taken)
}

/// Deletes the blocks that start before `first_id`; how many entries they held.
fn delete_blocks_before(connection: &Connection, first_id: i64) -> rusqlite::Result<usize> {
    let entries: i64 = connection.query_row(
        "SELECT COALESCE(SUM(entries), 0) FROM blocks WHERE first_id < ?1",
        [first_id],
        |row| row.get(0),
    )?;
    connection.execute("DELETE FROM blocks WHERE first_id < ?1", [first_id])?;
    Ok(entries.max(0) as usize)
}

/// The bytes the database's pages hold, free pages not counted.
fn used_bytes(connection: &Connection) -> rusqlite::Result<u64> {
    let pragma = |name: &str| connection.pragma_query_value(None, name, |row| row.get::<_, i64>(0));
    let used = pragma("page_count")? - pragma("freelist_count")?;
    Ok(used.max(0) as u64 * pragma("page_size")?.max(0) as u64)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn journal() -> Connection {
        super::super::schema::in_memory().unwrap()
    }

    /// A block of `entries` entries from `first_id`, all at `at_ms`.
    fn insert(connection: &Connection, first_id: i64, entries: i64, at_ms: i64, body: &str) {
        connection
            .execute(
                "INSERT INTO blocks (first_id, last_id, first_at_ms, last_at_ms, entries, body)
                 VALUES (?1, ?2, ?3, ?3, ?4, ?5)",
                rusqlite::params![first_id, first_id + entries - 1, at_ms, entries, body],
            )
            .unwrap();
    }

    fn first_ids(connection: &Connection) -> Vec<i64> {
        let mut select = connection.prepare("SELECT first_id FROM blocks ORDER BY first_id").unwrap();
        select.query_map([], |row| row.get(0)).unwrap().map(Result::unwrap).collect()
    }

    fn minutes(connection: &Connection) -> Vec<i64> {
        let mut select = connection.prepare("SELECT minute FROM minutes ORDER BY minute").unwrap();
        select.query_map([], |row| row.get(0)).unwrap().map(Result::unwrap).collect()
    }

    #[test]
    fn blocks_older_than_the_retention_go_and_the_rest_stay() {
        let connection = journal();
        let now = 100 * DAY_MS;
        insert(&connection, 1, 2, now - 31 * DAY_MS, "{}");
        insert(&connection, 3, 3, now - 30 * DAY_MS - 1, "{}");
        insert(&connection, 6, 1, now - 30 * DAY_MS, "{}");
        insert(&connection, 7, 4, now, "{}");
        for minute in [now - 2 * DAY_MS, now - DAY_MS - 60_000, now - DAY_MS + 60_000, now] {
            connection.execute("INSERT INTO minutes VALUES (?1, 'math', 'ci', 1, 0)", [minute / 60_000]).unwrap();
        }
        let config = JournalConfig { retention_days: 30, max_mb: 512 };
        assert_eq!(prune(&connection, now, &config).unwrap(), Pruned { by_age: 5, ..Pruned::default() });
        assert_eq!(first_ids(&connection), [6, 7]);
        assert_eq!(
            minutes(&connection),
            [(now - DAY_MS + 60_000) / 60_000, now / 60_000],
            "the chart's counts go past a day"
        );
        assert_eq!(prune(&connection, now, &config).unwrap(), Pruned::default(), "nothing more to prune");
        let short = JournalConfig { retention_days: 1, max_mb: 512 };
        assert_eq!(prune(&connection, now + DAY_MS, &short).unwrap(), Pruned { by_age: 1, ..Pruned::default() });
        assert_eq!(minutes(&connection), [now / 60_000], "nor past the retention");
    }

    /// Hex that lz4 cannot shrink much (an LCG's, seeded by `seed`), `len` digits.
    fn noise(seed: u64, len: usize) -> String {
        let mut state = seed;
        (0..len)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                format!("{:x}", state >> 60)
            })
            .collect()
    }

    /// A packed block of audit entries `ids`, by `identity`, each with `bytes` of arguments.
    fn insert_audits(connection: &Connection, ids: std::ops::Range<u64>, identity: &str, bytes: usize) {
        let (mut block, mut times) = (block::Block::default(), super::super::Times::default());
        for id in ids {
            let entry = hangar_core::journal::AuditEntry {
                id: 0,
                at: String::new(),
                identity: identity.into(),
                profile: None,
                mcp_server: "math".into(),
                tool: Some("echo".into()),
                method: "tools/call".into(),
                outcome: hangar_core::journal::CallOutcome::Ok,
                error_type: None,
                duration_ms: 1.0,
                bytes_in: 1,
                bytes_out: 1,
                arguments: Some(serde_json::json!({"text": noise(id, bytes)})),
                trace_id: None,
                rule: None,
                redacted: Vec::new(),
                approval: None,
            };
            block.push(&super::super::Recorded { id, at_ms: 50 * DAY_MS, what: Happened::Audit(entry) }, &mut times);
        }
        let packed = block::Packer::default().pack(&block.body).unwrap().to_vec();
        connection
            .execute(
                "INSERT INTO blocks (first_id, last_id, first_at_ms, last_at_ms, entries, body)
                 VALUES (?1, ?2, ?3, ?3, ?4, ?5)",
                rusqlite::params![
                    block.first_id as i64,
                    block.last_id as i64,
                    50 * DAY_MS,
                    block.entries as i64,
                    packed
                ],
            )
            .unwrap();
    }

    fn read_all(connection: &Connection) -> Vec<JournalEvent> {
        let mut select = connection.prepare("SELECT body FROM blocks ORDER BY first_id").unwrap();
        let bodies: Vec<Body> = select.query_map([], |row| row.get(0)).unwrap().map(Result::unwrap).collect();
        bodies.iter().flat_map(|b| block::lines(&b.0).map(|(_, l)| serde_json::from_str(l).unwrap())).collect()
    }

    #[test]
    fn past_the_size_cap_arguments_go_before_any_entry_oldest_first() {
        let connection = journal();
        insert_audits(&connection, 1..4, "admin", 10);
        for block in 0..40 {
            insert_audits(&connection, 4 + block * 10..14 + block * 10, "dev", 6000);
        }
        assert!(used_bytes(&connection).unwrap() > 1024 * 1024);
        let config = JournalConfig { retention_days: 30, max_mb: 1 };
        let pruned = fit(&connection, &config, &mut Stripped::default()).unwrap();
        assert_eq!(pruned.by_size, 0, "no entry went: {pruned:?}");
        assert!(pruned.arguments > 0);
        assert!(used_bytes(&connection).unwrap() <= 1024 * 1024);
        let all = read_all(&connection);
        assert_eq!(all.len(), 403, "every entry stays");
        let arguments = |e: &JournalEvent| match &e.what {
            Happened::Audit(entry) => entry.arguments.clone().unwrap(),
            _ => unreachable!(),
        };
        assert_eq!(arguments(&all[0]), serde_json::json!(ARGUMENTS_PRUNED), "the oldest's went first");
        assert_ne!(arguments(&all[402]), serde_json::json!(ARGUMENTS_PRUNED), "the newest keep theirs");
        assert!(all.iter().all(|e| e.id > 0), "ids read back");
    }

    #[test]
    fn past_the_size_cap_the_oldest_blocks_go_until_it_fits() {
        let connection = journal();
        let body = "x".repeat(10_000);
        for block in 0..300 {
            insert(&connection, block * 10 + 1, 10, 50 * DAY_MS, &body);
        }
        assert!(used_bytes(&connection).unwrap() > 2 * 1024 * 1024);
        let config = JournalConfig { retention_days: 30, max_mb: 1 };
        let pruned = prune(&connection, 50 * DAY_MS, &config).unwrap();
        assert_eq!(pruned.by_age, 0);
        assert!(pruned.by_size >= 2000 && pruned.by_size < 2900, "{pruned:?}");
        assert_eq!(pruned.by_size % 10, 0, "whole blocks");
        assert!(used_bytes(&connection).unwrap() <= 1024 * 1024);
        let free: i64 = connection.pragma_query_value(None, "freelist_count", |row| row.get(0)).unwrap();
        assert_eq!(free, 0, "the freed pages were given back (auto_vacuum = INCREMENTAL)");
        let left = first_ids(&connection);
        assert_eq!(left.last(), Some(&2991), "the newest stay");
        assert_eq!(left.len() * 10, 3000 - pruned.by_size);
        assert_eq!(left[0], 3001 - 10 * left.len() as i64, "the oldest went first");
    }
}
