//! Which watched processes run in a cgroup the guardian kills whole (`+cgroup DIR`, a cgroup v2
//! of an upstream's own): nothing below such a process can leave its cgroup by regrouping,
//! daemonizing or being orphaned, so `cgroup.kill` takes it all and no walk of its subtree is
//! needed. Each process is looked up once (`/proc/<pid>/cgroup`) and remembered by pid and start
//! time; one not (yet) in such a cgroup is looked up again at the next walk.
//!
//! A process can still leave by moving itself to another cgroup, which takes write access to the
//! delegated cgroup's files (an upstream running as the supervisor's user, unsandboxed); what it
//! starts from there is out of the guardian's view, as it is out of `cgroup.kill`'s.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use hangar_guardian::cgroup::Hierarchy;
use hangar_guardian::proctree;

pub struct Cover {
    hierarchy: Option<Hierarchy>,
    /// The cgroup each process was found in, while it was in a watched one.
    found: BTreeMap<(u32, u64), PathBuf>,
}

impl Cover {
    pub fn new() -> Cover {
        Cover { hierarchy: Hierarchy::read(), found: BTreeMap::new() }
    }

    /// Whether process `pid` (started at `start`) runs in one of `cgroups` or below one.
    pub fn holds(&mut self, pid: u32, start: u64, cgroups: &BTreeSet<PathBuf>) -> bool {
        let within = |dir: &Path| dir.ancestors().any(|dir| cgroups.contains(dir));
        if let Some(dir) = self.found.get(&(pid, start)) {
            return within(dir);
        }
        if cgroups.is_empty() {
            return false;
        }
        let Some(dir) = self.hierarchy.as_ref().and_then(|hierarchy| hierarchy.of(&pid.to_string())) else {
            return false;
        };
        // Read after the cgroup: the pid was that very process's when its cgroup was read.
        if !within(&dir) || proctree::read(pid).is_none_or(|stat| stat.start != start) {
            return false;
        }
        self.found.insert((pid, start), dir);
        true
    }

    /// Forgets every process but `kept`.
    pub fn retain(&mut self, kept: &BTreeSet<(u32, u64)>) {
        self.found.retain(|process, _| kept.contains(process));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_held_by_its_own_cgroup_or_one_above_it() {
        let Some(hierarchy) = Hierarchy::read() else { return };
        let Some(own) = hierarchy.of("self") else { return };
        let me = proctree::Pinned::own().unwrap();
        let mut cover = Cover::new();
        assert!(!cover.holds(me.pid, me.start, &BTreeSet::new()));
        assert!(!cover.holds(me.pid, me.start, &BTreeSet::from([own.join("elsewhere")])));
        assert!(cover.holds(me.pid, me.start, &BTreeSet::from([own.clone()])));
        // Remembered, and checked against the cgroups watched now.
        assert!(!cover.holds(me.pid, me.start, &BTreeSet::new()));
        let parent = own.parent().map(Path::to_path_buf).unwrap_or(own);
        assert!(cover.holds(me.pid, me.start, &BTreeSet::from([parent])));
        assert!(!cover.holds(me.pid, me.start + 1, &BTreeSet::new()), "another process under the same pid");
    }
}
