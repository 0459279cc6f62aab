//! The set of configured servers, and the answer to every control-socket request.

mod exposed;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use hangar_core::config::{Config, ToolAccessMode};
use hangar_core::echo::bounded;
use hangar_core::ipc::{
    Catalog, CatalogServer, ErrorKind, FrontDoor, IpcError, MAX_LOG_LINES, Outcome, Reloaded, Reply, Request, Target,
};
use hangar_core::lifecycle::StopReason;
use hangar_core::limits::DEFAULT_GLOBAL_CONCURRENCY;
use hangar_core::metrics::MetricsSnapshot;
use indexmap::IndexMap;
use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

use self::exposed::ExposedNames;
use crate::limits::{Limiter, Permit, Scope};
use crate::server::{Cause, DEFAULT_CALL_TIMEOUT, Server, Shared};

/// The most a single call may ask to wait.
const MAX_CALL_TIMEOUT: Duration = Duration::from_secs(3600);

pub struct Hangar {
    /// Replaced, not edited in place, by a reload; read by cloning the `Arc`s out.
    servers: RwLock<IndexMap<String, Arc<Server>>>,
    shared: Arc<Shared>,
    front_door: AtomicBool,
    /// The front door's names, resolved here (one round trip per call, like `hangar_call`).
    exposed: ExposedNames,
    config_path: Option<PathBuf>,
    /// One reload at a time.
    reloading: tokio::sync::Mutex<()>,
    /// The hangar-wide limits; replaced by a reload (requests admitted before keep their place).
    limiter: RwLock<Arc<Limiter>>,
    /// The config's `auth:` block as loaded at start, for the API (`Request::AuthSettings`).
    auth: hangar_core::access::AuthConfig,
}

impl Hangar {
    pub fn new(config: &Config, config_path: Option<PathBuf>) -> Arc<Hangar> {
        let (events, _) = broadcast::channel(1024);
        let (tool_changes, _) = broadcast::channel(256);
        let shared = Arc::new(Shared {
            events,
            tool_changes,
            tools_generation: Default::default(),
            shutting_down: Default::default(),
        });
        let servers = config
            .mcp_servers
            .iter()
            .map(|(id, server)| (id.clone(), Server::new(id.clone(), server.clone(), &config.recovery, shared.clone())))
            .collect();
        let front_door = AtomicBool::new(config.tool_access.mode == ToolAccessMode::FrontDoor);
        Arc::new(Hangar {
            servers: RwLock::new(servers),
            shared,
            front_door,
            exposed: ExposedNames::default(),
            config_path,
            reloading: tokio::sync::Mutex::new(()),
            limiter: RwLock::new(hangar_limiter(config)),
            auth: config.auth.clone(),
        })
    }

