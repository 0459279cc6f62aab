//! The supervisor's life once its config is loaded: serve the control socket, start the helpers,
//! tell systemd it is ready, reload on SIGHUP, and on SIGTERM or SIGINT stop in order: helpers
//! first (so no API sends new calls), then every child, then the socket.

use std::time::Duration;

use hangar_core::config::Config;
use hangar_core::journal::default_state_dir;
use hangar_runtime::exit::Exit;
use hangar_runtime::signals::{Received, Signals};
use tokio::sync::watch;

use crate::args::Args;
use crate::journal::Journal;
use crate::{control, hangar, helpers, notify, reaper};

/// How long shutdown waits for children to stop before it kills them.
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);

pub async fn run(args: Args, config: Config, socket_group: Option<control::SocketGroup>) -> Result<(), Exit> {
    let socket = args.socket.clone().unwrap_or_else(hangar_core::paths::default_socket_path);
    let (listener, socket_file) = control::bind(&socket, socket_group.as_ref()).await?;
    let mut signals = Signals::stop_or_reload()?;
    let state_dir = config.state_dir.clone().unwrap_or_else(|| default_state_dir(|name| std::env::var(name).ok()));
    let journal = Journal::open(&state_dir)?;
    tracing::info!(journal = %journal.path().display(), "journal open");
    let hangar = hangar::Hangar::new(&config, Some(args.config.clone()), journal.clone());
    let (stop_tx, stop) = watch::channel(false);
    tokio::spawn(reaper::reap_adopted());
    let control = tokio::spawn(control::serve(listener, hangar.clone(), socket_group, stop.clone()));
    tokio::spawn(hangar.clone().stop_idle_servers(stop.clone()));
    tracing::info!(socket = %socket.display(), servers = hangar.len(), "supervisor ready");
    println!("hangar-supervisor ready on {}", socket.display());
    // The control socket is bound and the config loaded: what `Type=notify` waits for.
    let serving = || format!("serving {} MCP server(s) on {}", hangar.len(), socket.display());
    notify::ready(&serving());
    if let Some(interval) = notify::watchdog_interval() {
        tokio::spawn(notify::watchdog(interval));
    }
    let helper_tasks = helpers::start_all(&args, &socket, config.telemetry.otlp_endpoint.as_deref(), &stop);

    loop {
        match signals.next().await {
            Received::Stop(signal) => {
                tracing::info!("{signal}: shutting down");
                break;
            }
            Received::Reload => {
                // A refused config is logged; the running one stays.
                notify::reloading();
                if let Err(err) = hangar.reload(hangar_core::access::HANGAR).await {
                    tracing::error!(%err, "SIGHUP: reload refused");
                }
                notify::ready(&serving());
            }
        }
    }
    notify::stopping();
    let _ = stop_tx.send(true);
    for task in helper_tasks {
        let _ = task.await;
    }
    hangar.shutdown(SHUTDOWN_DEADLINE).await;
    let _ = control.await;
    journal.flush();
    socket_file.remove();
    tracing::info!("supervisor stopped");
    Ok(())
}
