//! Waiting for the signal to stop.

use tokio::signal::unix::{SignalKind, signal};

/// Resolves on SIGTERM or SIGINT, naming which.
pub async fn signal_received() -> &'static str {
    let terminate = async {
        match signal(SignalKind::terminate()) {
            Ok(mut stream) => {
                stream.recv().await;
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot watch SIGTERM; only SIGINT stops the API");
                std::future::pending::<()>().await;
            }
        }
    };
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = terminate => "SIGTERM",
        () = interrupt => "SIGINT",
    }
}
