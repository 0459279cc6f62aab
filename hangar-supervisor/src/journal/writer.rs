//! The writer thread: the journal's only writer. Entries are packed into blocks where they are
//! recorded (`unwritten.rs`); the writer takes everything waiting once per commit interval and
//! writes it in one transaction, so no call ever waits for the disk, and no entry crosses to the
//! writer's thread on its own.
//!
//! When too much waits (`unwritten::MAX_ENTRIES`), or a batch cannot be written (the disk is
//! full, or another process holds the database's write lock past `BUSY_TIMEOUT`), entries are
//! dropped: counted (`hangar_journal_dropped_total`), logged at most once per `WARN_EVERY`, and
//! once a batch is written again a `gap` entry says how many were lost. Pruning
//! (`retention.rs`) runs here too: by age at start and hourly, and by size (`journal.max_mb`)
//! after every batch that leaves the database over it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hangar_core::journal::JournalConfig;
use hangar_core::metrics::JournalCounts;
use hangar_core::sync::Unpoisoned;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, params};

use super::Recorded;
use super::block::{self, Block};
use super::memory::Remembered;
use super::retention;
use super::unwritten::{Minutes, Unwritten};

/// How many jobs (wake-ups, memories, settings, flushes) may wait for the writer.
const JOBS: usize = 1024;
/// How long the writer gathers a batch before it commits: an answered call's entry is on disk
/// (safe from a crash of the supervisor) at most about this long after it was recorded. Short,
/// so each batch is short too: at 100 ms a busy hangar's batch (~1,600 entries) held a core
/// for several ms at a time, long enough to delay the calls sharing that core; at 20 ms a batch
/// is a fifth of that, for about the same cost per entry.
pub const COMMIT_INTERVAL: Duration = Duration::from_millis(20);
/// How long a write waits for another process's lock before its batch is dropped.
pub const BUSY_TIMEOUT: Duration = Duration::from_millis(500);
/// Dropped entries are logged at most this often.
const WARN_EVERY: Duration = Duration::from_secs(10);
/// How often old entries are pruned (and once at start).
const PRUNE_EVERY: Duration = Duration::from_secs(3600);
/// While a gap is unmarked and nothing comes to write, how often the writer checks whether the
/// database can be written again, to mark it.
const RETRY_EVERY: Duration = Duration::from_secs(1);

enum Job {
    /// Entries wait (sent by the entry that found nothing waiting: one wake-up per batch).
    Entries,
    Remember(Remembered),
    Retain(JournalConfig),
    Flush(mpsc::Sender<()>),
}

/// Counts shared by the recording side and the writer thread.
#[derive(Default)]
struct Stats {
    written: AtomicU64,
    dropped: AtomicU64,
    /// Dropped since the last gap entry.
    unmarked: AtomicU64,
    /// When dropping was last logged, in ms since `epoch` (+1, so 0 is "never").
    warned_at: AtomicU64,
}

impl Stats {
    fn drop_entries(&self, n: u64, epoch: Instant, why: &str) {
        let total = self.dropped.fetch_add(n, Ordering::Relaxed) + n;
        self.unmarked.fetch_add(n, Ordering::Relaxed);
        let now = epoch.elapsed().as_millis() as u64 + 1;
        let last = self.warned_at.load(Ordering::Relaxed);
        let due = last == 0 || now.saturating_sub(last) >= WARN_EVERY.as_millis() as u64;
        if due && self.warned_at.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            tracing::warn!(dropped_total = total, why, "journal entries dropped; calls go on, the gap will be marked");
        }
    }
}

pub struct Writer {
    jobs: mpsc::SyncSender<Job>,
    unwritten: Arc<Mutex<Unwritten>>,
    stats: Arc<Stats>,
    epoch: Instant,
}

impl Writer {
    /// Starts the thread. `mark_gap` records a gap entry (through the journal, so it gets an id
    /// and is broadcast like any other).
    pub fn start(connection: Connection, mark_gap: impl Fn(u64) + Send + 'static) -> Writer {
        let (jobs, received) = mpsc::sync_channel(JOBS);
        let (stats, epoch) = (Arc::new(Stats::default()), Instant::now());
        let unwritten = Arc::new(Mutex::new(Unwritten::default()));
        let thread = Thread {
            connection,
            stats: stats.clone(),
            epoch,
            mark_gap: Box::new(mark_gap),
            retention: None,
            unwritten: unwritten.clone(),
            taken: Unwritten::default(),
            packer: block::Packer::default(),
            stripped: retention::Stripped::default(),
        };
        std::thread::Builder::new()
            .name("journal-writer".into())
            .spawn(move || thread.run(received))
            .map(|_| ())
            .unwrap_or_else(|err| tracing::error!(%err, "the journal's writer thread did not start"));
        Writer { jobs, unwritten, stats, epoch }
    }

