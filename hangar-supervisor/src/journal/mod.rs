//! The journal: an SQLite database in the state directory (`journal.sqlite`, WAL), of which the
//! supervisor is the only writer. Every entry gets its id here, at once, is broadcast live and
//! kept in a short in-memory tail, and is written by the writer thread (`writer.rs`) in batches,
//! off every call's path.
//!
//! Schema (`schema.rs`, versioned by `PRAGMA user_version`):
//! - `blocks`: the entries, a block of them per row (`first_id`, `last_id`, `first_at_ms`,
//!   `last_at_ms`, `entries`, `body` = each [`JournalEvent`]'s JSON, a line each; `block.rs`);
//! - `minutes`: audited calls and failures per minute, server and identity (the chart);
//! - `servers`: what a server's next life should remember (its last lifecycle and catalog),
//!   keyed by server id and the hash of its config.
//! - `credentials`: upstream credentials the hangar obtained, sealed (`crate::vault` reads and
//!   writes them on a connection of its own; the journal only makes the table).

mod block;
mod integrity;
mod line;
mod memory;
pub mod read;
mod retention;
mod schema;
mod unwritten;
mod writer;

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hangar_core::journal::{Happened, JournalConfig, JournalEvent};
use hangar_core::metrics::JournalCounts;
use hangar_core::sync::Unpoisoned;
use hangar_core::time::rfc3339_millis;
use rusqlite::Connection;
use tokio::sync::broadcast;

pub use memory::Remembered;
pub use schema::OpenError;
#[allow(unused_imports, reason = "the crash-safety promise, named for readers and tests")]
pub use writer::COMMIT_INTERVAL;

/// The database's file name in the state directory.
pub const FILE_NAME: &str = "journal.sqlite";
/// How many recent entries are kept in memory, so a replay sees those not yet written. Enough
/// for a commit interval of a busy hangar's calls, and no more: every entry pushed out of it is
/// freed on a call's path, and the 4,096 it once held were about 2 MB (docs/bench-log/2026.md, "Turns, not
/// runs"). A reader that finds the writer further behind than the tail reaches has it write
/// first (`read.rs`).
const TAIL: usize = 256;
/// How far back the per-minute counts (the chart) reach; older minutes are pruned.
pub const CHARTED_MINUTES: u32 = 1440;

pub struct Journal {
    path: PathBuf,
    next_id: AtomicU64,
    live: broadcast::Sender<JournalEvent>,
    /// The recent entries, for replays and readers (the writer has their lines).
    tail: Mutex<VecDeque<Arc<Recorded>>>,
    writer: writer::Writer,
    /// What the last run remembered of each server, by id (read once, at open).
    recalled: Mutex<HashMap<String, Remembered>>,
    /// Held while this journal is open: one supervisor per state directory.
    _lock: Option<File>,
}

impl Journal {
    /// Opens (creating or migrating) the journal in `state_dir`, starts its writer, and checks
    /// the database's integrity in the background (`integrity.rs`).
    pub fn open(state_dir: &Path) -> Result<Arc<Journal>, OpenError> {
        let path = state_dir.join(FILE_NAME);
        let (connection, lock, was_empty) = schema::open(state_dir, &path)?;
        let journal = Journal::start(path, connection, Some(lock))?;
        integrity::start(&journal.path);
        if was_empty {
            // Said aloud, and kept: every reader of the journal sees where its history ends.
            tracing::warn!(path = %journal.path.display(), "the journal file was empty (0 bytes); whatever it held is lost, and a new journal begins");
            journal.record(Happened::Gap {
                dropped: 0,
                reason: Some("the journal file was empty at start (0 bytes): whatever it held is lost".into()),
            });
        }
        Ok(journal)
    }

    /// A journal in memory, for unit tests.
    #[cfg(test)]
    pub fn in_memory() -> Arc<Journal> {
        let connection = schema::in_memory().expect("an in-memory journal");
        Journal::start(PathBuf::from(":memory:"), connection, None).expect("an in-memory journal")
    }

