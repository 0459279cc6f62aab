//! How the supervisor stops: the shutdown signal every long-running task listens to (a `watch`
//! that turns true once), and the drain before it: on SIGTERM the API instance it runs is told
//! to drain first (not ready, new requests refused 503 with `Retry-After`), and the calls in
//! flight, tasks' calls included, get `shutdown.grace_s` to finish before anything is stopped.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

/// How often a drain looks at the calls still in flight.
const DRAIN_POLL: Duration = Duration::from_millis(50);

/// Resolves once shutdown has been asked for (or its sender is gone).
pub async fn requested(stop: &mut watch::Receiver<bool>) {
    // The guard wait_for returns is dropped here, so callers may hold this across awaits.
    let _ = stop.wait_for(|stopping| *stopping).await;
}

/// Waits until `in_flight` reads 0, at most until `deadline`; true if nothing was left. (The
/// count is each server's calls in flight, read under its lock: a poll, not a notification.)
pub async fn drained(deadline: Instant, mut in_flight: impl FnMut() -> u64) -> bool {
    loop {
        if in_flight() == 0 {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(DRAIN_POLL.min(deadline.saturating_duration_since(Instant::now()))).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_drain_ends_when_nothing_is_in_flight_or_at_its_deadline() {
        let left = Arc::new(AtomicU64::new(2));
        let finishing = left.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            finishing.store(0, Ordering::SeqCst);
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        assert!(drained(deadline, || left.load(Ordering::SeqCst)).await);
        assert!(Instant::now() < deadline, "it did not wait for the deadline");
        let stuck = Instant::now() + Duration::from_secs(3);
        assert!(!drained(stuck, || 1).await);
        assert!(Instant::now() >= stuck);
    }
}
