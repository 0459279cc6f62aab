//! What a guardian records of its supervisor's children, so that a SIGKILLed supervisor leaves
//! nothing the guardian does not know, even without cgroups.
//!
//! Every orphan below the supervisor is reparented to it (it is their subreaper, `reaper.rs`),
//! and the supervisor's sweep tells the guardians about those it keeps (`+PID`). But an orphan
//! born after the last sweep is unknown to them until the next one (5 s apart when nothing dies),
//! and one that meanwhile clears its environment (no `HANGAR_UPSTREAM` marker left) and leaves
//! its upstream's process group can be told apart by nothing once the supervisor is gone. So each
//! guardian looks at the supervisor's children itself: every [`LOOK_EVERY`], through
//! `/proc/<pid>/task/<tid>/children` (a few small reads, not a walk of all of `/proc`), or, on a
//! kernel built without those lists, at every walk of `/proc` (`run.rs`, once a second). It
//! skips a look while no process at all was born since its last walk (`births.rs`): an orphan
//! adopted since then descends from a process that walk already noted. Each child is recorded by pid and start time, so a pid reused later is
//! never hit; it is forgotten only once it is seen dead, never because the list no longer shows
//! it (while the supervisor dies, its children leave the list as they are handed to init).
//!
//! Only the supervisor's own children are ever recorded: the supervisor names itself to the
//! guardian (pid and start time), and nothing is recorded unless that very process still runs
//! and is the guardian's parent. A guardian that first runs after the supervisor died has been
//! handed to init or to a subreaper above the hangar (a CI runner, a terminal multiplexer),
//! whose children are not the hangar's and must never be killed with it; and once the
//! supervisor is seen gone, its pid may be handed to someone else, so recording stops for good.
//!
//! The window that remains: an orphan reparented to the supervisor less than one look before the
//! supervisor's SIGKILL, that has by then both cleared its environment and left its upstream's
//! process group (a child missed in one look because the list changed while it was read is found
//! at the next). A process that keeps forking itself anew, each copy orphaned in turn, has its
//! newest copy in that window at any moment; only a cgroup (`cgroup.rs`) holds such a one.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use hangar_guardian::proctree::{self, Pinned, Stat};

use crate::log;

/// How often a guardian looks at the supervisor's children.
pub const LOOK_EVERY: Duration = Duration::from_millis(100);

/// The supervisor's children a guardian has seen, by pid, with their start times.
pub struct Kin {
    supervisor: Pinned,
    /// Set once the supervisor is seen gone (or was never seen): nothing more is recorded.
    gone: bool,
    known: BTreeMap<u32, u64>,
    /// Whether the kernel lists a process's children (`CONFIG_PROC_CHILDREN`); else only the
    /// walks of `/proc` record them.
    listed: bool,
}

impl Kin {
    /// An empty record of `supervisor`'s children (the caller checked it is its parent).
    pub fn new(supervisor: Pinned) -> Kin {
        Kin { supervisor, gone: false, known: BTreeMap::new(), listed: true }
    }

    /// A record that stays empty: the supervisor was gone before the guardian could look.
    pub fn orphaned(supervisor: Pinned) -> Kin {
        Kin { gone: true, ..Kin::new(supervisor) }
    }

    /// Whether the kernel lists the supervisor's children (else only walks of `/proc` see them).
    pub fn listed(&self) -> bool {
        self.listed
    }

    /// Looks at the supervisor's children through the kernel's lists; returns those it had not
    /// seen before. Does nothing where the kernel keeps no such list (the walks then record them).
    pub fn look(&mut self) -> Vec<u32> {
        if !self.listed || self.gone {
            return Vec::new();
        }
        let Some(children) = proctree::children_of(self.supervisor.pid) else {
            // The supervisor is gone (its end closes next), or the kernel lists no children.
            if self.supervisor.is_running() {
                self.listed = false;
                log::info(
                    "guardian: the kernel lists no children (/proc/<pid>/task/<tid>/children); the supervisor's children are recorded at each walk of /proc only",
                    &[("supervisor", self.supervisor.pid.into())],
                );
            }
            self.gone = true;
            return Vec::new();
        };
        // Read after the list: the list was the supervisor's only if it still runs now.
        if !self.supervisor.is_running() {
            self.gone = true;
            return Vec::new();
        }
        let gone: Vec<u32> = self.known.keys().filter(|pid| !children.contains(pid)).copied().collect();
        for pid in gone {
            if !proctree::read(pid).is_some_and(|stat| stat.is_live() && Some(&stat.start) == self.known.get(&pid)) {
                self.known.remove(&pid);
            }
        }
        let fresh: Vec<Stat> = children
            .into_iter()
            .filter(|pid| !self.known.contains_key(pid))
            .filter_map(proctree::read)
            .filter(|stat| stat.ppid == self.supervisor.pid && stat.is_live())
            .collect();
        self.record(fresh)
    }

