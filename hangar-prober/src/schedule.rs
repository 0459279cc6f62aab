//! When each server is checked next: a pure structure, driven by the caller's clock.
//!
//! The supervisor says what to check ([`ProbeTarget`]); this keeps one entry per target, hands
//! out the checks that are due, and remembers which are in flight so a server never has two.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use hangar_core::ipc::ProbeTarget;

/// A floor on the interval, so a zero from a bad config cannot turn the prober into a busy loop.
const MIN_INTERVAL: Duration = Duration::from_millis(50);
/// A ceiling on every wait, so an absurd number of milliseconds cannot overflow an `Instant`.
const MAX_WAIT: Duration = Duration::from_secs(7 * 24 * 3600);

/// A check to run now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    pub mcp_server: String,
    pub timeout_ms: u64,
}

#[derive(Debug, Clone)]
struct Entry {
    /// As the supervisor sent it, to notice a change.
    interval_ms: u64,
    timeout_ms: u64,
    due: Instant,
}

impl Entry {
    fn interval(&self) -> Duration {
        wait(self.interval_ms).max(MIN_INTERVAL)
    }
}

#[derive(Debug, Default)]
pub struct Schedule {
    entries: BTreeMap<String, Entry>,
    /// Kept apart from `entries`: a server unscheduled and rescheduled while its check runs
    /// must still wait for that check to end.
    in_flight: BTreeSet<String>,
}

impl Schedule {
    /// Makes the schedule match `targets`: new servers are due `due_in_ms` from `now`, servers
    /// no longer listed are dropped, and the rest keep their due time unless their interval
    /// changed (then the supervisor's `due_in_ms` counts again).
    pub fn reconcile(&mut self, targets: &[ProbeTarget], now: Instant) {
        let mut entries = BTreeMap::new();
        for target in targets {
            let due = match self.entries.remove(&target.mcp_server) {
                Some(old) if old.interval_ms == target.interval_ms => old.due,
                _ => now + wait(target.due_in_ms),
            };
            let entry = Entry { interval_ms: target.interval_ms, timeout_ms: target.timeout_ms, due };
            entries.insert(target.mcp_server.clone(), entry);
        }
        self.entries = entries;
    }

    /// The earliest due time among servers not being checked right now.
    pub fn next_due(&self) -> Option<Instant> {
        self.idle().map(|(_, entry)| entry.due).min()
    }

    /// The checks due at `now`, earliest first (ties by name), each marked in flight until
    /// [`Schedule::finished`]. Each entry moves on one interval; one that fell behind (a slow
    /// check, a lost link) is next due an interval from `now` rather than in a burst.
    pub fn take_due(&mut self, now: Instant) -> Vec<Due> {
        let mut due: Vec<(Instant, String)> =
            self.idle().filter(|(_, entry)| entry.due <= now).map(|(name, entry)| (entry.due, name.clone())).collect();
        due.sort();
        due.into_iter()
            .filter_map(|(_, name)| {
                let entry = self.entries.get_mut(&name)?;
                let interval = entry.interval();
                let next = entry.due + interval;
                entry.due = if next > now { next } else { now + interval };
                let timeout_ms = entry.timeout_ms;
                self.in_flight.insert(name.clone());
                Some(Due { mcp_server: name, timeout_ms })
            })
            .collect()
    }

    /// The check of `mcp_server` ended, however it ended.
    pub fn finished(&mut self, mcp_server: &str) {
        self.in_flight.remove(mcp_server);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    fn idle(&self) -> impl Iterator<Item = (&String, &Entry)> {
        self.entries.iter().filter(|(name, _)| !self.in_flight.contains(*name))
    }
}

fn wait(ms: u64) -> Duration {
    Duration::from_millis(ms).min(MAX_WAIT)
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
