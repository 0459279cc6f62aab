//! hangar-api: the hangar's gateway. Serves REST under `/api`, MCP at `/mcp` and Prometheus text
//! at `/metrics`, answering from the supervisor over its control socket. It holds no state of
//! its own, so any number of instances can run side by side. This file: arguments and wiring.
//!
//! Architecture invariants: every record it shows (servers, `dead` objects, status notes, tool
//! records, log lines) comes from the supervisor as a hangar-core type and is serialized
//! unchanged on REST and MCP alike; handlers reach the supervisor only through the small
//! [`supervisor::Supervisor`] trait, so they are tested without a socket.

#![forbid(unsafe_code)]

mod app;
mod auth;
mod body;
mod error;
mod guard;
mod json;
mod listen;
mod mcp;
mod metrics;
mod random;
mod rest;
mod serve;
mod shapes;
mod shutdown;
mod state;
mod supervisor;
#[cfg(test)]
mod testing;

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use tokio::sync::oneshot;

use crate::state::AppState;
use hangar_runtime::client::Client;
use hangar_runtime::logging::{self, LogFormat};

/// jemalloc, with its background purging thread, gives freed pages back to the system on its
/// own: with glibc's malloc the memory of a flood of connections stayed resident after they
/// closed (344 MB after 15,000; mimalloc gave it back only while requests kept coming).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// sysexits: bad usage, port held or cannot bind, internal failure.
const EX_UNAVAILABLE: u8 = 69;
const EX_SOFTWARE: u8 = 70;
const EX_CONFIG: u8 = 78;
/// How long in-flight requests may finish after a stop signal.
const GRACE: Duration = Duration::from_secs(10);

/// The hangar's gateway: REST under /api and MCP at /mcp, backed by the supervisor.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// The supervisor's control socket [default: $RUNTIME_DIRECTORY/supervisor.sock, else
    /// $XDG_RUNTIME_DIR/hangar/supervisor.sock, else /tmp/hangar-$USER/supervisor.sock]
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Address to serve HTTP on: 127.0.0.1:PORT, localhost:PORT or [::1]:PORT (port 0 picks one).
    /// Refused (exit 69) if anything already answers on an address it resolves to. Not used under
    /// systemd socket activation (`LISTEN_FDS`), where the listener is the socket passed as fd 3.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8000", value_parser = listen::parse_addr)]
    listen: String,
    /// Log format on stderr.
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = LogFormat::Human)]
    log_format: LogFormat,
    /// A file of API key hashes (`sha256:<hex>` a line); every route but /health/* then needs a
    /// key (`X-API-Key` or `Authorization: Bearer`).
    #[arg(long, value_name = "FILE", env = "HANGAR_API_KEYS_FILE")]
    api_keys: Option<PathBuf>,
    /// Serve beyond loopback without API keys. Without this, that is refused.
    #[arg(long)]
    unsafe_no_auth: bool,
    /// Also let web pages from this origin (`https://host[:port]`) call the API (repeat it, or
    /// separate origins with commas). Without it, a request with an `Origin` header is served only
    /// from the hangar's own origin and, on a loopback listener, from loopback origins; every
    /// other origin, and `null`, is refused (403), as is a non-loopback `Host` on a loopback
    /// listener and a POST without `Content-Type: application/json`.
    #[arg(long, value_name = "ORIGIN", env = "HANGAR_API_ALLOW_ORIGINS", value_delimiter = ',', value_parser = guard::parse_allowed_origin)]
    allow_origin: Vec<guard::AllowedOrigin>,
    /// Connections served at once [default: 4096, or fewer if the open-file limit is lower]. Past
    /// it, a few reserve connections serve one request each (health probes, an operator's
    /// command); past those, a new connection evicts the one that has waited longest without
    /// sending a request (answered 503 and closed), or is itself answered 503 and closed.
    #[arg(long, value_name = "N", env = "HANGAR_API_MAX_CONNECTIONS", value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: Option<u32>,
    /// Seconds a client has to send a request's headers, from connecting (or, on a kept-alive
    /// connection, from the request's first byte), and then as long again for its body; a slower
    /// connection is closed.
    #[arg(long, value_name = "SECONDS", env = "HANGAR_API_HEADER_TIMEOUT_S", default_value_t = serve::DEFAULT_HEADER_TIMEOUT_S, value_parser = clap::value_parser!(u64).range(1..=3600))]
    header_timeout_s: u64,
    /// Seconds a kept-alive connection may wait for its next request before it is closed. A
    /// request in progress (an event stream included) is never idle.
    #[arg(long, value_name = "SECONDS", env = "HANGAR_API_IDLE_TIMEOUT_S", default_value_t = serve::DEFAULT_IDLE_TIMEOUT_S, value_parser = clap::value_parser!(u64).range(1..=86400))]
    idle_timeout_s: u64,
}