    /// Reads where the last run ended (its last id, each server's memory) and starts the writer.
    fn start(path: PathBuf, connection: Connection, lock: Option<File>) -> Result<Arc<Journal>, OpenError> {
        let last_id = schema::last_id(&connection, &path)?;
        let recalled =
            memory::recall(&connection).map_err(|source| OpenError::Unreadable { path: path.clone(), source })?;
        Ok(Arc::new_cyclic(|journal: &std::sync::Weak<Journal>| Journal {
            path,
            next_id: AtomicU64::new(last_id + 1),
            live: broadcast::channel(1024).0,
            tail: Mutex::new(VecDeque::with_capacity(TAIL)),
            writer: writer::Writer::start(connection, gap_marker(journal.clone())),
            recalled: Mutex::new(recalled),
            _lock: lock,
        }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records what happened: gives it the next id, broadcasts it, and packs it for the writer.
    /// On the caller's path (every audited call's): the entry is written into its block here
    /// (`unwritten.rs`), and the tail's oldest entry, pushed out, is freed here too, so nothing
    /// of it crosses to the writer's thread.
    pub fn record(&self, what: Happened) -> u64 {
        let at_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        // The id is taken, kept and broadcast under the tail's lock, so the tail and every live
        // follower see ids in order: a `Last-Event-ID` never skips a lower id sent later.
        // It is packed under the lock too, so blocks hold entries in id order and never overlap.
        let mut tail = self.tail.locked();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let entry = Arc::new(Recorded { id, at_ms, what });
        let retired = if tail.len() == TAIL { tail.pop_front() } else { None };
        if self.live.receiver_count() > 0 {
            let _ = self.live.send(entry.event());
        }
        self.writer.queue(&entry);
        tail.push_back(entry);
        drop(tail);
        drop(retired);
        id
    }

    /// Every entry recorded from now on, as it is recorded.
    pub fn subscribe(&self) -> broadcast::Receiver<JournalEvent> {
        self.live.subscribe()
    }

    /// The recent entries after `since` still held in memory, and whether they reach back to it
    /// (if not, the older ones are read from the database).
    pub fn tail_after(&self, since: u64) -> (Vec<JournalEvent>, bool) {
        // Rendered once the lock is released: recording waits on it.
        let (recorded, complete) = self.recorded_after(since);
        (recorded.iter().map(|e| e.event()).collect(), complete)
    }

    /// The recent entries after `since` still held in memory, as recorded (not rendered), and
    /// whether they reach back to it.
    pub(crate) fn recorded_after(&self, since: u64) -> (Vec<Arc<Recorded>>, bool) {
        let tail = self.tail.locked();
        let complete = tail.front().is_none_or(|first| first.id <= since + 1);
        (tail.iter().filter(|e| e.id > since).cloned().collect(), complete)
    }

    /// The newest id recorded (0 if none yet), written or not.
    pub fn newest_id(&self) -> u64 {
        self.next_id.load(Ordering::Relaxed).saturating_sub(1)
    }

    /// Saves what a server's next life should know (replacing what was saved of it before).
    pub fn remember(&self, memory: Remembered) {
        self.writer.remember(memory);
    }

    /// What the last run remembered of `mcp_server`, taken once (a server built by a reload
    /// starts from what its predecessor knew, not from the database).
    pub fn recall(&self, mcp_server: &str) -> Option<Remembered> {
        self.recalled.locked().remove(mcp_server)
    }

    /// Sets how long entries are kept (`journal:`), at start and on every reload; pruning runs on
    /// the writer thread at once and hourly.
    pub fn retain(&self, config: &JournalConfig) {
        self.writer.retain(config.clone());
    }

    /// Entries written and dropped so far (`/metrics`).
    pub fn counts(&self) -> JournalCounts {
        self.writer.counts()
    }

    /// Waits until everything recorded so far is written (at shutdown).
    pub fn flush(&self) {
        self.writer.flush();
    }
}

/// An entry as the journal keeps it until it is read: its time a number (ms since the epoch),
/// rendered (RFC 3339) only for a reader or the writer.
#[derive(Debug)]
pub(crate) struct Recorded {
    pub id: u64,
    pub at_ms: i64,
    pub what: Happened,
}

impl Recorded {
    /// The entry as readers see it.
    pub fn event(&self) -> JournalEvent {
        JournalEvent { id: self.id, at: self.at(), what: self.what.clone() }
    }

    /// Its time, RFC 3339 with milliseconds (as `JournalEvent::at`).
    pub fn at(&self) -> String {
        rfc3339_millis(UNIX_EPOCH + Duration::from_millis(self.at_ms.max(0) as u64))
    }
}

/// Renders entries' times for the writer, as [`Recorded::at`] does: the whole text once per
/// second, then only its milliseconds (a batch's entries share their second, and formatting a
/// date cost about a tenth of an entry's write).
#[derive(Default)]
pub(crate) struct Times {
    second: Option<i64>,
    text: String,
}

impl Times {
    pub fn of(&mut self, at_ms: i64) -> &str {
        let at_ms = at_ms.max(0);
        let second = at_ms / 1000;
        // `YYYY-MM-DDTHH:MM:SS.mmmZ`: the milliseconds are bytes 20 to 22.
        if self.second != Some(second) || self.text.len() != 24 || self.text.as_bytes()[19] != b'.' {
            self.text = rfc3339_millis(UNIX_EPOCH + Duration::from_millis(at_ms as u64));
            self.second = Some(second);
        } else {
            let millis = at_ms % 1000;
            let digits = [b'0' + (millis / 100) as u8, b'0' + (millis / 10 % 10) as u8, b'0' + (millis % 10) as u8];
            self.text.replace_range(20..23, std::str::from_utf8(&digits).unwrap_or("000"));
        }
        &self.text
    }
}

/// What an entry files under besides its kind and server (what readers filter on): who (audit
/// entries, actions, reloads), and an audit entry's outcome and error type.
pub(crate) struct Columns<'a> {
    pub identity: Option<&'a str>,
    pub outcome: Option<&'static str>,
    pub error_type: Option<&'a str>,
}

impl<'a> Columns<'a> {
    pub fn of(what: &'a Happened) -> Columns<'a> {
        match what {
            Happened::Audit(entry) => Columns {
                identity: Some(&entry.identity),
                outcome: Some(hangar_core::wire_name::of(&entry.outcome)),
                error_type: entry.error_type.as_deref(),
            },
            Happened::Action { identity, .. } | Happened::Reload { identity, .. } => {
                Columns { identity: Some(identity), outcome: None, error_type: None }
            }
            _ => Columns { identity: None, outcome: None, error_type: None },
        }
    }
}

/// How the writer marks a gap: as an entry of the journal like any other.
fn gap_marker(journal: std::sync::Weak<Journal>) -> impl Fn(u64) + Send + 'static {
    move |dropped| {
        if let Some(journal) = journal.upgrade() {
            journal.record(Happened::Gap { dropped, reason: None });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writers_times_read_as_every_surface_renders_them() {
        let mut times = Times::default();
        let start = 1_764_458_422_990_i64;
        for at_ms in (start..start + 2_100).step_by(7).chain([start, 0, -5, start + 86_400_000]) {
            let recorded = Recorded { id: 1, at_ms, what: Happened::Gap { dropped: 0, reason: None } };
            assert_eq!(times.of(at_ms), recorded.at(), "at {at_ms}");
        }
    }
}
