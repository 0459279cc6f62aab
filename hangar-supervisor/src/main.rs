//! `hangar-supervisor`: owns every upstream MCP server and serves the control socket.
//!
//! This file only parses arguments and wires the pieces together; see `ARCHITECTURE.md`.
#![deny(unsafe_code)]

mod cgroup;
mod control;
mod guardian;
mod hangar;
mod helpers;
mod limits;
mod listeners;
mod logs;
mod notify;
mod proctree;
mod reaper;
mod server;
mod shutdown;
mod spawn;
mod subtree;
mod sysexits;
mod upstream;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use hangar_core::config::Config;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

use hangar_runtime::logging::{self, LogFormat};

use crate::helpers::{Helper, sibling, supervise};

/// How long shutdown waits for children to stop before it kills them.
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);

/// Runs the configured MCP servers and serves the hangar's control socket.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The YAML config naming the MCP servers.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The control socket [default: $RUNTIME_DIRECTORY or $XDG_RUNTIME_DIR/hangar/supervisor.sock].
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Also serve members of this group (a name or a numeric gid) on the control socket, as a
    /// primary or supplementary group: the socket is then owned by the group and mode 0660.
    /// Without it, only the supervisor's own user and root are served.
    #[arg(long, value_name = "NAME|GID")]
    socket_group: Option<String>,
    /// The address the API it starts listens on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8000")]
    listen: String,
    /// Do not start an API instance (run `hangar-api` yourself, e.g. under systemd).
    #[arg(long)]
    no_api: bool,
    /// Do not start the prober (run `hangar-prober` yourself).
    #[arg(long)]
    no_prober: bool,
    /// Log format on stderr.
    #[arg(long, value_enum, default_value = "human")]
    log_format: LogFormat,
    /// How an upstream's whole subtree is killed: a cgroup v2 of its own where the supervisor's
    /// cgroup is delegated (`cgroup`, e.g. systemd `Delegate=yes`), or the supervisor as
    /// subreaper, an environment marker and a walk of the process tree (`subreaper`); `auto`
    /// picks `cgroup` when it can.
    #[arg(long, value_enum, default_value = "auto")]
    kill_mode: cgroup::KillMode,
}

use sysexits::{EX_CONFIG, EX_SOFTWARE, EX_UNAVAILABLE};

