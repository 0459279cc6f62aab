//! The set of configured servers, and the answer to every control-socket request.

mod audit;
mod audit_arguments;
mod connect;
mod exposed;
pub(crate) mod journal_view;
mod listens;
mod upstream_words;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use hangar_core::access::{AuthConfig, Caller};
use hangar_core::config::{Config, ToolAccessMode};
use hangar_core::front_door::Naming;
use hangar_core::ipc::{Catalog, CatalogServer, ErrorKind, IpcError, Reloaded};
use hangar_core::journal::Happened;
use hangar_core::lifecycle::StopReason;
use hangar_core::limits::DEFAULT_GLOBAL_CONCURRENCY;
use hangar_core::policy::{Policy, View};
use hangar_core::sync::UnpoisonedRw;
use hangar_runtime::telemetry::Telemetry;
use indexmap::IndexMap;
use serde_json::Value;
use tokio::sync::broadcast;

pub(crate) use self::audit::Shown;
pub(crate) use self::audit::{Decision, TARGET as AUDIT_TARGET, tool_forbidden};
pub(crate) use self::audit_arguments::kept as kept_arguments;
use self::exposed::ByView;
use self::upstream_words::UpstreamWordsRule;
use crate::journal::Journal;
use crate::limits::{Limiter, Permit, Scope};
use crate::server::{Cause, Server, Shared};
use crate::sessions::Sessions;

/// The most a single call may ask to wait.
pub(crate) const MAX_CALL_TIMEOUT: Duration = Duration::from_secs(3600);

pub struct Hangar {
    /// Replaced, not edited in place, by a reload; read by cloning the `Arc`s out.
    servers: RwLock<IndexMap<String, Arc<Server>>>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) front_door: AtomicBool,
    /// How the front door names upstream tools (`tool_access.names`, `expose_as`); replaced by a reload.
    naming: RwLock<Arc<Naming>>,
    /// The front door's names per view, resolved here (one round trip per call, like `hangar_call`).
    pub(crate) exposed: ByView,
    /// Who may call (handed to the API instances) and what each profile sees; replaced by a
    /// reload.
    pub(crate) access: RwLock<Arc<Access>>,
    /// Told after every reload, so each API instance asks for the `auth:` block again.
    auth_changes: broadcast::Sender<()>,
    config_path: Option<PathBuf>,
    /// One reload at a time.
    reloading: tokio::sync::Mutex<()>,
    /// The hangar-wide limits; replaced by a reload (requests admitted before keep their place).
    limiter: RwLock<Arc<Limiter>>,
    /// The journal's read side (its own connection).
    pub(crate) journal_reader: Arc<crate::journal::read::Reader>,
    /// The legacy sessions every API instance shares.
    pub(crate) sessions: Sessions,
    /// Whether the front door passes an upstream's error words on; replaced by a reload.
    upstream_words: RwLock<UpstreamWordsRule>,
    /// What the calls keep beyond their requests (tasks, held calls, cancels): `crate::calls`.
    pub(crate) calls: crate::calls::Calls,
    /// Itself, for the calls a task keeps running after its request has been answered.
    pub(crate) me: Weak<Hangar>,
    /// The sessions' resource subscriptions, held at 2026-07-28 upstreams.
    listens: listens::Listens,
    /// How long a question to a client waits for its answer (`tool_access.client_answer_timeout_s`);
    /// replaced by a reload.
    client_answer_timeout: RwLock<Duration>,
    /// This hangar's place in a fleet (`cluster:`), set once at start: the tag of the task ids
    /// minted here, and the block each API instance asks for.
    fleet: std::sync::OnceLock<Fleet>,
    /// The state directory, where the default key of the stored credentials lives.
    state_dir: Option<PathBuf>,
    /// The per-user connect flows (`connect.rs`).
    pub(crate) connects: connect::Connects,
    /// Each identity's quotas under its profile (`crate::quotas`).
    pub(crate) quotas: crate::quotas::IdentityQuotas,
}

