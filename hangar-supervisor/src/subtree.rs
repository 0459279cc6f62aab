//! An upstream's whole subtree: everything it started, however it regrouped itself. Killed on
//! stop, on restart and when the upstream exits, so no descendant outlives it (invariant 3).
//!
//! Its subtree is what hangs below it by parent links, plus the orphans it left that the
//! supervisor adopted (`reaper.rs`) and attributed to it (`lineage::owner_of`), with what hangs below
//! them. Upstreams are no subreapers: whatever they orphan goes to the supervisor, which reaps it,
//! so no zombie piles up below an upstream that never waits for children it did not start.
//!
//! Whose an adopted orphan is, `lineage.rs` tells; one that names no running upstream is killed
//! at once (`reaper.rs`).
//!
//! With a cgroup (`cgroup.rs`) the kernel kills the subtree in one write (a cgroup v1 group holding
//! its limits, `cgroup_v1.rs`, is emptied pid by pid: the kernel's fence all the same); the process-tree walk
//! (`proctree::kill_tree`) runs as well, and the orphan sweep (`reaper.rs`) takes whatever was
//! reparented to the supervisor once the upstream itself was gone.

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::{cgroup, children, guardian, lineage, proctree, reaper};

/// How long a killed cgroup may take to empty before it is removed anyway.
const CGROUP_DRAIN: Duration = Duration::from_secs(5);

/// SIGKILLs the upstream and everything below it (the orphans attributed to it included), now;
/// true if the upstream itself still ran (so its death is the hangar's doing). Once it has been
/// reaped, does nothing.
pub fn kill(pid: u32) -> bool {
    let Some(lineage::Running { start, groups, instance }) = lineage::running(pid) else {
        return false;
    };
    let alive = proctree::read(pid).is_some_and(|stat| stat.is_live() && Some(stat.start) == start);
    proctree::kill_tree(pid, start);
    for (orphan, orphan_start) in reaper::adopted_by(instance) {
        proctree::kill_tree(orphan, Some(orphan_start));
    }
    for dir in &groups {
        cgroup::kill(dir);
    }
    alive
}

/// Once the upstream itself has been reaped: kills what it left (its process group, its cgroup,
/// its orphans, now the supervisor's), removes its cgroup and tells the guardian it is gone.
pub async fn reap(pid: u32) {
    let groups = lineage::unregister(pid).map(|upstream| upstream.groups).unwrap_or_default();
    proctree::signal_group(pid, Signal::SIGKILL);
    for dir in &groups {
        cgroup::kill(dir);
    }
    // Its pid is free again only now that its owner reaped it.
    children::disown(pid);
    reaper::sweep_off_thread().await;
    for dir in groups {
        let removed = dir.clone();
        let _ = tokio::task::spawn_blocking(move || cgroup::kill_and_remove(&removed, CGROUP_DRAIN)).await;
        guardian::forget_cgroup(&dir);
    }
    guardian::forget(pid);
}
