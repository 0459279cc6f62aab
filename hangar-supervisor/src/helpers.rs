//! The supervisor's helper processes: the prober and one API instance, so that one command is a
//! working hangar. Each is restarted with backoff when it exits; `--no-api` / `--no-prober`
//! leave them to systemd instead.

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hangar_runtime::logging::LogFormat;
use nix::sys::signal::Signal;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::args::Args;
use crate::proctree::signal_group;
use crate::spawn;

const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A helper that ran this long before exiting starts over from the first backoff.
const HEALTHY_RUN: Duration = Duration::from_secs(60);

struct Helper {
    name: &'static str,
    program: PathBuf,
    args: Vec<OsString>,
    /// Its standard input is (a copy of) the supervisor's: the API's listening socket, as
    /// `--api-listener-stdin` says.
    stdin_listener: bool,
}

/// How a helper is stopped: SIGTERM when its watch turns true, SIGKILL after this long.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// When and how the helpers stop: the prober on `stop`; the API on `drain`, which comes first,
/// with `grace` (the config's `shutdown.grace_s`, handed on as `--shutdown-grace-s`) for the
/// requests it has in flight.
pub struct Stops<'a> {
    pub stop: &'a watch::Receiver<bool>,
    pub drain: &'a watch::Receiver<bool>,
    pub grace: Duration,
}

/// Starts the prober and an API instance on `socket` (but those `--no-prober` and `--no-api`
/// leave out), each supervised until its watch in `stops` turns true.
/// `otlp_endpoint` (the config's `telemetry.otlp_endpoint`) is handed to the API, which then
/// exports its spans there too.
pub fn start_all(args: &Args, socket: &Path, otlp_endpoint: Option<&str>, stops: &Stops<'_>) -> Running {
    let socket: OsString = socket.into();
    // The helpers log as the supervisor does, into the same stream.
    let log_format = match args.log_format {
        LogFormat::Human => "human",
        LogFormat::Json => "json",
    };
    let mut running = Running::default();
    if !args.no_prober {
        let helper = Helper {
            name: "prober",
            program: sibling("hangar-prober"),
            args: vec!["--socket".into(), socket.clone(), "--log-format".into(), log_format.into()],
            stdin_listener: false,
        };
        running.on_stop.push(tokio::spawn(supervise(helper, stops.stop.clone(), STOP_WAIT)));
    }
    if !args.no_api {
        let mut helper = Helper {
            name: "api",
            program: sibling("hangar-api"),
            args: vec![
                "--socket".into(),
                socket,
                "--log-format".into(),
                log_format.into(),
                "--shutdown-grace-s".into(),
                stops.grace.as_secs_f64().to_string().into(),
            ],
            stdin_listener: args.api_listener_stdin,
        };
        // The socket `hangar run` bound and passed as standard input, or the address to bind.
        if args.api_listener_stdin {
            helper.args.push("--listen-stdin".into());
        } else {
            helper.args.extend(["--listen".into(), args.listen.clone().into()]);
        }
        if let Some(endpoint) = otlp_endpoint {
            helper.args.extend(["--otlp-endpoint".into(), endpoint.into()]);
        }
        // Its drain takes up to the grace; SIGKILL only past that.
        running.on_drain.push(tokio::spawn(supervise(helper, stops.drain.clone(), stops.grace + STOP_WAIT)));
    }
    running
}

/// The helpers' supervising tasks, by the watch that ends them; each returns once its helper is
/// gone.
#[derive(Default)]
pub struct Running {
    pub on_drain: Vec<JoinHandle<()>>,
    pub on_stop: Vec<JoinHandle<()>>,
}

/// The helper binaries live next to the supervisor's own (cargo and packages both put them there).
fn sibling(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(name)))
        .filter(|path| path.exists())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Runs `helper` until `stop` turns true, then stops it (SIGTERM, then SIGKILL after
/// `stop_wait`) and returns.
async fn supervise(helper: Helper, mut stop: watch::Receiver<bool>, stop_wait: Duration) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        if *stop.borrow_and_update() {
            return;
        }
        let started = Instant::now();
        // A copy for each start: the listening socket stays the supervisor's across restarts.
        let stdin = match helper.stdin_listener {
            true => std::io::stdin().as_fd().try_clone_to_owned().ok(),
            false => None,
        };
        let mut child = match spawn::spawn_helper(helper.program.as_os_str(), &helper.args, stdin) {
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
                if tokio::time::timeout(stop_wait, child.wait()).await.is_err() {
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