    /// Every server, in config order.
    fn all(&self) -> Vec<Arc<Server>> {
        self.servers.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    pub fn subscribe(&self) -> (broadcast::Receiver<hangar_core::record::StateChange>, broadcast::Receiver<String>) {
        (self.shared.events.subscribe(), self.shared.tool_changes.subscribe())
    }

    pub fn len(&self) -> usize {
        self.servers.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Admits one request to `server` under the hangar's limits and the server's own.
    fn admit(&self, server: &Server) -> Result<Permit, IpcError> {
        let hangar = self.limiter.read().unwrap_or_else(|p| p.into_inner()).clone();
        Limiter::admit(&[&hangar, server.limiter()])
    }

    fn server(&self, id: &str) -> Result<Arc<Server>, IpcError> {
        self.servers.read().unwrap_or_else(|p| p.into_inner()).get(id).cloned().ok_or_else(|| IpcError::not_found(id))
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
            Request::List => Reply::Servers(self.all().iter().map(|s| s.summary()).collect()),
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
            Request::Call { target, arguments, timeout_ms, relay, extra } => {
                let (server, tool) = match target {
                    Target::Tool { mcp_server, tool } => (self.server(&mcp_server)?, tool),
                    Target::Exposed { name } => self.resolve(&name).await?,
                };
                if !arguments.is_object() && !arguments.is_null() {
                    return Err(IpcError::new(ErrorKind::InvalidArgument, "arguments must be a JSON object"));
                }
                let timeout = timeout_ms.map_or(DEFAULT_CALL_TIMEOUT, Duration::from_millis).min(MAX_CALL_TIMEOUT);
                let arguments = if arguments.is_null() { serde_json::json!({}) } else { arguments };
                let relay = notices.map(|to| crate::upstream::Relay { progress: relay.progress, logs: relay.logs, to });
                let _permit = self.admit(&server)?;
                Reply::Called(server.call(&tool, arguments, extra, timeout, relay).await?)
            }
            Request::Subscribe => Reply::Subscribed,
            Request::Ping => Reply::Pong,
            Request::Targets => Reply::Targets(self.all().iter().filter_map(|s| s.probe_target()).collect()),
            Request::Check { mcp_server, timeout_ms } => {
                let timeout = Duration::from_millis(timeout_ms).min(MAX_CALL_TIMEOUT);
                Reply::Checked(self.server(&mcp_server)?.check(timeout).await?)
            }
            Request::Verdict(verdict) => Reply::Applied { state: self.server(&verdict.mcp_server)?.verdict(&verdict) },
            Request::Metrics => {
                let refused = self.limiter.read().unwrap_or_else(|p| p.into_inner()).refused();
                Reply::Metrics(Box::new(MetricsSnapshot {
                    servers: self.all().iter().map(|s| s.metrics()).collect(),
                    refused,
                }))
            }
            Request::Catalog => Reply::Catalog(self.catalog().await),
            Request::FrontDoor => {
                let front_door = self.discover().await;
                Reply::FrontDoor(FrontDoor {
                    front_door,
                    servers: self.all().iter().map(|s| s.id().to_owned()).collect(),
                })
            }
            Request::Resolve { name } => {
                let (server, tool) = self.resolve(&name).await?;
                Reply::Resolved { mcp_server: server.id().to_owned(), tool }
            }
            Request::Reload => Reply::Reloaded(self.reload().await?),
            Request::AuthSettings => Reply::AuthSettings(Box::new(self.auth.clone())),
            Request::Forward { mcp_server, method, params, timeout_ms } => {
                let server = self.server(&mcp_server)?;
                let timeout = timeout_ms.map_or(DEFAULT_CALL_TIMEOUT, Duration::from_millis).min(MAX_CALL_TIMEOUT);
                let _permit = self.admit(&server)?;
                Reply::Forwarded(server.forward(&method, params, timeout).await?)
            }
        })
    }

    /// In front-door mode, starts every server never started yet, all at the same time, to learn
    /// its tools; one that fails to start simply has none. Answers whether the front door is on.
    async fn discover(&self) -> bool {
        let front_door = self.front_door.load(Ordering::SeqCst);
        if front_door {
            let discoveries: Vec<_> = self
                .all()
                .into_iter()
                .filter(|s| s.never_started())
                .map(|server| tokio::spawn(async move { server.start(Cause::Call).await }))
                .collect();
            for discovery in discoveries {
                let _ = discovery.await;
            }
        }
        front_door
    }

    /// Every server's declared tools, after [`Hangar::discover`].
    async fn catalog(&self) -> Catalog {
        let front_door = self.discover().await;
        Catalog {
            front_door,
            servers: self
                .all()
                .iter()
                .map(|s| CatalogServer { mcp_server: s.id().to_owned(), tools: s.declared_tools() })
                .collect(),
        }
    }

    /// The server and tool a front-door name leads to, as `tools/list` exposes them. Servers never
    /// started are discovered first, as the catalog does, so a cold server's tool is found and
    /// a name that discovery makes ambiguous is not guessed.
    async fn resolve(&self, name: &str) -> Result<(Arc<Server>, String), IpcError> {
        let unknown = || IpcError::new(ErrorKind::UnknownTool, format!("Unknown tool: {}", bounded(name)));
        if !self.front_door.load(Ordering::SeqCst) {
            return Err(unknown());
        }
        let mut names = self.exposed.current(&self.shared, || self.all());
        if !names.discovered {
            self.discover().await;
            names = self.exposed.rebuilt(&self.shared, self.all());
        }
        names.resolve(name).ok_or_else(unknown)
    }

