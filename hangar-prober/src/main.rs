//! `hangar-prober`: follows the supervisor's state changes over its control socket.
//!
//! It is a separate process so that health checking can die and come back without disturbing a
//! single child. This version schedules no health checks yet: it connects, subscribes to state
//! changes and logs them, and reconnects whenever the supervisor goes away.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use hangar_runtime::client::{Client, Link};
use hangar_runtime::logging::{self, LogFormat};
use tokio::signal::unix::{SignalKind, signal};

/// Follows the hangar supervisor's servers (health checks: not scheduled in this version).
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The supervisor's control socket [default: as the supervisor's].
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Log format on stderr.
    #[arg(long, value_enum, default_value = "human")]
    log_format: LogFormat,
}

const EX_USAGE: u8 = 64;
const EX_SOFTWARE: u8 = 70;

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(err) => {
            let usage_error = err.use_stderr();
            let _ = err.print();
            return if usage_error { ExitCode::from(EX_USAGE) } else { ExitCode::SUCCESS };
        }
    };
    logging::init(args.log_format);
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("hangar-prober: cannot start the runtime: {err}");
            return ExitCode::from(EX_SOFTWARE);
        }
    };
    let socket = args.socket.unwrap_or_else(hangar_core::paths::default_socket_path);
    runtime.block_on(async {
        let (Ok(mut terminate), Ok(mut interrupt)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
        else {
            eprintln!("hangar-prober: cannot install signal handlers");
            return ExitCode::from(EX_SOFTWARE);
        };
        let (_client, links) = Client::following(socket, "prober");
        tokio::select! {
            () = follow(links) => {}
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        tracing::info!("prober stopped");
        ExitCode::SUCCESS
    })
}

async fn follow(mut links: tokio::sync::mpsc::UnboundedReceiver<Link>) {
    while let Some(link) = links.recv().await {
        match link {
            Link::Up => tracing::info!("following the supervisor"),
            Link::Changed(change) => {
                tracing::info!(mcp_server = %change.mcp_server_id, from = change.from.as_str(), to = change.to.as_str(), "state change");
            }
            Link::Down => tracing::info!("lost the supervisor; reconnecting"),
        }
    }
}
