//! The API's life once its arguments are read: listen (and learn what the exposure rule asks of
//! requests there), connect to the supervisor, announce the address, serve until SIGTERM or
//! SIGINT, then drain (`drain.rs`): not ready, new requests refused, the requests in flight given
//! `--shutdown-grace-s` to finish, and within that grace `tasks/*` still answered until the
//! supervisor's calls finish and their results can be collected; then stop and exit 0.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hangar_core::access::Caller;
use hangar_core::ipc::{Reply, Request};
use hangar_runtime::client::{Client, Link};
use hangar_runtime::exit::{EX_SOFTWARE, EX_UNAVAILABLE, EX_USAGE, Exit};
use hangar_runtime::signals::Signals;
use hangar_runtime::telemetry::Telemetry;
use tokio::net::TcpListener;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::time::Instant;

use crate::app;
use crate::args::Args;
use crate::auth::Auth;
use crate::exposure::{self, Exposure, Listening};
use crate::state::{AppState, ListChanged};
use crate::supervisor::Supervisor;
use crate::{guard, listen, serve};

/// After the drain, how long the connections left (event streams, reads) may take to close.
const LAST_WORDS: Duration = Duration::from_secs(1);

/// Once the supervisor's last task call has finished, how long `tasks/get` is still answered so
/// a polling client can collect the result (its poll interval is about a second).
const COLLECT_WINDOW: Duration = Duration::from_secs(2);

/// How often a drain asks the supervisor whether calls are still running.
const TASKS_POLL: Duration = Duration::from_millis(50);

/// The connection limits `args` ask for, within the open-file limit (raised to its hard limit
/// first); a `--max-connections` above what that allows is warned about.
pub fn connection_limits(args: &Args) -> serve::Limits {
    let fd_limit = serve::raise_fd_limit();
    let limits = serve::Limits {
        max_connections: args.max_connections.map_or_else(|| serve::default_max_connections(fd_limit), |n| n as usize),
        header_timeout: Duration::from_secs(args.header_timeout_s),
        idle_timeout: Duration::from_secs(args.idle_timeout_s),
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
    limits
}

/// `inherited`: the listening socket systemd passed (socket activation), else bind `--listen`.
pub async fn run(
    args: Args,
    inherited: Option<std::net::TcpListener>,
    auth: Auth,
    limits: serve::Limits,
) -> Result<(), Exit> {
    let mut signals = Signals::stop()?;
    let activated = inherited.is_some();
    let (listener, local) = listener(&args, inherited).await?;
    // Before the first `auth:` block is learned: the resource tokens are for, by default.
    auth.serve_at(format!("http://{local}/mcp"));
    auth.expose(exposure::check(Listening::Bound(local), args.unsafe_no_auth));
    let socket = args.socket.unwrap_or_else(hangar_core::paths::default_socket_path);
    let endpoint = hangar_runtime::client::Endpoint::new(socket.clone(), args.control_key.clone());
    let (client, links) = Client::following(endpoint, "api");
    let (changes, _) = broadcast::channel(64);
    let fleet = crate::cluster::Fleet::default();
    tokio::spawn(follow(client.clone(), links, changes.clone(), auth.clone(), fleet.clone()));
    let telemetry = match &args.otlp_endpoint {
        Some(endpoint) => Some(Arc::new(
            Telemetry::start(endpoint, "hangar-api").map_err(|err| Exit::new(EX_USAGE, err.to_string()))?,
        )),
        None => None,
    };
    let state = AppState::from(crate::state::Shared {
        drain: Default::default(),
        fleet: fleet.clone(),
        supervisor: Arc::new(client),
        guard: guard::Guard { loopback_only: local.ip().is_loopback(), allowed_origins: args.allow_origin.into() },
        changes,
        auth,
        telemetry: telemetry.clone(),
    });
    announce(local);
    tracing::info!(address = %local, socket = %socket.display(), activated, "serving REST at /api and MCP at /mcp");

    let drain = state.drain.clone();
    let supervisor = state.supervisor.clone();
    let grace = Duration::from_secs_f64(args.shutdown_grace_s);
    let (stop, stopped) = oneshot::channel::<()>();
    let serve = serve::serve(listener, app::router(state), limits, async {
        let _ = stopped.await;
    });
    let mut server = tokio::spawn(serve);
    let outcome = tokio::select! {
        signal = signals.stopped() => {
            tracing::info!(signal, grace_s = grace.as_secs_f64(), in_flight = drain.in_flight(), "draining: not ready, refusing new requests");
            let deadline = Instant::now() + grace;
            drain.begin();
            if tokio::time::timeout_at(deadline, drain.idle()).await.is_err() {
                tracing::warn!(in_flight = drain.in_flight(), "requests still running after the grace period; stopping anyway");
            } else {
                follow_ups_until_tasks_finish(supervisor.as_ref(), deadline).await;
            }
            let _ = stop.send(());
            // What is left is event streams (their clients reconnect elsewhere) and reads: a
            // moment to finish, then they are cut.
            match tokio::time::timeout(LAST_WORDS, &mut server).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(err)) => {
                    tracing::error!(error = %err, "the HTTP server task failed");
                    Err(Exit::quiet(EX_SOFTWARE))
                }
                Err(_) => {
                    server.abort();
                    Ok(())
                }
            }
        }
        ended = &mut server => {
            tracing::error!(outcome = ?ended, "the HTTP server stopped by itself");
            Err(Exit::quiet(EX_SOFTWARE))
        }
    };
    if let Some(telemetry) = telemetry {
        // Sends the spans still pending (blocking, up to a few seconds, on the export).
        let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    }
    outcome
}

