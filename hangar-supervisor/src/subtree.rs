//! An upstream's whole subtree: everything it started, however it regrouped itself. Killed on
//! stop, on restart and when the upstream exits, so no descendant outlives it (invariant 3).
//!
//! With a cgroup (`cgroup.rs`) the kernel kills the subtree in one write; the process-tree walk
//! (`proctree::kill_tree`) runs as well, and the orphan sweep (`reaper.rs`) takes whatever was
//! reparented to the supervisor once the upstream itself was gone.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::{cgroup, guardian, proctree, reaper, spawn};

/// How long a killed cgroup may take to empty before it is removed anyway.
const CGROUP_DRAIN: Duration = Duration::from_secs(5);

/// A running upstream: its start time (its pid may be reused once it is reaped) and its cgroup.
struct Upstream {
    start: Option<u64>,
    cgroup: Option<PathBuf>,
}

static UPSTREAMS: Mutex<BTreeMap<u32, Upstream>> = Mutex::new(BTreeMap::new());

fn upstreams() -> MutexGuard<'static, BTreeMap<u32, Upstream>> {
    UPSTREAMS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Records a just-spawned upstream (`spawn.rs`).
pub fn register(pid: u32, cgroup: Option<PathBuf>) {
    let start = proctree::read(pid).map(|stat| stat.start);
    upstreams().insert(pid, Upstream { start, cgroup });
}

/// Whether `dir` is the cgroup of an upstream still running (its orphans are its own business
/// until it stops).
pub fn owns_cgroup(dir: &std::path::Path) -> bool {
    upstreams().values().any(|upstream| upstream.cgroup.as_deref() == Some(dir))
}

/// SIGKILLs the upstream and everything below it, now; true if the upstream itself still ran
/// (so its death is the hangar's doing). Once it has been reaped, does nothing.
pub fn kill(pid: u32) -> bool {
    let Some((start, cgroup)) = upstreams().get(&pid).map(|u| (u.start, u.cgroup.clone())) else { return false };
    let alive = proctree::read(pid).is_some_and(|stat| stat.is_live() && Some(stat.start) == start);
    proctree::kill_tree(pid, start);
    if let Some(dir) = &cgroup {
        cgroup::kill(dir);
    }
    alive
}

/// Once the upstream itself has been reaped: kills what it left (its process group, its cgroup,
/// its orphans, now the supervisor's), removes its cgroup and tells the guardian it is gone.
pub async fn reap(pid: u32) {
    let cgroup = upstreams().remove(&pid).and_then(|u| u.cgroup);
    spawn::signal_group(pid, Signal::SIGKILL);
    if let Some(dir) = &cgroup {
        cgroup::kill(dir);
    }
    // Its pid is free again only now that its owner reaped it.
    reaper::disown(pid);
    reaper::sweep();
    if let Some(dir) = cgroup {
        let removed = dir.clone();
        let _ = tokio::task::spawn_blocking(move || cgroup::kill_and_remove(&removed, CGROUP_DRAIN)).await;
        guardian::forget_cgroup(&dir);
    }
    guardian::forget(pid);
}
