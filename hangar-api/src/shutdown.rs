//! Waiting for the signal to stop.
//!
//! The handlers are installed before the API announces its address: a supervisor or test that
//! sends SIGTERM right after reading the announcement must get a graceful stop, not the default
//! action of the signal.

use tokio::signal::unix::{Signal, SignalKind, signal};

pub struct Signals {
    terminate: Signal,
    interrupt: Signal,
}

impl Signals {
    pub fn install() -> std::io::Result<Signals> {
        Ok(Signals { terminate: signal(SignalKind::terminate())?, interrupt: signal(SignalKind::interrupt())? })
    }

    /// Resolves on SIGTERM or SIGINT, naming which.
    pub async fn received(&mut self) -> &'static str {
        tokio::select! {
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.interrupt.recv() => "SIGINT",
        }
    }
}