/// After this instance's own requests are answered: a task's call may still run in the
/// supervisor, its client already answered with the task id and coming back with `tasks/get`
/// (let through the drain gate). So the API keeps serving until the supervisor has no call in
/// flight, then for `COLLECT_WINDOW`, all within `deadline` (the grace). A supervisor that
/// cannot be asked ends the wait: nothing could be collected from it anyway.
async fn follow_ups_until_tasks_finish(supervisor: &dyn Supervisor, deadline: Instant) {
    let mut waited = false;
    loop {
        let calls_in_flight = match supervisor.request(&Caller::hangar(), Request::Metrics).await {
            Ok(Reply::Metrics(snapshot)) => snapshot.calls_in_flight,
            _ => return,
        };
        if calls_in_flight == 0 {
            break;
        }
        if Instant::now() >= deadline {
            tracing::warn!(calls_in_flight, "task calls still running after the grace period; stopping anyway");
            return;
        }
        if !waited {
            tracing::info!(calls_in_flight, "serving tasks' follow-ups until their calls finish");
            waited = true;
        }
        tokio::time::sleep(TASKS_POLL).await;
    }
    if waited {
        tracing::info!(
            window_ms = COLLECT_WINDOW.as_millis() as u64,
            "task calls finished; their results can still be collected"
        );
        tokio::time::sleep_until(deadline.min(Instant::now() + COLLECT_WINDOW)).await;
    }
}

/// The listener and its address: systemd's socket when it passed one, else `--listen`, bound
/// after the port preflight (rule 4). A `--listen` judged loopback by its name is bound on
/// loopback only; what the bound address asks of requests is the exposure rule's (applied per
/// request: the config's `auth:` block is not known before the supervisor answers).
async fn listener(args: &Args, inherited: Option<std::net::TcpListener>) -> Result<(TcpListener, SocketAddr), Exit> {
    match inherited {
        // systemd owns the socket (and its port): no preflight, `--listen` does not apply.
        Some(listener) => {
            let listener = listen::adopt(listener)?;
            let local = listen::local_addr(&listener, listen::INHERITED)?;
            Ok((listener, local))
        }
        None => {
            let loopback = exposure::check(Listening::Configured(&args.listen), false) == Exposure::Loopback;
            if let Err(why) = listen::preflight(&args.listen).await {
                return Err(Exit::new(EX_UNAVAILABLE, format!("refusing to start: {why}")));
            }
            let listener = listen::bind(&args.listen, loopback).await?;
            let local = listen::local_addr(&listener, &args.listen)?;
            Ok((listener, local))
        }
    }
}

/// Follows the supervisor: its tool-list news become the list changes MCP clients follow, and
/// on every connection and after every reload the API learns the config's `auth:` block again.
async fn follow(
    client: Client,
    mut links: mpsc::UnboundedReceiver<Link>,
    changes: broadcast::Sender<ListChanged>,
    auth: Auth,
    fleet: crate::cluster::Fleet,
) {
    while let Some(link) = links.recv().await {
        match link {
            Link::ToolsChanged(mcp_server) => {
                let _ = changes.send(ListChanged::Tools(mcp_server));
            }
            Link::Up => {
                // Before `auth:`, which makes the instance ready: every id it mints is tagged.
                learn_cluster(&client, &fleet).await;
                learn_auth(&client, &auth).await;
            }
            Link::AuthChanged => learn_auth(&client, &auth).await,
            Link::Down => auth.unlearn(),
            Link::Changed(_) => {}
        }
    }
}

/// Asks the supervisor for the config's `auth:` block; until it answers, `/health/ready` says
/// not ready. A few tries: the link may drop meanwhile, and then `Up` comes again.
async fn learn_auth(client: &Client, auth: &Auth) {
    for _ in 0..5 {
        match client.request(&Caller::hangar(), Request::Auth).await {
            Ok(Reply::Auth(config)) => {
                auth.learn(&config);
                tracing::debug!(
                    keys = config.api_keys.len(),
                    oauth = config.oauth.is_some(),
                    "learned the auth settings"
                );
                return;
            }
            Ok(_) => tracing::warn!("the supervisor answered `auth` with an unexpected reply"),
            Err(err) => tracing::warn!(error = %err, "could not learn the auth settings; retrying"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Asks the supervisor for the `cluster:` block (fixed at the supervisor's start). A few tries,
/// as for `auth:`.
async fn learn_cluster(client: &Client, fleet: &crate::cluster::Fleet) {
    for _ in 0..5 {
        match client.request(&Caller::hangar(), Request::Cluster).await {
            Ok(Reply::Cluster(config)) => return fleet.learn(config.as_ref()),
            Ok(_) => tracing::warn!("the supervisor answered `cluster` with an unexpected reply"),
            Err(err) => tracing::warn!(error = %err, "could not learn the cluster settings; retrying"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
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