    /// Packs an entry for the next batch. Called in id order (under the journal's tail lock).
    pub fn queue(&self, entry: &Recorded) {
        let (kept, first) = {
            let mut unwritten = self.unwritten.locked();
            let first = unwritten.is_empty();
            (unwritten.push(entry), first)
        };
        if !kept {
            self.stats.drop_entries(1, self.epoch, "too many entries wait for the writer");
        } else if first {
            // The writer may be waiting for work; it takes what has come since when it wakes.
            let _ = self.jobs.try_send(Job::Entries);
        }
    }

    /// Queues a server's memory; it replaces what was remembered of it.
    pub fn remember(&self, memory: Remembered) {
        if self.jobs.try_send(Job::Remember(memory)).is_err() {
            tracing::warn!("journal queue full: a server's memory was not saved");
        }
    }

    /// Sets (or changes, on a reload) how long entries are kept; prunes at once, then hourly.
    pub fn retain(&self, config: JournalConfig) {
        if self.jobs.try_send(Job::Retain(config)).is_err() {
            tracing::warn!("journal queue full: the retention settings wait for the next reload");
        }
    }

    pub fn counts(&self) -> JournalCounts {
        JournalCounts {
            entries: self.stats.written.load(Ordering::Relaxed),
            dropped: self.stats.dropped.load(Ordering::Relaxed),
        }
    }

    pub fn flush(&self) {
        let (done, wait) = mpsc::channel();
        if self.jobs.send(Job::Flush(done)).is_ok() {
            let _ = wait.recv_timeout(Duration::from_secs(5));
        }
    }
}

struct Thread {
    connection: Connection,
    stats: Arc<Stats>,
    epoch: Instant,
    mark_gap: Box<dyn Fn(u64) + Send>,
    /// The retention settings and when they are next applied.
    retention: Option<(JournalConfig, Instant)>,
    /// Where entries are packed as they are recorded.
    unwritten: Arc<Mutex<Unwritten>>,
    /// The batch being written: swapped with `unwritten`, so their buffers are used in turn.
    taken: Unwritten,
    /// Compresses each block as it is stored.
    packer: block::Packer,
    /// How far the size cap has taken arguments (`retention::fit`).
    stripped: retention::Stripped,
}