    /// Records the supervisor's children from a walk of `/proc` (start times checked again, so
    /// a pid reused between two looks is caught), and forgets those it shows dead; returns
    /// those not seen before.
    pub fn walked(&mut self, procs: &[Stat]) -> Vec<u32> {
        let live: BTreeMap<u32, u64> = procs.iter().filter(|p| p.is_live()).map(|p| (p.pid, p.start)).collect();
        self.known.retain(|pid, start| live.get(pid) == Some(start));
        if !procs.iter().any(|p| self.supervisor.is(p)) {
            self.gone = true;
        }
        if self.gone {
            return Vec::new();
        }
        let fresh = procs
            .iter()
            .filter(|p| p.ppid == self.supervisor.pid && p.is_live() && self.known.get(&p.pid) != Some(&p.start));
        self.record(fresh.copied().collect())
    }

    fn record(&mut self, fresh: Vec<Stat>) -> Vec<u32> {
        fresh
            .into_iter()
            .map(|stat| {
                self.known.insert(stat.pid, stat.start);
                stat.pid
            })
            .collect()
    }

    /// Every child recorded, with its start time, but `except` (the guardians themselves).
    pub fn recorded(&self, except: &BTreeSet<(u32, u64)>) -> Vec<(u32, u64)> {
        self.known.iter().map(|(pid, start)| (*pid, *start)).filter(|child| !except.contains(child)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(pid: u32, ppid: u32, start: u64, state: char) -> Stat {
        Stat { pid, state, ppid, pgrp: pid, start, cpu_ticks: 0 }
    }

    const SUPERVISOR: Pinned = Pinned { pid: 10, start: 5 };

    #[test]
    fn a_walk_records_children_and_forgets_only_the_dead() {
        let mut kin = Kin::new(SUPERVISOR);
        let first = [stat(10, 1, 5, 'S'), stat(11, 10, 6, 'S'), stat(12, 10, 7, 'S'), stat(13, 11, 8, 'S')];
        assert_eq!(kin.walked(&first), [11, 12]);
        assert_eq!(kin.walked(&first), Vec::<u32>::new(), "nothing new the second time");
        // A pid reused by a new child of the supervisor is recorded with its new start.
        assert_eq!(kin.walked(&[stat(10, 1, 5, 'S'), stat(11, 10, 9, 'S'), stat(12, 10, 7, 'S')]), [11]);
        assert_eq!(kin.recorded(&BTreeSet::new()), [(11, 9), (12, 7)]);
        // The supervisor died: 11 went to init and stays recorded; 12 died (a zombie).
        let later = [stat(11, 1, 9, 'S'), stat(12, 1, 7, 'Z')];
        assert_eq!(kin.walked(&later), Vec::<u32>::new());
        assert_eq!(kin.recorded(&BTreeSet::new()), [(11, 9)]);
        assert_eq!(kin.recorded(&BTreeSet::from([(11, 9)])), []);
    }

    #[test]
    fn once_the_supervisor_is_gone_its_pid_reused_is_someone_else() {
        let mut kin = Kin::new(SUPERVISOR);
        assert_eq!(kin.walked(&[stat(10, 1, 5, 'S'), stat(11, 10, 6, 'S')]), [11]);
        // Pid 10 now belongs to another process: its children are not the hangar's.
        assert_eq!(kin.walked(&[stat(10, 1, 99, 'S'), stat(11, 1, 6, 'S'), stat(20, 10, 100, 'S')]), Vec::<u32>::new());
        // Gone is for good, whatever a later walk seems to show.
        assert_eq!(kin.walked(&[stat(10, 1, 5, 'S'), stat(11, 1, 6, 'S'), stat(21, 10, 101, 'S')]), Vec::<u32>::new());
        assert_eq!(kin.recorded(&BTreeSet::new()), [(11, 6)]);
        assert_eq!(kin.look(), Vec::<u32>::new());
    }

    #[test]
    fn a_guardian_whose_supervisor_died_first_records_nobody() {
        // Its parent is now init or a subreaper above the hangar, with children of its own.
        let own = Pinned::own().unwrap();
        let mut child = std::process::Command::new("/bin/sleep").arg("10").spawn().unwrap();
        let mut kin = Kin::orphaned(own);
        let (looked, walked) = (kin.look(), kin.walked(&proctree::snapshot()));
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!((looked, walked), (Vec::new(), Vec::new()));
        assert_eq!(kin.recorded(&BTreeSet::new()), []);
    }

    #[test]
    fn a_look_records_a_real_child() {
        let mut child = std::process::Command::new("/bin/sleep").arg("10").spawn().unwrap();
        let mut kin = Kin::new(Pinned::own().unwrap());
        let seen = kin.look();
        let _ = child.kill();
        let _ = child.wait();
        assert!(seen.contains(&child.id()), "{seen:?} lacks {}", child.id());
        assert!(kin.listed);
    }
}
