//! What the supervisor's own long-running calls share (gateway tasks in `park/`, calls held
//! for a client's answer in `hold/`): unguessable ids for them, and a guard that stops a
//! call whose caller is gone.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::task::AbortHandle;

/// Unguessable ids: a process-wide counter hashed under two random keys.
#[derive(Default)]
pub(crate) struct Ids {
    keys: (RandomState, RandomState),
    counter: AtomicU64,
}

impl Ids {
    pub(crate) fn next(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        format!("{:016x}{:016x}", self.keys.0.hash_one(n), self.keys.1.hash_one(n))
    }
}

/// Aborts the call it guards when dropped, unless disarmed (`.0 = None`: the call was handed
/// on, to a task or a held wait).
pub(crate) struct AbortOnDrop(pub(crate) Option<AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            handle.abort();
        }
    }
}