impl Thread {
    fn run(mut self, jobs: mpsc::Receiver<Job>) {
        if let Err(err) = self.connection.busy_timeout(BUSY_TIMEOUT) {
            tracing::warn!(%err, "journal: busy timeout not set");
        }
        let mut memories = Vec::new();
        let mut flushes = Vec::new();
        loop {
            let first = match jobs.recv_timeout(self.idle_wait()) {
                Ok(job) => job,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.mark_gap_if_writable();
                    self.prune_if_due();
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    self.write_batch(&[]); // what was recorded last
                    return;
                }
            };
            // The batch: what comes within the commit interval, unless a flush waits. The
            // writer sleeps meanwhile instead of waiting for jobs, so recording an entry never
            // has to wake it.
            let deadline = Instant::now() + COMMIT_INTERVAL;
            let mut flushing = self.take(first, &mut memories, &mut flushes);
            for round in 0..2 {
                while let Ok(job) = jobs.try_recv() {
                    flushing |= self.take(job, &mut memories, &mut flushes);
                }
                if flushing || round == 1 {
                    break;
                }
                std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
            }
            self.write_batch(&memories);
            memories.clear();
            self.prune_if_due();
            self.fit_if_over();
            for done in flushes.drain(..) {
                let _ = done.send(());
            }
        }
    }

    /// Takes one job; whether it is a flush (the batch is then written at once).
    fn take(&mut self, job: Job, memories: &mut Vec<Remembered>, flushes: &mut Vec<mpsc::Sender<()>>) -> bool {
        match job {
            Job::Entries => {}
            Job::Remember(memory) => memories.push(memory),
            Job::Retain(config) => self.retention = Some((config, Instant::now())),
            Job::Flush(done) => {
                flushes.push(done);
                return true;
            }
        }
        false
    }

    /// Writes what waits, with `memories`, in one transaction.
    fn write_batch(&mut self, memories: &[Remembered]) {
        {
            let mut unwritten = self.unwritten.locked();
            std::mem::swap(&mut *unwritten, &mut self.taken);
        }
        let entries = self.taken.entries;
        if entries == 0 && memories.is_empty() {
            return;
        }
        let started = Instant::now();
        match write(&mut self.connection, &self.taken, memories, &mut self.packer) {
            Ok(()) => {
                // How long one batch holds a core: the burst a call may queue behind.
                tracing::debug!(entries, took_us = started.elapsed().as_micros() as u64, "journal batch written");
                self.stats.written.fetch_add(entries as u64, Ordering::Relaxed);
                self.mark_gap();
            }
            Err(err) => {
                if !memories.is_empty() {
                    tracing::warn!(%err, servers = memories.len(), "journal: servers' memory not saved");
                }
                self.stats.drop_entries(entries as u64, self.epoch, &err.to_string());
            }
        }
        self.taken.clear();
    }

    /// Records a gap entry for the entries dropped since the last one, if any.
    fn mark_gap(&self) {
        let unmarked = self.stats.unmarked.swap(0, Ordering::Relaxed);
        if unmarked > 0 {
            tracing::info!(dropped = unmarked, "journal writes again; the gap is marked");
            (self.mark_gap)(unmarked);
        }
    }

    /// With nothing to write and a gap unmarked, marks it once the database takes writes again
    /// (an empty write transaction gets through).
    fn mark_gap_if_writable(&self) {
        if self.stats.unmarked.load(Ordering::Relaxed) == 0 {
            return;
        }
        match self.connection.execute_batch("BEGIN IMMEDIATE; COMMIT;") {
            Ok(()) => self.mark_gap(),
            Err(_) => {
                // Whichever half failed, no transaction stays open.
                let _ = self.connection.execute_batch("ROLLBACK;");
            }
        }
    }

    /// How long the writer may wait for a job before it has something else to do.
    fn idle_wait(&self) -> Duration {
        let pruning =
            self.retention.as_ref().map_or(PRUNE_EVERY, |(_, at)| at.saturating_duration_since(Instant::now()));
        if self.stats.unmarked.load(Ordering::Relaxed) > 0 { pruning.min(RETRY_EVERY) } else { pruning }
    }

    /// Holds `journal.max_mb` as the journal grows: past it, makes room at once.
    fn fit_if_over(&mut self) {
        let Some((config, _)) = &self.retention else { return };
        match retention::over_cap(&self.connection, config) {
            Ok(false) => return,
            Ok(true) => {}
            Err(err) => return tracing::warn!(%err, "journal: its size was not read"),
        }
        match retention::fit(&self.connection, config, &mut self.stripped) {
            Ok(pruned) => tracing::debug!(
                arguments = pruned.arguments,
                by_size = pruned.by_size,
                max_mb = config.max_mb,
                "journal pruned to its size cap (arguments first, then the oldest entries)"
            ),
            Err(err) => tracing::warn!(%err, "journal: pruning to max_mb failed; it is tried after the next batch"),
        }
    }

    fn prune_if_due(&mut self) {
        let Some((config, due)) = &mut self.retention else { return };
        if Instant::now() < *due {
            return;
        }
        *due = Instant::now() + PRUNE_EVERY;
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0);
        match retention::prune(&self.connection, now_ms, config) {
            Ok(pruned) if pruned.any() => tracing::info!(
                by_age = pruned.by_age,
                by_size = pruned.by_size,
                "journal pruned (retention_days, max_mb)"
            ),
            Ok(_) => {}
            Err(err) => tracing::warn!(%err, "journal pruning failed; it is tried again in an hour"),
        }
    }
}

fn write(
    connection: &mut Connection,
    batch: &Unwritten,
    memories: &[Remembered],
    packer: &mut block::Packer,
) -> rusqlite::Result<()> {
    let tx = connection.transaction()?;
    for memory in memories {
        memory.save(&tx)?;
    }
    {
        let mut insert = tx.prepare_cached(
            "INSERT INTO blocks (first_id, last_id, first_at_ms, last_at_ms, entries, body)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        for block in batch.blocks() {
            let packed = packer.pack(&block.body).map_err(|err| rusqlite::Error::ToSqlConversionFailure(err.into()))?;
            insert_block(&mut insert, block, packed)?;
        }
    }
    save_minutes(&tx, &batch.minutes)?;
    tx.commit()
}

fn insert_block(insert: &mut rusqlite::CachedStatement<'_>, block: &Block, packed: &[u8]) -> rusqlite::Result<()> {
    insert.execute(params![
        block.first_id as i64,
        block.last_id as i64,
        block.first_at_ms,
        block.last_at_ms,
        block.entries as i64,
        ToSqlOutput::Borrowed(ValueRef::Blob(packed))
    ])?;
    Ok(())
}

/// Adds a batch's per-minute counts to the chart's.
fn save_minutes(tx: &rusqlite::Transaction<'_>, minutes: &Minutes) -> rusqlite::Result<()> {
    let mut add = tx.prepare_cached(
        "INSERT INTO minutes (minute, mcp_server, identity, calls, errors) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (minute, mcp_server, identity)
         DO UPDATE SET calls = calls + excluded.calls, errors = errors + excluded.errors",
    )?;
    for (key, count) in &minutes.counts {
        add.execute(params![key.minute, key.mcp_server, key.identity, count.calls, count.errors])?;
    }
    Ok(())
}
