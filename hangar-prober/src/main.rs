//! `hangar-prober`: follows the supervisor's state changes over its control socket.
//!
//! It is a separate process so that health checking can die and come back without disturbing a
//! single child. This version schedules no health checks yet: it connects, subscribes to state
//! changes and logs them, and reconnects whenever the supervisor goes away.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use hangar_core::ipc::{self, ClientFrame, Hello, PROTOCOL_VERSION, Request, ServerFrame};
use interprocess::local_socket::tokio::Stream;
use interprocess::local_socket::traits::tokio::Stream as _;
use interprocess::local_socket::{GenericFilePath, ToFsName};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::signal::unix::{SignalKind, signal};

const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

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

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum LogFormat {
    Human,
    Json,
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
    let filter = tracing_subscriber::EnvFilter::try_from_env("HANGAR_LOG").unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match args.log_format {
        LogFormat::Human => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
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
        tokio::select! {
            () = follow_forever(&socket) => {}
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
        tracing::info!("prober stopped");
        ExitCode::SUCCESS
    })
}

/// Connects, follows, and reconnects with backoff whenever the supervisor goes away.
async fn follow_forever(socket: &std::path::Path) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        match follow(socket).await {
            Ok(()) => {
                tracing::info!("the supervisor closed the connection; reconnecting");
                backoff = FIRST_BACKOFF;
            }
            Err(err) => tracing::debug!(%err, socket = %socket.display(), "supervisor not reachable"),
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

async fn follow(socket: &std::path::Path) -> std::io::Result<()> {
    let name = socket.to_fs_name::<GenericFilePath>()?;
    let stream = Stream::connect(name).await?;
    let (read, mut write) = tokio::io::split(stream);
    let mut lines = BufReader::new(read).lines();
    write.write_all(&ipc::encode(&ClientFrame::Hello(Hello::new("prober")))).await?;
    write.write_all(&ipc::encode(&ClientFrame::Request { id: 1, op: Request::Subscribe })).await?;
    write.flush().await?;
    tracing::info!(socket = %socket.display(), "following the supervisor");
    while let Some(line) = lines.next_line().await? {
        match ipc::decode::<ServerFrame>(line.as_bytes()) {
            Ok(ServerFrame::Hello(hello)) if hello.protocol != PROTOCOL_VERSION => {
                return Err(std::io::Error::other(format!(
                    "the supervisor speaks control protocol {}",
                    hello.protocol
                )));
            }
            Ok(ServerFrame::Event(change)) => {
                tracing::info!(mcp_server = %change.mcp_server_id, from = change.from.as_str(), to = change.to.as_str(), "state change");
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(%err, "unreadable frame from the supervisor"),
        }
    }
    Ok(())
}
