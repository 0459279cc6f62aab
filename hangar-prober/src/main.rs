//! `hangar-prober`: owns the health-check schedule of the hangar's servers.
//!
//! It follows the supervisor's state changes over the control socket and, on each (bursts
//! folded into one), asks which servers to check and when (`Request::Targets`). When a check
//! is due it asks the supervisor to run it (`Request::Check`), judges the outcome and sends the
//! verdict back (`Request::Verdict`); the supervisor counts failures and degrades. It is a
//! separate process so that health checking can die and come back without disturbing a single
//! child: the supervisor remembers when each check is due, so a restarted prober resumes there.
//!
//! - [`schedule`]: when each server is checked next (pure, driven by the caller's clock).
//! - [`checker`]: the loop that keeps the schedule and starts the checks.
//! - [`check`]: one check, and the judgement of its outcome.
#![forbid(unsafe_code)]

mod check;
mod checker;
#[cfg(test)]
mod docs_page;
mod schedule;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use hangar_runtime::client::{Client, Endpoint};
use hangar_runtime::exit::run_main;
use hangar_runtime::logging::{self, LogFormat};
use hangar_runtime::signals::Signals;

/// Schedules the hangar supervisor's health checks.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The supervisor's control socket [default: as the supervisor's].
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// The file holding the control key the prober proves to the supervisor, read at every
    /// connect [default: beside the socket, `<socket>.key`, where the supervisor writes it].
    #[arg(long, value_name = "FILE", env = "HANGAR_CONTROL_KEY_FILE")]
    control_key: Option<PathBuf>,
    /// Log format on stderr [default: json under Kubernetes (KUBERNETES_SERVICE_HOST set) when
    /// stderr is not a terminal, else human].
    #[arg(long, value_enum, env = "HANGAR_LOG_FORMAT", default_value_t = LogFormat::detected(), hide_default_value = true)]
    log_format: LogFormat,
}

fn main() -> ExitCode {
    run_main("hangar-prober", || {
        let args: Args = hangar_runtime::args::parse()?;
        logging::init(args.log_format);
        let runtime = hangar_runtime::runtime::start()?;
        let socket = args.socket.unwrap_or_else(hangar_core::paths::default_socket_path);
        runtime.block_on(async {
            let mut signals = Signals::stop()?;
            let (client, links) = Client::following(Endpoint::new(socket, args.control_key), "prober");
            tokio::select! {
                () = checker::run(client, links) => {}
                _ = signals.stopped() => {}
            }
            tracing::info!("prober stopped");
            Ok(())
        })
    })
}
