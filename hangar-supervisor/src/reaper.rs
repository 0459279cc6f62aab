//! The supervisor as the child subreaper of every upstream: orphans come to it, and it reaps
//! them, leaves running those of a running upstream and kills the rest.
//!
//! With `PR_SET_CHILD_SUBREAPER`, a process orphaned anywhere below the supervisor (a shell's
//! background job, a double-forked daemon) is reparented to the supervisor instead of to init,
//! so it stays within reach. Upstreams are no subreapers themselves, in either kill mode: an
//! upstream never waits for children it did not start, so their zombies would pile up below it
//! (a pid each, counted against pid limits) for as long as it runs.
//!
//! The supervisor knows its own children (upstreams, helpers, the guardians: `children.rs`);
//! any other child is such an orphan. [`sweep`] asks whose it is (`lineage::owner_of`: the upstream
//! whose cgroup it is in, or whose instance its environment names): one of a running upstream
//! is adopted, left to run, announced to the guardians (`+PID`) and reaped when it exits; it is
//! killed with its upstream (`subtree::kill`, `cgroup.kill`). One of no running upstream is
//! killed at once with everything below it.
//!
//! tokio reaps only the children it spawned, each by its own pid, and the guardian's keeper
//! waits for the guardian by pid; `sweep` likewise waits only for the pids it adopted, never
//! `waitpid(-1)`, which would steal their exit statuses. A spawn registers its child under the
//! same lock the sweep holds, so a child just forked is never taken for an orphan.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use hangar_core::sync::Unpoisoned;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use tokio::signal::unix::{SignalKind, signal};

use crate::{children, guardian, lineage, proctree};

/// How often the sweep runs without a SIGCHLD, as a backstop.
const BACKSTOP: Duration = Duration::from_secs(5);
/// The least time between two sweeps: an upstream that orphans processes in a tight loop must
/// not keep the supervisor walking `/proc` back to back (the SIGCHLDs meanwhile are one).
const MIN_GAP: Duration = Duration::from_millis(20);

/// An orphan left to run: its start time and the upstream instance it belongs to.
#[derive(Clone, Copy)]
struct Adopted {
    start: u64,
    instance: u64,
}

/// The orphans left to run, by pid; each is known to the guardians until it is reaped.
static ADOPTED: Mutex<BTreeMap<u32, Adopted>> = Mutex::new(BTreeMap::new());

fn adopted() -> MutexGuard<'static, BTreeMap<u32, Adopted>> {
    ADOPTED.locked()
}

/// The adopted orphans of upstream `instance` (pid and start time), to kill with it.
pub fn adopted_by(instance: u64) -> Vec<(u32, u64)> {
    adopted().iter().filter(|(_, a)| a.instance == instance).map(|(pid, a)| (*pid, a.start)).collect()
}

/// Makes the supervisor the reaper of every orphan below it.
pub fn become_subreaper() {
    if let Err(err) = nix::sys::prctl::set_child_subreaper(true) {
        tracing::warn!(%err, "cannot become a child subreaper: an upstream's orphans would go to init");
    }
}

