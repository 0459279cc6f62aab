//! Which upstream a process belongs to: the running upstreams (registered at spawn, forgotten
//! once reaped), the environment marker each is started with, and [`owner_of`], whose an orphan
//! the supervisor adopted is.
//!
//! In `cgroup` mode an orphan is the upstream's whose cgroup it is in; in `subreaper` mode, the
//! upstream's whose cgroup v1 group (holding its limits, `cgroup_v1.rs`) it is in, else the
//! upstream instance its environment names (`proctree::MARKER`, set on every upstream at spawn and
//! inherited by all it starts), else the upstream whose process group it is still in. An orphan
//! that cleared or rewrote its environment (`env -i`, some `setproctitle`s) *and* left the group
//! (`setsid`) names none, and is killed at once by the sweep. No record of earlier sightings is
//! kept here: a daemon orphans itself at once, before any look could see it. (For a SIGKILLed
//! supervisor, whose sweep never comes, the guardians record its children themselves: `kin.rs`.)

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};

use hangar_core::sync::Unpoisoned;

use crate::{cgroup, cgroup_v1, proctree};

/// A running upstream: its start time (its pid may be reused once it is reaped), its cgroups (its
/// cgroup v2 and any v1 groups holding its limits, `kernel_limits.rs`) and the number of its
/// spawn (which names it in its descendants' environment).
#[derive(Clone)]
pub struct Running {
    pub start: Option<u64>,
    pub groups: Vec<PathBuf>,
    pub instance: u64,
}

static UPSTREAMS: Mutex<BTreeMap<u32, Running>> = Mutex::new(BTreeMap::new());

fn upstreams() -> MutexGuard<'static, BTreeMap<u32, Running>> {
    UPSTREAMS.locked()
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
pub fn register(pid: u32, groups: Vec<PathBuf>, instance: u64) {
    let start = proctree::read(pid).map(|stat| stat.start);
    upstreams().insert(pid, Running { start, groups, instance });
}

/// The running upstream instance an orphan the supervisor adopted belongs to, if any: by its
/// cgroup (or one below it) in `cgroup` mode, else by the cgroup v1 group holding its upstream's limits, else by
/// the marker in its environment.
pub fn owner_of(pid: u32) -> Option<u64> {
    if cgroup::in_use() {
        // Its upstream's cgroup, or one it made below it (the upstream owns that subtree).
        let dir = cgroup::of_process(pid)?;
        return upstreams().values().find(|u| u.groups.iter().any(|g| dir.starts_with(g))).map(|u| u.instance);
    }
    // A v1 group holding an upstream's limits keeps whatever it forks, however it hid.
    if upstreams().values().any(|u| !u.groups.is_empty()) {
        let groups = cgroup_v1::groups_of(pid);
        let grouped = upstreams().values().find(|u| u.groups.iter().any(|g| groups.contains(g))).map(|u| u.instance);
        if grouped.is_some() {
            return grouped;
        }
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

/// The running upstream `pid`, as registered at spawn.
pub fn running(pid: u32) -> Option<Running> {
    upstreams().get(&pid).cloned()
}

/// Forgets upstream `pid` once it has been reaped; what was registered for it.
pub fn unregister(pid: u32) -> Option<Running> {
    upstreams().remove(&pid)
}