fn main() -> ExitCode {
    let args = match hangar_runtime::args::parse::<Args>() {
        Ok(args) => args,
        Err(code) => return code,
    };
    // Before any thread: taking the inherited socket unsets LISTEN_FDS and LISTEN_PID.
    let inherited = match listen::from_systemd() {
        Ok(inherited) => inherited,
        Err(err) => {
            eprintln!("hangar-api: {err}");
            return ExitCode::from(EX_UNAVAILABLE);
        }
    };
    logging::init(args.log_format);
    let fd_limit = serve::raise_fd_limit();
    let limits = serve::Limits {
        max_connections: args.max_connections.map_or_else(|| serve::default_max_connections(fd_limit), |n| n as usize),
        header_timeout: Duration::from_secs(args.header_timeout_s),
        idle_timeout: Duration::from_secs(args.idle_timeout_s),
    };
    let keys = match &args.api_keys {
        Some(path) => match auth::ApiKeys::load(path) {
            Ok(keys) => keys,
            Err(err) => {
                eprintln!("hangar-api: {err}");
                return ExitCode::from(EX_CONFIG);
            }
        },
        None => auth::ApiKeys::default(),
    };
    let runtime = match hangar_runtime::runtime::start("hangar-api") {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    if let Some(fd_limit) = fd_limit
        && !serve::fits(limits.max_connections, fd_limit)
    {
        tracing::warn!(
            max_connections = limits.max_connections,
            fd_limit,
            "--max-connections exceeds what the open-file limit allows; accepts will fail and back off at that limit"
        );
    }
    tracing::debug!(?fd_limit, ?limits, "connection limits");
    let code = runtime.block_on(run(args, inherited, keys, limits));
    // A resolver thread may still be parked; do not let it hold up the exit.
    runtime.shutdown_timeout(Duration::from_secs(1));
    code
}

fn refuse_without_auth(address: &str) -> ExitCode {
    eprintln!(
        "hangar-api: refusing to serve {address} beyond loopback without API keys: give --api-keys FILE, or --unsafe-no-auth"
    );
    ExitCode::from(EX_CONFIG)
}

/// Turns the supervisor's news into the list changes MCP clients follow.
async fn relay_list_changes(
    mut links: tokio::sync::mpsc::UnboundedReceiver<hangar_runtime::client::Link>,
    changes: tokio::sync::broadcast::Sender<state::ListChanged>,
) {
    while let Some(link) = links.recv().await {
        if let hangar_runtime::client::Link::ToolsChanged(_) = link {
            let _ = changes.send(state::ListChanged::Tools);
        }
    }
}

/// `inherited`: the listening socket systemd passed (socket activation), else bind `--listen`.
async fn run(
    args: Args,
    inherited: Option<std::net::TcpListener>,
    keys: auth::ApiKeys,
    limits: serve::Limits,
) -> ExitCode {
    let mut signals = match shutdown::Signals::install() {
        Ok(signals) => signals,
        Err(err) => {
            eprintln!("hangar-api: cannot install signal handlers: {err}");
            return ExitCode::from(EX_SOFTWARE);
        }
    };
    let activated = inherited.is_some();
    let bound = match inherited {
        // systemd owns the socket (and its port): no preflight, `--listen` does not apply.
        Some(listener) => listen::adopt(listener),
        None => {
            // Checked before binding, so nothing ever listens beyond loopback unprotected.
            if !listen::is_loopback(&args.listen) && keys.is_empty() && !args.unsafe_no_auth {
                return refuse_without_auth(&args.listen);
            }
            if let Err(why) = listen::preflight(&args.listen).await {
                eprintln!("hangar-api: refusing to start: {why}");
                return ExitCode::from(EX_UNAVAILABLE);
            }
            listen::bind(&args.listen).await
        }
    };
    let listener = match bound {
        Ok(listener) => listener,
        Err(err) => {
            eprintln!("hangar-api: {err}");
            return ExitCode::from(EX_UNAVAILABLE);
        }
    };
    let local = match listener.local_addr() {
        Ok(local) => local,
        Err(err) => {
            let address = if activated { listen::INHERITED.to_owned() } else { args.listen };
            eprintln!("hangar-api: {}", listen::ListenError { address, reason: listen::reason(&err) });
            return ExitCode::from(EX_UNAVAILABLE);
        }
    };
    if !local.ip().is_loopback() && keys.is_empty() && !args.unsafe_no_auth {
        return refuse_without_auth(&local.to_string());
    }
    let socket = args.socket.unwrap_or_else(hangar_core::paths::default_socket_path);
    let (client, links) = Client::following(socket.clone(), "api");
    let (changes, _) = tokio::sync::broadcast::channel(64);
    tokio::spawn(relay_list_changes(links, changes.clone()));
    let state = AppState {
        supervisor: Arc::new(client),
        guard: guard::Guard { loopback_only: local.ip().is_loopback(), allowed_origins: args.allow_origin.into() },
        changes,
        keys,
    };
    announce(local);
    tracing::info!(address = %local, socket = %socket.display(), activated, "serving REST at /api and MCP at /mcp");

    let (stop, stopped) = oneshot::channel::<()>();
    let serve = serve::serve(listener, app::router(state), limits, async {
        let _ = stopped.await;
    });
    let mut server = tokio::spawn(serve);
    tokio::select! {
        signal = signals.received() => {
            tracing::info!(signal, "shutting down");
            let _ = stop.send(());
            match tokio::time::timeout(GRACE, &mut server).await {
                Ok(Ok(())) => ExitCode::SUCCESS,
                Ok(Err(err)) => {
                    tracing::error!(error = %err, "the HTTP server task failed");
                    ExitCode::from(EX_SOFTWARE)
                }
                Err(_) => {
                    tracing::warn!(grace_s = GRACE.as_secs(), "requests still running after the grace period; exiting");
                    server.abort();
                    ExitCode::SUCCESS
                }
            }
        }
        ended = &mut server => {
            tracing::error!(outcome = ?ended, "the HTTP server stopped by itself");
            ExitCode::from(EX_SOFTWARE)
        }
    }
}

/// The one line on stdout, read back by whoever started us (e.g. a test that asked for port 0).
fn announce(local: SocketAddr) {
    let mut stdout = std::io::stdout().lock();
    let written = writeln!(stdout, "hangar-api listening on http://{local}").and_then(|()| stdout.flush());
    if let Err(err) = written {
        tracing::warn!(error = %err, "cannot write the listening line to stdout");
    }
}
