//! The supervisor's life once its config is loaded: serve the control socket, start the helpers,
//! tell systemd it is ready, reload on SIGHUP, and on SIGTERM or SIGINT stop in order: drain
//! first (the API it runs turns not ready and refuses new requests; the calls in flight, tasks'
//! included, get `shutdown.grace_s`), then the prober, every child, and the socket; exit 0.

use std::time::Duration;

use hangar_core::config::Config;
use hangar_core::journal::default_state_dir;
use hangar_runtime::exit::Exit;
use hangar_runtime::signals::{Received, Signals};
use tokio::sync::{mpsc, watch};

use crate::args::Args;
use crate::journal::Journal;
use crate::{config_watch, control, hangar, helpers, notify, reaper, shutdown};

/// How long shutdown waits for children to stop before it kills them.
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);

pub async fn run(args: Args, config: Config, socket_group: Option<control::SocketGroup>) -> Result<(), Exit> {
    // Before anything is bound: an unset `${POD_IP}` or a missing secret is a config error (78).
    let fleet = config
        .cluster
        .clone()
        .map(|block| {
            let cluster = hangar_core::cluster::Cluster::open(&block, |name| std::env::var(name).ok())?;
            Ok((block, cluster))
        })
        .transpose()
        .map_err(|err: hangar_core::config::KeyError| Exit::new(hangar_runtime::exit::EX_CONFIG, err))?;
    let socket = args.socket.clone().unwrap_or_else(hangar_core::paths::default_socket_path);
    let (listener, socket_file, key) = control::bind(&socket, socket_group.as_ref()).await?;
    let mut signals = Signals::stop_or_reload()?;
    let state_dir = config.state_dir.clone().unwrap_or_else(|| default_state_dir(|name| std::env::var(name).ok()));
    let journal = Journal::open(&state_dir)?;
    tracing::info!(journal = %journal.path().display(), "journal open");
    let hangar = hangar::Hangar::new(&config, Some(args.config.clone()), journal.clone());
    let vault = crate::vault::Vault::open(&config.credentials, &state_dir, journal.path())
        .map_err(|err| Exit::new(hangar_runtime::exit::Sysexit::exit_code(&err), err))?;
    tracing::info!(key_file = %vault.key_file().display(), "stored credentials open");
    hangar.keep_vault(std::sync::Arc::new(vault));
    if let Some((block, cluster)) = fleet {
        tracing::info!(advertise = cluster.advertise(), "one hangar of a fleet");
        hangar.join_fleet(block, cluster);
    }
    let (stop_tx, stop) = watch::channel(false);
    let (drain_tx, drain) = watch::channel(false);
    // Read once: a reload does not change it (the API was started with it).
    let grace = config.shutdown.grace();
    tokio::spawn(reaper::reap_adopted());
    let control = tokio::spawn(control::serve(listener, hangar.clone(), socket_group, key, stop.clone()));
    tokio::spawn(hangar.clone().stop_idle_servers(stop.clone()));
    tracing::info!(socket = %socket.display(), servers = hangar.len(), "supervisor ready");
    println!("hangar-supervisor ready on {}", socket.display());
    // The control socket is bound and the config loaded: what `Type=notify` waits for.
    let serving = || format!("serving {} MCP server(s) on {}", hangar.len(), socket.display());
    notify::ready(&serving());
    if let Some(interval) = notify::watchdog_interval() {
        tokio::spawn(notify::watchdog(interval));
    }
    let stops = helpers::Stops { stop: &stop, drain: &drain, grace };
    let helpers = helpers::start_all(&args, &socket, config.telemetry.otlp_endpoint.as_deref(), &stops);

    let (config_changed, mut config_changes) = mpsc::channel(1);
    if args.watch_config {
        tokio::spawn(config_watch::watch(args.config.clone(), config_changed, stop.clone()));
    }
    loop {
        let (received, cause) = tokio::select! {
            received = signals.next() => (received, "SIGHUP"),
            Some(()) = config_changes.recv() => (Received::Reload, "config file changed"),
        };
        match received {
            Received::Stop(signal) => {
                tracing::info!("{signal}: shutting down");
                break;
            }
            Received::Reload => {
                // A refused config is logged; the running one stays.
                notify::reloading();
                if let Err(err) = hangar.reload(hangar_core::access::HANGAR).await {
                    tracing::error!(%err, "{cause}: reload refused");
                }
                notify::ready(&serving());
            }
        }
    }
    notify::stopping();
    let deadline = tokio::time::Instant::now() + grace;
    tracing::info!(grace_s = grace.as_secs_f64(), calls_in_flight = hangar.calls_in_flight(), "draining");
    let _ = drain_tx.send(true);
    // The API answers what it has in flight, serves tasks' follow-ups until the calls here finish
    // (and a moment to collect them), then exits (killed past the grace).
    for task in helpers.on_drain {
        let _ = task.await;
    }
    // Tasks' calls, and calls from API instances this supervisor did not start.
    if !shutdown::drained(deadline, || hangar.calls_in_flight()).await {
        tracing::warn!(
            calls_in_flight = hangar.calls_in_flight(),
            "calls still running after the grace period; stopping them"
        );
    }
    let _ = stop_tx.send(true);
    for task in helpers.on_stop {
        let _ = task.await;
    }
    hangar.shutdown(SHUTDOWN_DEADLINE).await;
    let _ = control.await;
    journal.flush();
    socket_file.remove();
    tracing::info!("supervisor stopped");
    Ok(())
}

/// `--exit-with-parent`: the kernel sends SIGTERM (a stop in order) when the process that
/// started this one exits, however it exits (`hangar run`, SIGKILLed, leaves nothing behind).
/// A parent already gone by now is noticed here: the supervisor stops before it starts anything.
/// Answers the parent's pid.
pub fn exit_with_parent() -> u32 {
    let before = std::os::unix::process::parent_id();
    if let Err(err) = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM) {
        tracing::warn!(%err, "cannot be told when the process that started the supervisor exits");
    }
    if before == 1 || std::os::unix::process::parent_id() != before {
        tracing::warn!("the process that started the supervisor is gone: stopping");
        std::process::exit(0);
    }
    before
}

/// `--run-dir`: `hangar run`'s private directory, removed once everything has stopped if that
/// run (`parent`) is gone (SIGKILLed: it could not remove it itself). Only a directory of the
/// run's (named `hangar-run-*`, this user's) is removed.
pub fn remove_run_dir(parent: u32, dir: &std::path::Path) {
    use std::os::unix::fs::MetadataExt;
    if std::os::unix::process::parent_id() == parent {
        return;
    }
    let named = dir.file_name().and_then(|name| name.to_str()).is_some_and(|name| name.starts_with("hangar-run-"));
    let ours =
        std::fs::symlink_metadata(dir).is_ok_and(|meta| meta.is_dir() && meta.uid() == nix::unistd::getuid().as_raw());
    if named
        && ours
        && let Err(err) = std::fs::remove_dir_all(dir)
    {
        tracing::warn!(%err, dir = %dir.display(), "the run's directory could not be removed");
    }
}