/// `cluster:` as the supervisor started with it.
struct Fleet {
    /// As written, but `advertise` expanded.
    block: hangar_core::cluster::ClusterConfig,
    cluster: hangar_core::cluster::Cluster,
}

impl Hangar {
    pub fn new(config: &Config, config_path: Option<PathBuf>, journal: Arc<Journal>) -> Arc<Hangar> {
        journal.retain(&config.journal);
        let (events, _) = broadcast::channel(1024);
        let (tool_changes, _) = broadcast::channel(256);
        let journal_reader = Arc::new(crate::journal::read::Reader::new(journal.path()));
        let shared = Arc::new(Shared {
            events,
            tool_changes,
            tools_generation: Default::default(),
            shutting_down: Default::default(),
            journal,
            telemetry: config.telemetry.otlp_endpoint.as_deref().and_then(start_telemetry),
            upstream_news: broadcast::channel(256).0,
            vault: Default::default(),
            subjects: Default::default(),
        });
        let servers = config
            .mcp_servers
            .iter()
            .map(|(id, server)| (id.clone(), Server::new(id.clone(), server.clone(), &config.recovery, shared.clone())))
            .collect();
        let front_door = AtomicBool::new(config.tool_access.mode == ToolAccessMode::FrontDoor);
        let hangar = Arc::new_cyclic(|me| Hangar {
            servers: RwLock::new(servers),
            shared,
            front_door,
            naming: RwLock::new(Arc::new(config.naming())),
            exposed: ByView::default(),
            access: RwLock::new(Arc::new(Access::of(config))),
            auth_changes: broadcast::channel(16).0,
            config_path,
            reloading: tokio::sync::Mutex::new(()),
            limiter: RwLock::new(hangar_limiter(config)),
            journal_reader,
            sessions: Sessions::default(),
            upstream_words: RwLock::new(UpstreamWordsRule::of(config)),
            calls: crate::calls::Calls::default(),
            me: me.clone(),
            listens: Default::default(),
            client_answer_timeout: RwLock::new(config.tool_access.client_answer_timeout()),
            fleet: std::sync::OnceLock::new(),
            state_dir: config.state_dir.clone(),
            connects: connect::Connects::new(&config.credentials),
            quotas: Default::default(),
        });
        hangar.sessions.with(|all, _| all.configure(&config.tool_access.sessions));
        hangar.calls.configure(&config.tasks);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(deliver_news(Arc::downgrade(&hangar), hangar.shared.upstream_news.subscribe()));
            runtime.spawn(sweep_sessions(Arc::downgrade(&hangar)));
            runtime.spawn(listen_as_states_change(Arc::downgrade(&hangar), hangar.shared.events.subscribe()));
        }
        hangar
    }

    /// How long a question to a client waits for its answer.
    pub(crate) fn client_answer_timeout(&self) -> Duration {
        *self.client_answer_timeout.reading()
    }

    /// A failed request's error as its caller may see it (see `upstream_words`).
    pub(crate) fn upstream_words(&self, err: IpcError, to_front_door: bool) -> IpcError {
        self.upstream_words.reading().apply(err, to_front_door)
    }

    /// Every server, in config order.
    pub(crate) fn all(&self) -> Vec<Arc<Server>> {
        self.servers.reading().values().cloned().collect()
    }

    /// State changes, tool-list changes and reloads, each as it happens.
    pub fn subscribe(&self) -> Subscription {
        Subscription {
            states: self.shared.events.subscribe(),
            tools: self.shared.tool_changes.subscribe(),
            reloads: self.auth_changes.subscribe(),
        }
    }

    /// What `caller` sees, under the current profiles.
    pub fn view(&self, caller: &Caller) -> View {
        self.access.reading().policy.view(caller)
    }

    pub fn len(&self) -> usize {
        self.servers.reading().len()
    }

    /// Admits one request to `server` under the hangar's limits and the server's own.
    pub(crate) fn admit(&self, server: &Server) -> Result<Permit, IpcError> {
        let hangar = self.limiter.reading().clone();
        Limiter::admit(&[&hangar, server.limiter()])
    }

    /// A server by id, or an instance of one by its name (`<server>@<label>`).
    pub(crate) fn server(&self, id: &str) -> Result<Arc<Server>, IpcError> {
        let (server, label) = hangar_core::isolation::split(id);
        let found = self.servers.reading().get(server).cloned();
        match label {
            None => found,
            Some(label) => found.and_then(|server| server.instance_labelled(label)),
        }
        .ok_or_else(|| IpcError::not_found(id))
    }

    /// Every server and every instance, for what reaches every process: the prober's checks,
    /// idle stops, the shutdown.
    pub(crate) fn units(&self) -> Vec<Arc<Server>> {
        self.all().iter().flat_map(Server::and_instances).collect()
    }

    /// A server `caller` sees (as [`Hangar::visible`]), or an instance of one that is its own,
    /// or any for an admin.
    pub(crate) fn visible_unit(&self, caller: &Caller, view: &View, id: &str) -> Result<Arc<Server>, IpcError> {
        if !view.sees_unit(&caller.identity, id) {
            return Err(IpcError::not_found(id));
        }
        self.server(id)
    }

    /// `server`'s instances `caller` may see: its own, or all of them for an admin.
    pub(crate) fn instances_seen(
        &self,
        caller: &Caller,
        view: &View,
        server: &Server,
    ) -> Vec<hangar_core::record::InstanceSummary> {
        let seen = server.instances().into_iter().filter(|i| view.sees_unit(&caller.identity, i.id()));
        seen.filter_map(|instance| instance.instance_summary()).collect()
    }

    /// A server `view` sees; one it does not see does not exist for it (the same answer as an
    /// unknown id, so a view leaks nothing).
    pub(crate) fn visible(&self, view: &View, id: &str) -> Result<Arc<Server>, IpcError> {
        if !view.sees_server(id) {
            return Err(IpcError::not_found(id));
        }
        self.server(id)
    }

    /// Every server `view` sees, in config order.
    pub(crate) fn all_visible(&self, view: &View) -> Vec<Arc<Server>> {
        self.all().into_iter().filter(|s| view.sees_server(s.id())).collect()
    }

    /// In front-door mode, starts every server `view` sees whose tools are unknown (never
    /// started in this run, and none remembered from the last), all at the same time, to learn
    /// its tools; one that fails to start simply has none. With a warm journal nothing is
    /// started: the last known catalogs answer. Answers whether the front door is on.
    pub(crate) async fn discover(&self, view: &View) -> bool {
        let front_door = self.front_door.load(Ordering::SeqCst);
        if front_door {
            let discoveries: Vec<_> = self
                .all_visible(view)
                .into_iter()
                .filter(|s| s.tools_unknown())
                .map(|server| tokio::spawn(async move { server.start(Cause::Call).await }))
                .collect();
            for discovery in discoveries {
                let _ = discovery.await;
            }
        }
        front_door
    }

    /// The declared tools of every server `view` sees, as far as it allows them, after
    /// [`Hangar::discover`].
    pub(crate) async fn catalog(&self, view: &View) -> Catalog {
        let front_door = self.discover(view).await;
        Catalog {
            front_door,
            servers: self
                .all_visible(view)
                .iter()
                .map(|s| CatalogServer { mcp_server: s.id().to_owned(), tools: view.declared_tools(s) })
                .collect(),
            naming: self.naming().as_ref().clone(),
        }
    }

    /// The front door's naming settings, as of the last load or reload.
    pub(crate) fn naming(&self) -> Arc<Naming> {
        self.naming.reading().clone()
    }

    /// Re-reads the config file: added servers appear (cold), removed ones stop and go, changed
    /// ones are replaced (and started again if they were running), unchanged ones keep running
    /// untouched. A config that does not load is refused and the running one stays.
    pub async fn reload(&self, identity: &str) -> Result<Reloaded, IpcError> {
        let _one_reload_at_a_time = self.reloading.lock().await;
        let Some(path) = &self.config_path else {
            return Err(IpcError::new(ErrorKind::InvalidArgument, "this supervisor was started without a config file"));
        };
        let config = load_off_the_event_loop(path.clone())
            .await
            .and_then(|config| match crate::sandbox::check_grants(&config) {
                Ok(()) => Ok(config),
                Err(err) => Err(format!("{}: {err}", path.display())),
            })
            .map_err(|err| {
                IpcError::new(
                    ErrorKind::InvalidArgument,
                    format!("the new config is refused, the running one stays: {err}"),
                )
            })?;
        // The key file read again (a rotation), before anything changes: a bad one refuses the
        // reload.
        if let Some(vault) = self.shared.vault.get() {
            let state_dir = config
                .state_dir
                .clone()
                .or_else(|| self.state_dir.clone())
                .unwrap_or_else(|| hangar_core::journal::default_state_dir(|name| std::env::var(name).ok()));
            vault.rekey(&config.credentials, &state_dir).map_err(|err| {
                IpcError::new(
                    ErrorKind::InvalidArgument,
                    format!("the new config is refused, the running one stays: {err}"),
                )
            })?;
        }
        crate::withheld::set(&config);
        crate::loose_credentials::warn(&config);
        self.connects.configure(&config.credentials);
        let old: IndexMap<String, Arc<Server>> = self.servers.reading().clone();
        let mut report = Reloaded::default();
        let mut next = IndexMap::new();
        let mut to_stop = Vec::new();
        let mut to_start = Vec::new();
        let mut added = Vec::new();
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
                        added.push(fresh.clone());
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
        // Before the generation moves on, so no index is built at the new one with the old names.
        *self.naming.writing() = Arc::new(config.naming());
        *self.servers.writing() = next;
        let before = std::mem::replace(&mut *self.access.writing(), Arc::new(Access::of(&config)));
        self.sessions.with(|all, _| all.rekey(&before.auth.api_keys, &config.auth.api_keys));
        self.shared.journal.retain(&config.journal);
        // Servers came and went, profiles may have changed: the front door's names follow
        // before the reload answers.
        self.exposed.clear();
        self.shared.tools_generation.fetch_add(1, Ordering::SeqCst);
        if &config.limits != self.limiter.reading().limits() {
            *self.limiter.writing() = hangar_limiter(&config);
        }
        self.front_door.store(config.tool_access.mode == ToolAccessMode::FrontDoor, Ordering::SeqCst);
        *self.upstream_words.writing() = UpstreamWordsRule::of(&config);
        self.sessions.with(|all, _| all.configure(&config.tool_access.sessions));
        self.calls.configure(&config.tasks);
        *self.client_answer_timeout.writing() = config.tool_access.client_answer_timeout();
        for server in to_stop {
            server.stop(StopReason::Reload).await;
        }
        for server in to_start {
            // A start that fails leaves the server dead with its reason, like any start.
            let _ = server.start(Cause::Explicit).await;
        }
        // Behind the front door, an added server whose tools nobody remembers is started now to
        // learn them (its idle stop then applies), as a first `tools/list` would.
        if config.tool_access.mode == ToolAccessMode::FrontDoor {
            for server in added.into_iter().filter(|server| !server.catalog_known()) {
                tokio::spawn(async move {
                    let _ = server.start(Cause::Call).await;
                });
            }
        }
        // Servers came or went, or who sees them may have: every client re-lists (the empty id
        // names no one server).
        let _ = self.shared.tool_changes.send(String::new());
        tracing::info!(added = ?report.added, removed = ?report.removed, changed = ?report.changed, "config reloaded");
        self.shared.journal.record(Happened::Reload { changes: report.clone(), identity: identity.to_owned() });
        // Every API instance asks for the `auth:` block again.
        let _ = self.auth_changes.send(());
        Ok(report)
    }

    /// Records who started or stopped a server (the action's audit entry is the decision's).
    pub(crate) fn record_action(&self, caller: &Caller, view: &View, mcp_server: &str, action: &str) {
        self.shared.journal.record(Happened::Action {
            mcp_server: mcp_server.to_owned(),
            action: action.to_owned(),
            identity: caller.identity.clone(),
            profile: view.profile().map(str::to_owned),
        });
    }

    /// Stops servers left unused longer than their `idle_ttl_s`, until shutdown.
    pub async fn stop_idle_servers(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        // A reload may add servers with shorter idle times: look again every second at most.
        let tick = || {
            self.units()
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
                server.forget_stopped_instances();
            }
            for server in self.units() {
                // In parallel: one slow stop must not hold up the rest.
                let server = server.clone();
                tokio::spawn(async move { server.stop_if_idle().await });
            }
        }
    }

    /// Holds the upstream listens the sessions' subscriptions now need, and one for the list
    /// changes of every running 2026-07-28 HTTP upstream.
    pub(crate) fn hold_listens(&self) {
        let subscribed = self.sessions.with(|all, now| all.upstream_subscriptions(now));
        let mut wanted: std::collections::BTreeMap<String, listens::Wanted> =
            subscribed.into_iter().map(|(id, uris)| (id, listens::Wanted { uris, news: false })).collect();
        for server in self.all().iter().filter(|s| listens::hears_news_by_listen(s)) {
            wanted.entry(server.id().to_owned()).or_default().news = true;
        }
        self.listens.update(wanted, |id| self.server(id).ok());
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
            for server in self.units() {
                server.kill_now();
            }
        }
        if self.shared.telemetry.is_some() {
            // Sends the spans still pending (it blocks, up to a few seconds, on the export).
            let shared = self.shared.clone();
            let flushed = tokio::task::spawn_blocking(move || shared.telemetry.as_ref().map(Telemetry::shutdown));
            let _ = flushed.await;
        }
    }
}

