//! The writer thread: the journal's only writer. Entries arrive on a bounded queue and are
//! written in batches, one transaction per batch.

use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hangar_core::journal::{Happened, JournalEvent};
use rusqlite::{Connection, params};

use super::memory::Remembered;

/// How many entries may wait for the writer before new ones are dropped.
const QUEUE: usize = 65_536;
/// The most entries one transaction writes.
const BATCH: usize = 1024;
/// How long the writer gathers a batch before it commits.
pub const COMMIT_INTERVAL: Duration = Duration::from_millis(100);

enum Job {
    Write(i64, JournalEvent),
    Remember(Remembered),
    Flush(mpsc::Sender<()>),
}

pub struct Writer {
    queue: mpsc::SyncSender<Job>,
}

impl Writer {
    pub fn start(connection: Connection) -> Writer {
        let (queue, jobs) = mpsc::sync_channel(QUEUE);
        std::thread::Builder::new()
            .name("journal-writer".into())
            .spawn(move || run(connection, jobs))
            .map(|_| ())
            .unwrap_or_else(|err| tracing::error!(%err, "the journal's writer thread did not start"));
        Writer { queue }
    }

    pub fn queue(&self, at: SystemTime, event: JournalEvent) {
        let at_ms = at.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
        if self.queue.try_send(Job::Write(at_ms, event)).is_err() {
            tracing::warn!("journal queue full: an entry was dropped");
        }
    }

    /// Queues a server's memory; it replaces what was remembered of it.
    pub fn remember(&self, memory: Remembered) {
        if self.queue.try_send(Job::Remember(memory)).is_err() {
            tracing::warn!("journal queue full: a server's memory was not saved");
        }
    }

    pub fn flush(&self) {
        let (done, wait) = mpsc::channel();
        if self.queue.send(Job::Flush(done)).is_ok() {
            let _ = wait.recv_timeout(Duration::from_secs(5));
        }
    }
}

fn run(mut connection: Connection, jobs: mpsc::Receiver<Job>) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut memories = Vec::new();
    let mut flushes = Vec::new();
    while let Ok(first) = jobs.recv() {
        let deadline = std::time::Instant::now() + COMMIT_INTERVAL;
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match job {
                Job::Write(at_ms, event) => batch.push((at_ms, event)),
                Job::Remember(memory) => memories.push(memory),
                Job::Flush(done) => {
                    flushes.push(done);
                    break;
                }
            }
            if batch.len() >= BATCH {
                break;
            }
            next = jobs.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())).ok();
        }
        if let Err(err) = write(&mut connection, &batch, &memories) {
            tracing::error!(%err, entries = batch.len(), "journal write failed");
        }
        batch.clear();
        memories.clear();
        for done in flushes.drain(..) {
            let _ = done.send(());
        }
    }
}

fn write(connection: &mut Connection, batch: &[(i64, JournalEvent)], memories: &[Remembered]) -> rusqlite::Result<()> {
    let tx = connection.transaction()?;
    for memory in memories {
        memory.save(&tx)?;
    }
    {
        let mut insert = tx.prepare_cached(
            "INSERT INTO entries (id, at_ms, kind, mcp_server, identity, outcome, error_type, body)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        for (at_ms, event) in batch {
            let (identity, outcome, error_type) = match &event.what {
                Happened::Audit(entry) => {
                    (Some(entry.identity.as_str()), Some(wire(&entry.outcome)), entry.error_type.clone())
                }
                Happened::Action { identity, .. } | Happened::Reload { identity, .. } => {
                    (Some(identity.as_str()), None, None)
                }
                _ => (None, None, None),
            };
            let body = serde_json::to_string(event).unwrap_or_default();
            insert.execute(params![
                event.id as i64,
                at_ms,
                event.what.kind(),
                event.what.mcp_server(),
                identity,
                outcome,
                error_type,
                body
            ])?;
        }
    }
    tx.commit()
}

fn wire<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}
