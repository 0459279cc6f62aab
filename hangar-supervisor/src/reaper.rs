//! The supervisor as a child subreaper: orphans come to it, and it kills and reaps them.
//!
//! With `PR_SET_CHILD_SUBREAPER`, a process orphaned anywhere below the supervisor (an
//! upstream's double-forked daemon once the upstream itself is gone) is reparented to the
//! supervisor instead of to init, so it stays within reach. The supervisor knows its own
//! children (upstreams, helpers, the guardian: [`Own`]); any other child is such an orphan, and
//! [`sweep`] kills it with everything below it and reaps it.
//!
//! With cgroups, upstreams are not subreapers (an upstream never reaps orphans it did not start,
//! so their zombies would pile up below it, a pid each, for as long as it runs): their orphans
//! come to the supervisor at once, and one still in the cgroup of a running upstream is that
//! upstream's, left to run and reaped when it exits; `cgroup.kill` takes it with its upstream.
//!
//! tokio reaps only the children it spawned, each by its own pid, and the guardian's keeper
//! waits for the guardian by pid; `sweep` likewise waits only for the pids it adopted, never
//! `waitpid(-1)`, which would steal their exit statuses. A spawn registers its child under the
//! same lock the sweep holds, so a child just forked is never taken for an orphan.

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use tokio::signal::unix::{SignalKind, signal};

use crate::proctree;

/// How often the sweep runs without a SIGCHLD, as a backstop.
const BACKSTOP: Duration = Duration::from_secs(5);

static OWN: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// The supervisor's own children; hold it while forking one (see [`own`]).
pub struct Own(MutexGuard<'static, BTreeSet<u32>>);

impl Own {
    /// Records a child the supervisor spawned and will reap itself.
    pub fn insert(&mut self, pid: u32) {
        self.0.insert(pid);
    }
}

/// Locks the registry of the supervisor's own children.
pub fn own() -> Own {
    Own(OWN.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
}

/// Forgets a child once its owner has reaped it (not before: until then the sweep must leave
/// its exit status alone).
pub fn disown(pid: u32) {
    own().0.remove(&pid);
}

/// Makes the supervisor the reaper of every orphan below it.
pub fn become_subreaper() {
    if let Err(err) = nix::sys::prctl::set_child_subreaper(true) {
        tracing::warn!(%err, "cannot become a child subreaper: an upstream's orphans would go to init");
    }
}

/// Kills every child of the supervisor it did not spawn (with all below it), but for those in
/// the cgroup of a running upstream, and reaps those already dead. Returns how many it killed
/// or reaped.
pub fn sweep() -> usize {
    let me = std::process::id();
    let own = own();
    let adopted: Vec<proctree::Stat> =
        proctree::snapshot().into_iter().filter(|p| p.ppid == me && !own.0.contains(&p.pid)).collect();
    let mut swept = 0;
    for orphan in &adopted {
        let kept = orphan.is_live()
            && crate::cgroup::of_process(orphan.pid).is_some_and(|dir| crate::subtree::owns_cgroup(&dir));
        if kept {
            continue;
        }
        swept += 1;
        if orphan.is_live() {
            let killed = proctree::kill_tree(orphan.pid, Some(orphan.start));
            tracing::warn!(pid = orphan.pid, killed, "killed a process an upstream left behind");
        }
        // Already dead, or just killed and about to be: reap it now or at the next SIGCHLD.
        let _ = waitpid(Pid::from_raw(orphan.pid as i32), Some(WaitPidFlag::WNOHANG));
    }
    swept
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
                sweep();
            }
        }
    };
    loop {
        let _ = tokio::time::timeout(BACKSTOP, sigchld.recv()).await;
        sweep();
    }
}

/// At exit, once every owned child is reaped: sweeps until no adopted child is left, bounded.
pub fn sweep_until_none(limit: Duration) {
    let deadline = std::time::Instant::now() + limit;
    while sweep() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}