/// Span export to `endpoint`; a failure to set it up is logged and the hangar runs without it
/// (telemetry never stops the hangar).
fn start_telemetry(endpoint: &str) -> Option<Telemetry> {
    Telemetry::start(endpoint, "hangar-supervisor")
        .inspect_err(|err| tracing::error!(%err, "spans will not be exported"))
        .ok()
}

/// What a subscriber hears: state changes, tool-list changes (by server id) and reloads.
pub struct Subscription {
    pub states: broadcast::Receiver<hangar_core::record::StateChange>,
    pub tools: broadcast::Receiver<String>,
    pub reloads: broadcast::Receiver<()>,
}

/// The `auth:` block and the compiled profiles of one config.
pub(crate) struct Access {
    pub(crate) auth: AuthConfig,
    policy: Policy,
    /// What the journal keeps of each call (`audit:`), and the secrets it never keeps.
    pub(crate) audit: audit::AuditRules,
    /// What is kept out of upstreams' answers (`redaction:`).
    pub(crate) redaction: hangar_core::redaction::Redaction,
    /// How calls wait for a person's approval (`approvals:`).
    pub(crate) approvals: hangar_core::approvals::ApprovalsConfig,
    /// Which config this is: 1 at start, one more on each reload (an approval is bound to it).
    pub(crate) generation: u64,
}

