//! An upstream's whole subtree: everything it started, however it regrouped itself. Killed on
//! stop, on restart and when the upstream exits, so no descendant outlives it (invariant 3).
//!
//! Its subtree is what hangs below it by parent links, plus the orphans it left that the
//! supervisor adopted (`reaper.rs`) and attributed to it ([`owner_of`]), with what hangs below
//! them. Upstreams are no subreapers: whatever they orphan goes to the supervisor, which reaps it,
//! so no zombie piles up below an upstream that never waits for children it did not start.
//!
//! Whose an adopted orphan is: in `cgroup` mode, the upstream whose cgroup it is in; in
//! `subreaper` mode, the upstream instance its environment names (`proctree::MARKER`, set on
//! every upstream at spawn and inherited by all it starts), else the upstream whose process
//! group it is still in. An orphan that cleared or rewrote its environment (`env -i`, some
//! `setproctitle`s) *and* left the group (`setsid`) names none and is killed at once. No record
//! of earlier sightings is kept: a daemon orphans itself at once, before any look could see it.
//!
//! With a cgroup (`cgroup.rs`) the kernel kills the subtree in one write; the process-tree walk
//! (`proctree::kill_tree`) runs as well, and the orphan sweep (`reaper.rs`) takes whatever was
//! reparented to the supervisor once the upstream itself was gone.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::{cgroup, guardian, proctree, reaper, spawn};

/// How long a killed cgroup may take to empty before it is removed anyway.
const CGROUP_DRAIN: Duration = Duration::from_secs(5);

/// A running upstream: its start time (its pid may be reused once it is reaped), its cgroup and
/// the number of its spawn (which names it in its descendants' environment).
struct Upstream {
    start: Option<u64>,
    cgroup: Option<PathBuf>,
    instance: u64,
}

static UPSTREAMS: Mutex<BTreeMap<u32, Upstream>> = Mutex::new(BTreeMap::new());

fn upstreams() -> MutexGuard<'static, BTreeMap<u32, Upstream>> {
    UPSTREAMS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The [`proctree::MARKER`] value for the upstream spawned as `instance`.
pub fn marker(instance: u64) -> String {
    format!("{}{instance}", marker_prefix())
}

/// This supervisor's marker prefix (its pid and start time).
fn marker_prefix() -> &'static str {
    static PREFIX: OnceLock<String> = OnceLock::new();
    PREFIX.get_or_init(|| proctree::marker_prefix(std::process::id()))
}

/// Records a just-spawned upstream (`spawn.rs`).
pub fn register(pid: u32, cgroup: Option<PathBuf>, instance: u64) {
    let start = proctree::read(pid).map(|stat| stat.start);
    upstreams().insert(pid, Upstream { start, cgroup, instance });
}

/// The running upstream instance an orphan the supervisor adopted belongs to, if any: by its
/// cgroup in `cgroup` mode, else by the marker in its environment.
pub fn owner_of(pid: u32) -> Option<u64> {
    if cgroup::in_use() {
        let dir = cgroup::of_process(pid)?;
        return upstreams().values().find(|u| u.cgroup.as_deref() == Some(dir.as_path())).map(|u| u.instance);
    }
    let marked = proctree::settled_marker_of(pid)
        .and_then(|marker| marker.strip_prefix(marker_prefix())?.parse::<u64>().ok())
        .filter(|instance| is_running(*instance));
    // Else the upstream whose process group it is still in (a pid is never handed out again
    // while a group of that number exists, so the group is that very upstream's).
    marked.or_else(|| {
        let pgrp = proctree::read(pid)?.pgrp;
        upstreams().get(&pgrp).map(|upstream| upstream.instance)
    })
}

/// Whether the upstream spawned as `instance` still runs (it has not been reaped).
pub fn is_running(instance: u64) -> bool {
    upstreams().values().any(|upstream| upstream.instance == instance)
}

/// SIGKILLs the upstream and everything below it (the orphans attributed to it included), now;
/// true if the upstream itself still ran (so its death is the hangar's doing). Once it has been
/// reaped, does nothing.
pub fn kill(pid: u32) -> bool {
    let Some((start, cgroup, instance)) = upstreams().get(&pid).map(|u| (u.start, u.cgroup.clone(), u.instance)) else {
        return false;
    };
    let alive = proctree::read(pid).is_some_and(|stat| stat.is_live() && Some(stat.start) == start);
    proctree::kill_tree(pid, start);
    for (orphan, orphan_start) in reaper::adopted_by(instance) {
        proctree::kill_tree(orphan, Some(orphan_start));
    }
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
