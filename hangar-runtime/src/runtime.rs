//! The tokio runtime every hangar process runs on.
//!
//! One thread by default: each process's work per request is small, the processes already run
//! in parallel with one another, and on the small machines the hangar targets a second worker
//! thread mostly adds cross-thread wake-ups (measured: see docs/bench-log/2026.md). `HANGAR_WORKER_THREADS=N`
//! (N > 1) asks for a multi-threaded runtime with N workers, for a busy supervisor on a big machine.

use std::io;

use tokio::runtime::{Builder, Runtime};

use crate::exit::{EX_SOFTWARE, Exit};

pub const WORKER_THREADS_ENV: &str = "HANGAR_WORKER_THREADS";

/// The runtime, or why there is none.
pub fn start() -> Result<Runtime, Exit> {
    build().map_err(|err| Exit::new(EX_SOFTWARE, format!("cannot start the async runtime: {err}")))
}

/// A runtime with I/O and time enabled, as many worker threads as `HANGAR_WORKER_THREADS` says.
fn build() -> io::Result<Runtime> {
    let workers = std::env::var(WORKER_THREADS_ENV).ok().and_then(|n| n.trim().parse::<usize>().ok()).unwrap_or(1);
    if workers > 1 {
        Builder::new_multi_thread().worker_threads(workers).enable_all().build()
    } else {
        Builder::new_current_thread().enable_all().build()
    }
}