impl Access {
    fn of(config: &Config) -> Access {
        // A loaded config's profiles compiled already (`Config::parse` checks them).
        let policy = Policy::compile(&config.profiles).unwrap_or_else(|err| {
            tracing::error!(%err, "profiles did not compile; every profile sees nothing");
            Policy::default()
        });
        // A loaded config's patterns compiled already (`Config::validate` checks them).
        let redaction = hangar_core::redaction::Redaction::compile(&config.redaction).unwrap_or_else(|err| {
            tracing::error!(%err, "redaction did not compile; answers are withheld");
            hangar_core::redaction::Redaction::refusing()
        });
        // Every config loaded in this process counts, so a generation is never used twice.
        static GENERATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Access {
            // `hangar run`'s own key, if it gave one (`run_key.rs`).
            auth: crate::run_key::with_run_key(&config.auth),
            policy,
            audit: audit::AuditRules::of(config),
            redaction,
            approvals: config.approvals,
            generation: GENERATIONS.fetch_add(1, Ordering::Relaxed),
        }
    }
}

/// The caller's view. Once `auth` is configured nothing is anonymous: an anonymous caller is
/// an API instance that has not learned the keys yet, and is refused.
pub(crate) fn admit_caller(access: &Access, caller: &Caller) -> Result<View, IpcError> {
    if caller.identity == hangar_core::access::ANONYMOUS && access.auth.is_configured() {
        return Err(IpcError::forbidden(
            "authentication is configured and this request names no one (the API has not learned the keys yet; retry)",
        ));
    }
    Ok(access.policy.view(caller))
}

