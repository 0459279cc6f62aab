//! The set of configured servers, and the answer to every control-socket request.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use hangar_core::config::{Config, ToolAccessMode};
use hangar_core::ipc::{Catalog, CatalogServer, ErrorKind, IpcError, MAX_LOG_LINES, Outcome, Reply, Request};
use hangar_core::lifecycle::StopReason;
use hangar_core::metrics::MetricsSnapshot;
use indexmap::IndexMap;
use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

use crate::server::{Cause, DEFAULT_CALL_TIMEOUT, Server, Shared};

/// The most a single call may ask to wait.
const MAX_CALL_TIMEOUT: Duration = Duration::from_secs(3600);

pub struct Hangar {
    servers: IndexMap<String, Arc<Server>>,
    shared: Arc<Shared>,
    front_door: bool,
}

impl Hangar {
    pub fn new(config: &Config) -> Arc<Hangar> {
        let (events, _) = broadcast::channel(1024);
        let (tool_changes, _) = broadcast::channel(256);
        let shared = Arc::new(Shared { events, tool_changes, shutting_down: Default::default() });
        let servers = config
            .mcp_servers
            .iter()
            .map(|(id, server)| (id.clone(), Server::new(id.clone(), server.clone(), &config.recovery, shared.clone())))
            .collect();
        let front_door = config.tool_access.mode == ToolAccessMode::FrontDoor;
        Arc::new(Hangar { servers, shared, front_door })
    }

    pub fn subscribe(&self) -> (broadcast::Receiver<hangar_core::record::StateChange>, broadcast::Receiver<String>) {
        (self.shared.events.subscribe(), self.shared.tool_changes.subscribe())
    }

    pub fn len(&self) -> usize {
        self.servers.len()
    }

    fn server(&self, id: &str) -> Result<&Arc<Server>, IpcError> {
        self.servers.get(id).ok_or_else(|| IpcError::not_found(id))
    }

    /// Answers one request. `Subscribe` is the connection's business and is answered there.
    /// `notices` carries an upstream's notifications about a relayed call back to its caller.
    pub async fn handle(&self, request: Request, notices: Option<mpsc::UnboundedSender<Value>>) -> Outcome {
        match self.answer(request, notices).await {
            Ok(reply) => Outcome::Ok(reply),
            Err(error) => Outcome::Err(error),
        }
    }