/// Kills every child of the supervisor it did not spawn (with all below it), but for those of a
/// running upstream (adopted: left to run), and reaps those already dead. Returns how many it
/// killed or reaped.
pub fn sweep() -> usize {
    // Both held for the whole sweep, from before the snapshot (and taken in this order, as
    // everywhere): sweeps run one at a time, and none acts on a snapshot older than another's
    // reaping.
    let own = children::own();
    let mut adopted = adopted();
    let me = std::process::id();
    let orphans = orphans_of(me, &own, &adopted);
    // Forget those no longer the supervisor's children (reaped since) or whose pid was reused.
    let gone: Vec<u32> = adopted
        .iter()
        .filter(|(pid, a)| !orphans.iter().any(|o| o.pid == **pid && o.start == a.start && o.is_live()))
        .map(|(pid, _)| *pid)
        .collect();
    for pid in gone {
        adopted.remove(&pid);
        guardian::forget(pid);
    }
    let mut swept = 0;
    for orphan in &orphans {
        if orphan.is_live() {
            let known = adopted.get(&orphan.pid).map(|a| a.instance);
            let owner =
                known.or_else(|| lineage::owner_of(orphan.pid)).filter(|instance| lineage::is_running(*instance));
            if let Some(instance) = owner {
                if known.is_none() {
                    adopted.insert(orphan.pid, Adopted { start: orphan.start, instance });
                    // A supervisor SIGKILLed from now on leaves it to the guardians.
                    guardian::watch(orphan.pid, Vec::new());
                    tracing::debug!(pid = orphan.pid, instance, "an orphan of a running upstream is left to run");
                }
                continue;
            }
            if adopted.remove(&orphan.pid).is_some() {
                guardian::forget(orphan.pid);
            }
            let killed = proctree::kill_tree(orphan.pid, Some(orphan.start));
            tracing::warn!(pid = orphan.pid, killed, "killed a process an upstream left behind");
        }
        swept += 1;
        // Already dead, or just killed and about to be: reap it now or at the next SIGCHLD.
        if let Ok(status) = waitpid(Pid::from_raw(orphan.pid as i32), Some(WaitPidFlag::WNOHANG))
            && status != WaitStatus::StillAlive
            && adopted.remove(&orphan.pid).is_some()
        {
            guardian::forget(orphan.pid);
        }
    }
    swept
}

/// The supervisor's (`me`'s) children it did not spawn, as `/proc` says now. Its own lists of
/// children (`proctree::children_of`) are read, and only the stat of each child that is not its
/// own: a sweep at every SIGCHLD with a thousand upstreams running would otherwise read a
/// thousand `/proc/<pid>/stat` files (more, with their own children) each time. Those lists may
/// miss a child while others come and go, so each adopted orphan missing from them is read
/// itself: one still there is never taken for gone (and forgotten by the guardians). Without
/// such lists (a kernel built without them), all of `/proc` is read.
fn orphans_of(me: u32, own: &children::Own, adopted: &BTreeMap<u32, Adopted>) -> Vec<proctree::Stat> {
    let Some(children) = proctree::children_of(me) else {
        return proctree::snapshot().into_iter().filter(|p| p.ppid == me && !own.contains(p.pid)).collect();
    };
    let missed = adopted.keys().filter(|pid| !children.contains(pid)).copied().collect::<Vec<_>>();
    let candidates = children.into_iter().filter(|pid| !own.contains(*pid)).chain(missed);
    candidates.filter_map(proctree::read).filter(|p| p.ppid == me).collect()
}

/// [`sweep`] on a blocking thread: it reads `/proc` and may wait for a process caught
/// mid-exec, which must not hold up the runtime's thread (the supervisor runs one by default).
pub async fn sweep_off_thread() {
    if let Err(err) = tokio::task::spawn_blocking(sweep).await {
        tracing::error!(%err, "the orphan sweep failed");
    }
}

/// Sweeps on every SIGCHLD (an adopted orphan died) and every [`BACKSTOP`], for as long as the
/// runtime runs.
pub async fn reap_adopted() {
    let mut sigchld = match signal(SignalKind::child()) {
        Ok(stream) => stream,
        Err(err) => {
            tracing::warn!(%err, "cannot follow SIGCHLD: adopted orphans are swept every {BACKSTOP:?} only");
            loop {
                tokio::time::sleep(BACKSTOP).await;
                sweep_off_thread().await;
            }
        }
    };
    loop {
        let _ = tokio::time::timeout(BACKSTOP, sigchld.recv()).await;
        sweep_off_thread().await;
        tokio::time::sleep(MIN_GAP).await;
    }
}

/// At exit, once every owned child is reaped: sweeps until no adopted child is left, bounded.
pub fn sweep_until_none(limit: Duration) {
    let deadline = std::time::Instant::now() + limit;
    while sweep() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}