/// Requests only the hangar's own clients (the all-seeing view) make.
pub(crate) fn hangar_only(view: &View) -> Result<(), IpcError> {
    match view {
        View::All => Ok(()),
        View::Profile { .. } => Err(IpcError::forbidden("this request is for the hangar's own clients")),
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

#[cfg(test)]
mod tests;

/// Hands each upstream notification outside any request to the sessions that want it, as long
/// as the hangar lives; each session hears only of servers its opener's view sees.
async fn deliver_news(hangar: std::sync::Weak<Hangar>, mut news: broadcast::Receiver<(String, Value)>) {
    loop {
        let (mcp_server, message) = match news.recv().await {
            Ok(news) => news,
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::debug!(missed, "upstream notifications for sessions dropped: too many at once");
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let Some(hangar) = hangar.upgrade() else { return };
        if message.get("method").and_then(Value::as_str) == Some("notifications/elicitation/complete") {
            hangar.upstream_elicitation_complete(&mcp_server, &message);
            continue;
        }
        let access = hangar.access.reading().clone();
        // An instance's news is its owner's alone; a server's, its viewers'.
        let Ok(unit) = hangar.server(&mcp_server) else { continue };
        let server = unit.instance_of().unwrap_or(&mcp_server).to_owned();
        let sees = |session: &str, caller: &Caller| {
            unit.serves(&caller.identity, Some(session))
                && admit_caller(&access, caller).is_ok_and(|view| view.sees_server(&server))
        };
        hangar.sessions.with(|all, _| all.notify(&server, &message, sees));
    }
}

/// Holds or lets go of the upstream listens as servers start and stop (a running 2026-07-28
/// HTTP upstream gets one for its list changes), as long as the hangar lives.
async fn listen_as_states_change(
    hangar: Weak<Hangar>,
    mut changes: broadcast::Receiver<hangar_core::record::StateChange>,
) {
    loop {
        match changes.recv().await {
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => return,
        }
        let Some(hangar) = hangar.upgrade() else { return };
        hangar.hold_listens();
    }
}

/// Forgets expired legacy sessions as they expire (not at the next session change), so the
/// upstream listens their subscriptions held end with them; as long as the hangar lives.
async fn sweep_sessions(hangar: Weak<Hangar>) {
    loop {
        let Some(every) = hangar.upgrade().map(|h| h.sessions.with(|all, _| all.idle_ttl())) else { return };
        // A quarter of the TTL, between 1 s and a minute: an expired session goes soon after.
        tokio::time::sleep((every / 4).clamp(Duration::from_secs(1), Duration::from_secs(60))).await;
        let Some(hangar) = hangar.upgrade() else { return };
        hangar.hold_listens();
    }
}

impl Hangar {
    /// Tool calls now running at any upstream, tasks' calls included: a stop's drain waits for
    /// none to be left (`shutdown::drained`).
    pub fn calls_in_flight(&self) -> u64 {
        self.units().iter().map(|server| u64::from(server.calls_in_flight())).sum()
    }

    /// Joins the fleet `cluster:` names (opened at start: `advertise` expanded, the secret read);
    /// a reload does not change it.
    pub fn join_fleet(&self, block: hangar_core::cluster::ClusterConfig, cluster: hangar_core::cluster::Cluster) {
        let block = hangar_core::cluster::ClusterConfig { advertise: cluster.advertise().to_owned(), ..block };
        let _ = self.fleet.set(Fleet { block, cluster });
    }

    /// Keeps the stored credentials (opened at start); a reload reads their key file again.
    pub fn keep_vault(&self, vault: Arc<crate::vault::Vault>) {
        let _ = self.shared.vault.set(vault);
    }

    /// The stored credentials, once opened.
    pub(crate) fn vault(&self) -> Option<&crate::vault::Vault> {
        self.shared.vault.get().map(|vault| &**vault)
    }

    /// The `cluster:` block this hangar joined with, if any.
    pub(crate) fn fleet_block(&self) -> Option<hangar_core::cluster::ClusterConfig> {
        self.fleet.get().map(|fleet| fleet.block.clone())
    }

    /// Every server's counters the view sees, for `/metrics`.
    pub(crate) fn metrics(&self, view: &View) -> hangar_core::metrics::MetricsSnapshot {
        hangar_core::metrics::MetricsSnapshot {
            servers: self
                .all_visible(view)
                .iter()
                .flat_map(Server::and_instances)
                .filter(|unit| view.is_admin() || unit.instance_of().is_none())
                .map(|unit| unit.metrics())
                .collect(),
            refused: self.limiter.reading().refused(),
            journal: self.shared.journal.counts(),
            calls_in_flight: self.calls_in_flight(),
        }
    }

    /// Calls, errors and latency of the last hour, per server the view sees and per tool: a
    /// server's own process and the instances the view may see (its own; all for an admin).
    pub(crate) fn call_stats(&self, caller: &Caller, view: &View) -> hangar_core::call_stats::CallStats {
        use hangar_core::call_stats::{CallStats, Merged, ServerCallStats, ToolCallStats, WINDOW_S, WINDOWS};
        let now_s = hangar_core::time::now_ms() / 1000;
        let mcp_servers = self
            .all_visible(view)
            .iter()
            .map(|server| {
                let mut tools = std::collections::BTreeMap::<String, Merged>::new();
                for unit in server.and_instances().filter(|unit| view.sees_unit(&caller.identity, unit.id())) {
                    unit.recent_calls(now_s, &mut tools);
                }
                let mut all = Merged::default();
                for merged in tools.values() {
                    all.add(merged);
                }
                let mut tools: Vec<ToolCallStats> = tools
                    .into_iter()
                    .map(|(tool, merged)| ToolCallStats { tool, latency: merged.latency() })
                    .filter(|tool| tool.latency.calls > 0)
                    .collect();
                tools.sort_by(|a, b| b.latency.calls.cmp(&a.latency.calls).then_with(|| a.tool.cmp(&b.tool)));
                ServerCallStats { mcp_server: server.id().to_owned(), latency: all.latency(), tools }
            })
            .collect();
        CallStats { window_s: WINDOW_S * WINDOWS as u64, mcp_servers }
    }

    /// `bare` as an id other hangars of the fleet can trace back here (itself outside a fleet).
    pub(crate) fn owned_id(&self, bare: String) -> String {
        match self.fleet.get() {
            Some(fleet) => fleet.cluster.tagged(&bare),
            None => bare,
        }
    }
}