    async fn answer(&self, request: Request, notices: Option<mpsc::UnboundedSender<Value>>) -> Result<Reply, IpcError> {
        if self.shared.shutting_down.load(Ordering::SeqCst)
            && matches!(request, Request::Start { .. } | Request::Call { .. })
        {
            return Err(IpcError::new(ErrorKind::ShuttingDown, "the hangar is shutting down"));
        }
        Ok(match request {
            Request::List => Reply::Servers(self.servers.values().map(|s| s.summary()).collect()),
            Request::Get { mcp_server } => Reply::Server(Box::new(self.server(&mcp_server)?.details())),
            Request::Tools { mcp_server } => Reply::Tools(self.server(&mcp_server)?.tools()),
            Request::Logs { mcp_server, lines } => {
                if !(1..=MAX_LOG_LINES).contains(&lines) {
                    return Err(IpcError::new(
                        ErrorKind::InvalidArgument,
                        format!("lines must be from 1 to {MAX_LOG_LINES}, got {lines}"),
                    ));
                }
                Reply::Logs(self.server(&mcp_server)?.log().tail(lines))
            }
            Request::Start { mcp_server } => Reply::Started(self.server(&mcp_server)?.start(Cause::Explicit).await?),
            Request::Stop { mcp_server } => {
                Reply::Stopped(self.server(&mcp_server)?.stop(StopReason::UserRequest).await)
            }
            Request::Call { mcp_server, tool, arguments, timeout_ms, relay, extra } => {
                let server = self.server(&mcp_server)?;
                if !arguments.is_object() && !arguments.is_null() {
                    return Err(IpcError::new(ErrorKind::InvalidArgument, "arguments must be a JSON object"));
                }
                let timeout = timeout_ms.map_or(DEFAULT_CALL_TIMEOUT, Duration::from_millis).min(MAX_CALL_TIMEOUT);
                let arguments = if arguments.is_null() { serde_json::json!({}) } else { arguments };
                let relay = notices.map(|to| crate::upstream::Relay { progress: relay.progress, logs: relay.logs, to });
                Reply::Called(server.call(&tool, arguments, extra, timeout, relay).await?)
            }
            Request::Subscribe => Reply::Subscribed,
            Request::Targets => Reply::Targets(self.servers.values().filter_map(|s| s.probe_target()).collect()),
            Request::Check { mcp_server, timeout_ms } => {
                let timeout = Duration::from_millis(timeout_ms).min(MAX_CALL_TIMEOUT);
                Reply::Checked(self.server(&mcp_server)?.check(timeout).await?)
            }
            Request::Verdict(verdict) => Reply::Applied { state: self.server(&verdict.mcp_server)?.verdict(&verdict) },
            Request::Metrics => Reply::Metrics(Box::new(MetricsSnapshot {
                servers: self.servers.values().map(|s| s.metrics()).collect(),
            })),
            Request::Catalog => Reply::Catalog(self.catalog().await),
            Request::Forward { mcp_server, method, params, timeout_ms } => {
                let server = self.server(&mcp_server)?;
                let timeout = timeout_ms.map_or(DEFAULT_CALL_TIMEOUT, Duration::from_millis).min(MAX_CALL_TIMEOUT);
                Reply::Forwarded(server.forward(&method, params, timeout).await?)
            }
        })
    }

    /// Every server's declared tools. In front-door mode a server never started is started once,
    /// all at the same time, to learn its tools; one that fails to start simply has none.
    async fn catalog(&self) -> Catalog {
        if self.front_door {
            let discoveries: Vec<_> = self
                .servers
                .values()
                .filter(|s| s.never_started())
                .map(|s| {
                    let server = s.clone();
                    tokio::spawn(async move { server.start(Cause::Call).await })
                })
                .collect();
            for discovery in discoveries {
                let _ = discovery.await;
            }
        }
        Catalog {
            front_door: self.front_door,
            servers: self
                .servers
                .iter()
                .map(|(id, s)| CatalogServer { mcp_server: id.clone(), tools: s.declared_tools() })
                .collect(),
        }
    }

    /// Stops servers left unused longer than their `idle_ttl_s`, until shutdown.
    pub async fn stop_idle_servers(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let Some(tick) = self.servers.values().filter_map(|s| s.idle_tick()).min() else { return };
        loop {
            tokio::select! {
                () = tokio::time::sleep(tick) => {}
                () = crate::shutdown::requested(&mut stop) => return,
            }
            for server in self.servers.values() {
                // In parallel: one slow stop must not hold up the rest.
                let server = server.clone();
                tokio::spawn(async move { server.stop_if_idle().await });
            }
        }
    }

    /// Stops taking work and stops every server, in parallel; returns once every child is reaped
    /// or, past `deadline`, killed.
    pub async fn shutdown(&self, deadline: Duration) {
        self.shared.shutting_down.store(true, Ordering::SeqCst);
        let stops = self.servers.values().map(|server| {
            let server = server.clone();
            tokio::spawn(async move { server.stop(StopReason::Shutdown).await })
        });
        let all = futures_join_all(stops.collect());
        if tokio::time::timeout(deadline, all).await.is_err() {
            tracing::warn!("some servers did not stop in time; killing them");
            for server in self.servers.values() {
                server.kill_now();
            }
        }
    }
}

async fn futures_join_all(handles: Vec<tokio::task::JoinHandle<hangar_core::ipc::Stopped>>) {
    for handle in handles {
        let _ = handle.await;
    }
}
