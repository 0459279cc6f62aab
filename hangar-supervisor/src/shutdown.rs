//! The shutdown signal every long-running task listens to: a `watch` that turns true once.

use tokio::sync::watch;

/// Resolves once shutdown has been asked for (or its sender is gone).
pub async fn requested(stop: &mut watch::Receiver<bool>) {
    // The guard wait_for returns is dropped here, so callers may hold this across awaits.
    let _ = stop.wait_for(|stopping| *stopping).await;
}
