//! The supervisor's own children (upstreams, helpers, the guardians): those it spawned and reaps
//! itself, by pid. Any other child is an orphan it adopted as subreaper (`reaper.rs`), which the
//! orphan sweep may take. A spawn registers its child under the lock the sweep holds, so a child
//! just forked is never taken for an orphan.

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard};

use hangar_core::sync::Unpoisoned;

static OWN: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

/// The supervisor's own children; hold it while forking one (see [`own`]).
pub struct Own(MutexGuard<'static, BTreeSet<u32>>);

impl Own {
    /// Records a child the supervisor spawned and will reap itself.
    pub fn insert(&mut self, pid: u32) {
        self.0.insert(pid);
    }

    pub fn contains(&self, pid: u32) -> bool {
        self.0.contains(&pid)
    }
}

/// Locks the registry of the supervisor's own children.
pub fn own() -> Own {
    Own(OWN.locked())
}

/// Forgets a child once its owner has reaped it (not before: until then the sweep must leave
/// its exit status alone).
pub fn disown(pid: u32) {
    own().0.remove(&pid);
}