    /// Re-reads the config file: added servers appear (cold), removed ones stop and go, changed
    /// ones are replaced (and started again if they were running), unchanged ones keep running
    /// untouched. A config that does not load is refused and the running one stays.
    pub async fn reload(&self) -> Result<Reloaded, IpcError> {
        let _one_reload_at_a_time = self.reloading.lock().await;
        let Some(path) = &self.config_path else {
            return Err(IpcError::new(ErrorKind::InvalidArgument, "this supervisor was started without a config file"));
        };
        let config = load_off_the_event_loop(path.clone()).await.map_err(|err| {
            IpcError::new(
                ErrorKind::InvalidArgument,
                format!("the new config is refused, the running one stays: {err}"),
            )
        })?;
        let old: IndexMap<String, Arc<Server>> = self.servers.read().unwrap_or_else(|p| p.into_inner()).clone();
        let mut report = Reloaded::default();
        let mut next = IndexMap::new();
        let mut to_stop = Vec::new();
        let mut to_start = Vec::new();
        for (id, server_config) in &config.mcp_servers {
            match old.get(id) {
                Some(server)
                    if server.config() == server_config && server.recovery_defaults_unchanged(&config.recovery) =>
                {
                    report.unchanged.push(id.clone());
                    next.insert(id.clone(), server.clone());
                }
                existing => {
                    let fresh = Server::new(id.clone(), server_config.clone(), &config.recovery, self.shared.clone());
                    if let Some(server) = existing {
                        report.changed.push(id.clone());
                        if server.is_running() {
                            to_start.push(fresh.clone());
                        }
                        to_stop.push(server.clone());
                    } else {
                        report.added.push(id.clone());
                    }
                    next.insert(id.clone(), fresh);
                }
            }
        }
        for (id, server) in &old {
            if !next.contains_key(id) {
                report.removed.push(id.clone());
                to_stop.push(server.clone());
            }
        }
        *self.servers.write().unwrap_or_else(|p| p.into_inner()) = next;
        // Servers came and went: the front door's names follow before the reload answers.
        self.shared.tools_generation.fetch_add(1, Ordering::SeqCst);
        if &config.limits != self.limiter.read().unwrap_or_else(|p| p.into_inner()).limits() {
            *self.limiter.write().unwrap_or_else(|p| p.into_inner()) = hangar_limiter(&config);
        }
        self.front_door.store(config.tool_access.mode == ToolAccessMode::FrontDoor, Ordering::SeqCst);
        for server in to_stop {
            server.stop(StopReason::Reload).await;
        }
        for server in to_start {
            // A start that fails leaves the server dead with its reason, like any start.
            let _ = server.start(Cause::Explicit).await;
        }
        tracing::info!(added = ?report.added, removed = ?report.removed, changed = ?report.changed, "config reloaded");
        Ok(report)
    }

    /// Stops servers left unused longer than their `idle_ttl_s`, until shutdown.
    pub async fn stop_idle_servers(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        // A reload may add servers with shorter idle times: look again every second at most.
        let tick = || {
            self.all()
                .iter()
                .filter_map(|s| s.idle_tick())
                .min()
                .unwrap_or(Duration::from_secs(1))
                .min(Duration::from_secs(1))
        };
        loop {
            tokio::select! {
                () = tokio::time::sleep(tick()) => {}
                () = crate::shutdown::requested(&mut stop) => return,
            }
            for server in self.all() {
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
        let stops = self.all().into_iter().map(|server| {
            let server = server.clone();
            tokio::spawn(async move { server.stop(StopReason::Shutdown).await })
        });
        let all = futures_join_all(stops.collect());
        if tokio::time::timeout(deadline, all).await.is_err() {
            tracing::warn!("some servers did not stop in time; killing them");
            for server in self.all() {
                server.kill_now();
            }
        }
    }
}

/// Reads and parses the config on a blocking thread: a slow or hung file system delays only
/// this reload (`Config::load` gives up after its timeout), never the requests being served.
async fn load_off_the_event_loop(path: PathBuf) -> Result<Config, String> {
    match tokio::task::spawn_blocking(move || Config::load(&path)).await {
        Ok(loaded) => loaded.map_err(|err| err.to_string()),
        Err(err) => Err(format!("reading the config failed: {err}")),
    }
}

fn hangar_limiter(config: &Config) -> Arc<Limiter> {
    Limiter::new(Scope::Hangar, &config.limits, DEFAULT_GLOBAL_CONCURRENCY)
}

async fn futures_join_all(handles: Vec<tokio::task::JoinHandle<hangar_core::ipc::Stopped>>) {
    for handle in handles {
        let _ = handle.await;
    }
}