fn main() -> ExitCode {
    if std::env::args_os().nth(1).is_some_and(|arg| arg == guardian::GUARDIAN_ARG) {
        return guardian::run();
    }
    let args = match hangar_runtime::args::parse::<Args>() {
        Ok(args) => args,
        Err(code) => return code,
    };
    logging::init(args.log_format);
    let config = match Config::load(&args.config) {
        Ok(config) => config,
        Err(err) => {
            eprintln!("hangar-supervisor: {err}");
            return ExitCode::from(EX_CONFIG);
        }
    };
    // Resolved once at start: an unknown group is a configuration mistake, not a runtime one.
    let socket_group = match args.socket_group.as_deref().map(control::SocketGroup::resolve).transpose() {
        Ok(group) => group,
        Err(err) => {
            eprintln!("hangar-supervisor: {err}");
            return ExitCode::from(EX_CONFIG);
        }
    };
    let guardian = match contain_descendants(args.kill_mode, args.log_format) {
        Ok(guardian) => guardian,
        Err(code) => return code,
    };
    let runtime = match hangar_runtime::runtime::start("hangar-supervisor") {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let code = runtime.block_on(run(args, config, socket_group));
    drop(runtime);
    release_descendants(guardian);
    code
}

/// Before any child runs: the supervisor becomes the subreaper of every orphan below it, picks
/// how upstream subtrees are killed, and starts the guardian (see `spawn.rs`).
fn contain_descendants(mode: cgroup::KillMode, log_format: LogFormat) -> Result<Option<guardian::Keeper>, ExitCode> {
    reaper::become_subreaper();
    match cgroup::init(mode) {
        Ok(chosen) => tracing::info!(kill_mode = chosen, "upstream subtrees are killed whole"),
        Err(why) => {
            eprintln!("hangar-supervisor: --kill-mode cgroup: {why}");
            return Err(ExitCode::from(EX_UNAVAILABLE));
        }
    }
    Ok(guardian::start(log_format))
}

/// After every child is reaped: kills and reaps any orphan left, then lets the guardian go
/// (closing its pipe, it exits with nothing to kill).
fn release_descendants(guardian: Option<guardian::Keeper>) {
    reaper::sweep_until_none(Duration::from_secs(2));
    if let Some(keeper) = guardian {
        guardian::stop(keeper);
    }
}

async fn run(args: Args, config: Config, socket_group: Option<control::SocketGroup>) -> ExitCode {
    let socket = args.socket.clone().unwrap_or_else(hangar_core::paths::default_socket_path);
    let (listener, socket_file) = match control::bind(&socket, socket_group.as_ref()).await {
        Ok(bound) => bound,
        Err(err) => {
            eprintln!("hangar-supervisor: {err}");
            return ExitCode::from(err.exit_code());
        }
    };
    let (mut terminate, mut interrupt, mut hangup) =
        match (signal(SignalKind::terminate()), signal(SignalKind::interrupt()), signal(SignalKind::hangup())) {
            (Ok(t), Ok(i), Ok(h)) => (t, i, h),
            _ => {
                eprintln!("hangar-supervisor: cannot install signal handlers");
                return ExitCode::from(EX_SOFTWARE);
            }
        };
    let hangar = hangar::Hangar::new(&config, Some(args.config.clone()));
    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(reaper::reap_adopted());
    let control = tokio::spawn(control::serve(listener, hangar.clone(), socket_group, stop.clone()));
    tokio::spawn(hangar.clone().stop_idle_servers(stop.clone()));
    tracing::info!(socket = %socket.display(), servers = hangar.len(), "supervisor ready");
    println!("hangar-supervisor ready on {}", socket.display());
    // The control socket is bound and the config loaded: what `Type=notify` waits for.
    notify::ready(&format!("serving {} MCP server(s) on {}", hangar.len(), socket.display()));
    if let Some(interval) = notify::watchdog_interval() {
        tokio::spawn(notify::watchdog(interval));
    }

    let mut helper_tasks = Vec::new();
    let socket_arg = socket.clone().into_os_string();
    // The helpers log as the supervisor does, into the same stream.
    let log_format = match args.log_format {
        LogFormat::Human => "human",
        LogFormat::Json => "json",
    };
    if !args.no_prober {
        let helper = Helper {
            name: "prober",
            program: sibling("hangar-prober"),
            args: vec!["--socket".into(), socket_arg.clone(), "--log-format".into(), log_format.into()],
        };
        helper_tasks.push(tokio::spawn(supervise(helper, stop.clone())));
    }
    if !args.no_api {
        let helper = Helper {
            name: "api",
            program: sibling("hangar-api"),
            args: vec![
                "--socket".into(),
                socket_arg.clone(),
                "--listen".into(),
                args.listen.clone().into(),
                "--log-format".into(),
                log_format.into(),
            ],
        };
        helper_tasks.push(tokio::spawn(supervise(helper, stop.clone())));
    }

    loop {
        tokio::select! {
            _ = terminate.recv() => { tracing::info!("SIGTERM: shutting down"); break; }
            _ = interrupt.recv() => { tracing::info!("SIGINT: shutting down"); break; }
            _ = hangup.recv() => {
                // A refused config is logged; the running one stays.
                notify::reloading();
                if let Err(err) = hangar.reload().await {
                    tracing::error!(%err, "SIGHUP: reload refused");
                }
                notify::ready(&format!("serving {} MCP server(s) on {}", hangar.len(), socket.display()));
            }
        }
    }
    // Stop taking work, stop helpers (so no API sends new calls), then every child in order.
    notify::stopping();
    let _ = stop_tx.send(true);
    for task in helper_tasks {
        let _ = task.await;
    }
    hangar.shutdown(SHUTDOWN_DEADLINE).await;
    let _ = control.await;
    socket_file.remove();
    tracing::info!("supervisor stopped");
    ExitCode::SUCCESS
}
