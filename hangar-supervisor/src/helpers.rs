//! The supervisor's helper processes: the prober and one API instance, so that one command is a
//! working hangar. Each is restarted with backoff when it exits; `--no-api` / `--no-prober`
//! leave them to systemd instead.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tokio::sync::watch;

use crate::spawn::{self, signal_group};

const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A helper that ran this long before exiting starts over from the first backoff.
const HEALTHY_RUN: Duration = Duration::from_secs(60);

pub struct Helper {
    pub name: &'static str,
    pub program: PathBuf,
    pub args: Vec<OsString>,
}

/// The helper binaries live next to the supervisor's own (cargo and packages both put them there).
pub fn sibling(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(name)))
        .filter(|path| path.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Runs `helper` until `stop` turns true, then stops it (SIGTERM, then SIGKILL) and returns.
pub async fn supervise(helper: Helper, mut stop: watch::Receiver<bool>) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        if *stop.borrow_and_update() {
            return;
        }
        let started = Instant::now();
        let mut child = match spawn::spawn_helper(helper.program.as_os_str(), &helper.args) {
            Ok(child) => child,
            Err(err) => {
                tracing::error!(helper = helper.name, program = %helper.program.display(), %err, "cannot start helper");
                if wait_or_stop(&mut stop, backoff).await {
                    return;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        let pid = child.id().unwrap_or(0);
        tracing::info!(helper = helper.name, pid, "helper started");
        tokio::select! {
            status = child.wait() => {
                spawn::reap_group(pid);
                tracing::warn!(helper = helper.name, pid, status = ?status.ok(), "helper exited; restarting");
            }
            () = crate::shutdown::requested(&mut stop) => {
                signal_group(pid, Signal::SIGTERM);
                if tokio::time::timeout(Duration::from_secs(5), child.wait()).await.is_err() {
                    signal_group(pid, Signal::SIGKILL);
                    let _ = child.wait().await;
                }
                spawn::reap_group(pid);
                return;
            }
        }
        if started.elapsed() >= HEALTHY_RUN {
            backoff = FIRST_BACKOFF;
        }
        if wait_or_stop(&mut stop, backoff).await {
            return;
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Waits `delay`; true if asked to stop meanwhile.
async fn wait_or_stop(stop: &mut watch::Receiver<bool>, delay: Duration) -> bool {
    tokio::time::timeout(delay, crate::shutdown::requested(stop)).await.is_ok()
}
