//! One configured upstream: its process, its connection, its lifecycle, its counters.
//!
//! The lifecycle itself is the pure [`hangar_core::lifecycle::Lifecycle`]; this module feeds it
//! events from the real world and does what each state needs. Every transition goes through
//! [`Server::transition`], which also counts it, logs it and streams it to subscribers, so the
//! log line, the metric and the state-change stream cannot disagree.
//!
//! - `start.rs`: starting (explicit, lazy, or by recovery) and the handshake;
//! - `process.rs`: a running child: its exit, its stderr, stopping it;
//! - `health.rs`: checks, verdicts, recovery with backoff, capability enforcement, idle stop;
//! - `calls.rs`: tool calls and stops;
//! - `memory.rs`: what it keeps across a restart of the hangar (dead record, backoff, catalog).
//!
//! Concurrency: `inner` is a short-held std mutex (never held across an await). A start runs
//! in a task of its own and concurrent starts of one server join it (`starting`): one spawn,
//! one outcome for all of them, success or failure. A dead server's next start, from any
//! surface, waits for its backoff. A `generation`, bumped by every start and stop, tells news from an
//! old process apart from news about the current one.

mod callers;
mod calls;
mod health;
mod instances;
mod memory;
mod memory_key;
mod param_headers;
mod proc_facts;
mod process;
mod start;

use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use hangar_core::backoff;
use hangar_core::config::{RecoveryPolicy, ServerConfig};
use hangar_core::ipc::ProbeTarget;
use hangar_core::lifecycle::{Event, Lifecycle, State, StopReason};
use hangar_core::limits::DEFAULT_SERVER_CONCURRENCY;
use hangar_core::metrics::{Histogram, ServerMetrics, ToolMetrics};
use hangar_core::record::{
    DeadRecord, Health, LastChange, Meta, ServerDetails, ServerSummary, StateChange, ToolInfo, ToolRecord, ToolsSource,
};
use hangar_core::sync::Unpoisoned;
use hangar_core::time::rfc3339_millis;
use hangar_core::tool_digest;
use tokio::sync::broadcast;

use crate::limits::{Limiter, Scope};
use crate::logs::LogRing;

pub(crate) use callers::CONNECT_DETAIL;
pub use calls::{CallTrace, DEFAULT_CALL_TIMEOUT};
use process::Process;

/// A server that stayed ready this long is restarted at once when it crashes, and starts its
/// backoff over; one that dies sooner keeps climbing, so a server that dies just after every
/// start cannot storm.
const STABLE_AFTER: Duration = Duration::from_secs(60);

/// Shortens [`STABLE_AFTER`] to this many whole seconds (never lengthens it), so a story shows a
/// stable server's crash without waiting a minute. For tests, as `HANGAR_TEST_KEEP_ALIVE_S` is;
/// unset in production.
pub const TEST_STABLE_AFTER_ENV: &str = "HANGAR_TEST_STABLE_AFTER_S";

/// [`STABLE_AFTER`], unless [`TEST_STABLE_AFTER_ENV`] shortens it.
fn stable_after() -> Duration {
    static PERIOD: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *PERIOD.get_or_init(|| {
        let asked = std::env::var(TEST_STABLE_AFTER_ENV).ok().and_then(|s| s.parse::<u64>().ok());
        asked.map_or(STABLE_AFTER, |secs| Duration::from_secs(secs).min(STABLE_AFTER))
    })
}

/// What all servers share with the rest of the supervisor.
pub struct Shared {
    pub events: broadcast::Sender<StateChange>,
    /// Ids of servers whose tool list just changed; an empty id after a reload, when servers
    /// came or went (or who sees them may have changed): every client's list did.
    pub tool_changes: broadcast::Sender<String>,
    /// Bumped whenever any server's tool list changes, before the change is announced on
    /// `tool_changes`: the front door's index is rebuilt when it no longer matches.
    pub tools_generation: AtomicU64,
    pub shutting_down: AtomicBool,
    /// Where what happens is recorded (and streamed live).
    pub journal: Arc<crate::journal::Journal>,
    /// Span export (`telemetry.otlp_endpoint`); `None`, the usual case, costs a branch per call.
    pub telemetry: Option<hangar_runtime::telemetry::Telemetry>,
    /// An upstream's notifications outside any request (log lines, resource updates), with the
    /// server's id, for the legacy sessions that want them.
    pub upstream_news: broadcast::Sender<(String, serde_json::Value)>,
    /// The stored credentials (`crate::vault`), set once at start: where a server's tokens are
    /// kept, sealed.
    pub vault: std::sync::OnceLock<Arc<crate::vault::Vault>>,
    /// The OAuth tokens callers came with, for `token_exchange` servers.
    pub subjects: Arc<crate::credentials::subjects::Subjects>,
}

pub struct Server {
    id: String,
    config: ServerConfig,
    policy: RecoveryPolicy,
    /// The key its memory is kept under (`memory_key.rs`).
    memory_key: String,
    shared: Arc<Shared>,
    log: Arc<LogRing>,
    inner: Mutex<Inner>,
    /// The start in flight, if any, which every concurrent start joins (`start.rs`).
    starting: Mutex<Option<start::StartOutcome>>,
    /// This server's own concurrency and rate limits.
    limiter: Arc<Limiter>,
    /// Its callers' own connections, when each brings their own credential (`callers.rs`).
    callers: callers::Callers,
    /// Its instances, when it is isolated (`instances.rs`).
    instances: instances::Instances,
    /// Whose instance this is, when it is one: it remembers nothing across restarts and
    /// announces no tool changes (its server's list is the one clients see).
    instance_of: Option<instances::InstanceOf>,
}

struct Inner {
    lifecycle: Lifecycle,
    generation: u64,
    process: Option<Process>,
    tools: Tools,
    /// Whether `tools` are this run's or the last run's (until a start refreshes them).
    tools_source: ToolsSource,
    /// Its tools were learned at least once (in this run or a remembered one): there is a
    /// catalog to remember.
    catalog_known: bool,
    /// The last answers to the prompt and resource list methods (`memory.rs`).
    lists: BTreeMap<String, memory::ListAnswer>,
    health: Health,
    meta: Meta,
    counters: Counters,
    /// Last call or start, for idle stop.
    last_used: Instant,
    /// Calls in flight: a server is never idle-stopped under one.
    calls_in_flight: u32,
    ready_since: Option<Instant>,
    /// The last state change, for the read surfaces.
    last_change: Option<LastChange>,
    /// The last check verdict applied, for when the next one is due.
    last_check: Option<Instant>,
    /// Failures since the server was last stable; the exponent of the next backoff.
    failure_streak: u32,
    /// A recovery task is running for the current degradation.
    recovering: bool,
    /// How the current generation's process ended, once it has: the `detail` of the dead record
    /// a failure then renders.
    ended: Option<String>,
    /// What the last start's sandbox got from the kernel (`None` before one, or unsandboxed).
    sandbox_in_effect: Option<hangar_core::sandbox::SandboxInEffect>,
    /// Why the block about to be applied happened, for its dead record's `detail` (taken by the
    /// next transition, so it never outlives that one).
    blocked_because: Option<String>,
    /// Why the last stop ran, for the start it overtook to say so.
    last_stop: Option<StopReason>,
    /// What the running upstream declared at its handshake (`None`: not known yet): the
    /// optional methods it was not declared for are never sent to it (`calls.rs`).
    declared: Option<serde_json::Value>,
}

/// A server's tools: as the hangar reads them, and as the upstream declared them (for the front
/// door, which passes declarations through untouched).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Tools {
    pub infos: Vec<ToolInfo>,
    pub raw: Vec<serde_json::Value>,
}

/// What `/metrics` counts per server.
#[derive(Default)]
struct Counters {
    starts: u64,
    stops: BTreeMap<String, u64>,
    deaths: BTreeMap<String, u64>,
    tool_calls: u64,
    tool_call_errors: u64,
    call_latency: Histogram,
    checks_ok: u64,
    checks_failed: u64,
    capability_violations: u64,
    /// Messages over the size limit, skipped unread.
    messages_skipped: u64,
    /// Pinned tools found changed or missing.
    tool_drifts: u64,
    /// Each tool's calls (at most `call_stats::MAX_TOOLS` apart, the rest together).
    tools: BTreeMap<String, ToolCounters>,
}

/// One tool's calls: all time for `/metrics`, and the last hour for the status page.
#[derive(Default)]
struct ToolCounters {
    latency: Histogram,
    errors: u64,
    recent: hangar_core::call_stats::RecentCalls,
}

impl Counters {
    /// Counts a call of `tool` that took `seconds`, and whether it failed.
    fn tool_call(&mut self, tool: &str, seconds: f64, failed: bool) {
        use hangar_core::call_stats::{MAX_TOOLS, OTHER_TOOLS};
        let name = if self.tools.contains_key(tool) || self.tools.len() < MAX_TOOLS { tool } else { OTHER_TOOLS };
        let counters = match self.tools.get_mut(name) {
            Some(counters) => counters,
            None => self.tools.entry(name.to_owned()).or_default(),
        };
        counters.latency.observe(seconds);
        counters.errors += u64::from(failed);
        counters.recent.observe(hangar_core::time::now_ms() / 1000, seconds, failed);
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// `start` on a surface: revives any dead server.
    Explicit,
    /// A call to a server that is not running: revives a dead one only after its backoff.
    Call,
    /// A recovery restart of a degraded server; `last` when the budget has no more after it.
    Recovery { last: bool },
}

impl Server {
    pub fn new(
        id: String,
        config: ServerConfig,
        recovery_defaults: &hangar_core::config::Recovery,
        shared: Arc<Shared>,
    ) -> Arc<Server> {
        let policy = config.recovery.resolve(recovery_defaults);
        Server::build(id, config, policy, shared, None)
    }

    /// A server, or (with `instance_of`) one of an isolated server's instances.
    fn build(
        id: String,
        config: ServerConfig,
        policy: RecoveryPolicy,
        shared: Arc<Shared>,
        instance_of: Option<instances::InstanceOf>,
    ) -> Arc<Server> {
        let meta = Meta {
            program: config.command.first().cloned().unwrap_or_default(),
            description: config.description.clone(),
            idle_ttl_s: config.idle_ttl_s,
            health_check_interval_s: config.health_check_interval_s,
            ..Meta::default()
        };
        let memory_key = memory_key::memory_key(&config, &policy);
        let recalled = match instance_of {
            None => shared.journal.recall(&id),
            Some(_) => None,
        };
        let restored = memory::restore(&id, &memory_key, recalled);
        Arc::new(Server {
            // What an upstream prints may echo its env (API keys, tokens): never show those.
            log: Arc::new(LogRing::with_secrets(&id, config.secrets())),
            policy,
            memory_key,
            limiter: Limiter::new(Scope::Server(id.clone()), &config.limits, DEFAULT_SERVER_CONCURRENCY),
            id,
            config,
            shared,
            inner: Mutex::new(Inner {
                lifecycle: restored.lifecycle,
                generation: 0,
                process: None,
                tools_source: if restored.tools.is_some() { ToolsSource::Remembered } else { ToolsSource::Unknown },
                catalog_known: restored.tools.is_some(),
                tools: restored.tools.unwrap_or_default(),
                lists: restored.lists,
                health: Health::default(),
                meta,
                counters: Counters::default(),
                last_used: Instant::now(),
                calls_in_flight: 0,
                ready_since: None,
                last_change: None,
                last_check: None,
                failure_streak: restored.failure_streak,
                recovering: false,
                ended: None,
                sandbox_in_effect: None,
                blocked_because: None,
                last_stop: None,
                declared: None,
            }),
            starting: Mutex::new(None),
            callers: callers::Callers::default(),
            instances: instances::Instances::default(),
            instance_of,
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether its tools were ever learned (in this run or one the journal remembers).
    pub fn catalog_known(&self) -> bool {
        self.lock().catalog_known
    }

    pub fn limiter(&self) -> &Arc<Limiter> {
        &self.limiter
    }

    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// The prefix of its qualified front-door names: its `expose_as`, else its id (what
    /// `hangar_core::front_door::Naming::prefix` says of it).
    pub fn prefix(&self) -> &str {
        self.config.expose_as.as_deref().unwrap_or(&self.id)
    }

    /// Itself, then its instances (an isolated server's), least recently used first.
    pub fn and_instances(self: &Arc<Self>) -> impl Iterator<Item = Arc<Server>> {
        std::iter::once(self.clone()).chain(self.instances())
    }

    /// Whether a reload's top-level `recovery` defaults give this server the same policy.
    pub fn recovery_defaults_unchanged(&self, defaults: &hangar_core::config::Recovery) -> bool {
        self.config.recovery.resolve(defaults) == self.policy
    }

    /// Whether its process is up (so a replacement should be started too).
    pub fn is_running(&self) -> bool {
        self.lock().process.is_some()
    }

    /// Whether it serves (ready or degraded) on the 2026-07-28 protocol: one short lock, for
    /// checks made of every server at every state change.
    pub fn serves_modern(&self) -> bool {
        let inner = self.lock();
        matches!(inner.lifecycle.state(), State::Ready | State::Degraded)
            && inner.meta.protocol_era.as_deref() == Some("modern")
    }

    pub fn log(&self) -> &LogRing {
        &self.log
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.locked()
    }

    /// Applies a lifecycle event; on success counts it, logs it and tells subscribers.
    fn transition(&self, inner: &mut Inner, event: Event) -> bool {
        let now = SystemTime::now();
        let stop_reason = match &event {
            Event::Stop(reason) => Some(*reason),
            _ => None,
        };
        let starting = event == Event::Start;
        let blocked_because = inner.blocked_because.take();
        match inner.lifecycle.apply(event, now) {
            Ok(from) => {
                let to = inner.lifecycle.state();
                if starting {
                    inner.ended = None;
                }
                if let Some(how) = inner.ended.clone() {
                    inner.lifecycle.explain(format!("its process {how}"));
                }
                if let Some(why) = blocked_because {
                    inner.lifecycle.explain(why);
                }
                let dead = inner.lifecycle.dead().map(DeadRecord::from);
                match (&dead, stop_reason) {
                    (Some(d), _) => {
                        *inner.counters.deaths.entry(d.reason.as_str().into()).or_default() += 1;
                        tracing::warn!(mcp_server = %self.id, from = from.as_str(), reason = %d.reason, retry_allowed_at = ?d.retry_allowed_at, "server is dead");
                    }
                    (None, Some(reason)) => {
                        *inner.counters.stops.entry(reason.as_str().into()).or_default() += 1;
                        tracing::info!(mcp_server = %self.id, from = from.as_str(), reason = reason.as_str(), "server stopped");
                    }
                    (None, None) => {
                        tracing::info!(mcp_server = %self.id, from = from.as_str(), to = to.as_str(), "state changed")
                    }
                }
                inner.ready_since = (to == State::Ready).then(Instant::now);
                let change = StateChange { mcp_server_id: self.id.clone(), from, to, at: rfc3339_millis(now), dead };
                inner.last_change = Some(LastChange { from, to, at: change.at.clone() });
                self.shared.journal.record(hangar_core::journal::Happened::State(change.clone()));
                self.remember(inner);
                let _ = self.shared.events.send(change);
                true
            }
            Err(refused) => {
                tracing::debug!(mcp_server = %self.id, %refused, "transition refused");
                false
            }
        }
    }

    /// When a server that just failed may be revived: at once if it had been stable (a crash
    /// after a long run costs a blink, and `process.rs` restarts it), else after the next backoff.
    fn next_retry(&self, inner: &mut Inner) -> SystemTime {
        if forgive_if_stable(inner) {
            return SystemTime::now();
        }
        let wait = backoff::delay(&self.policy, inner.failure_streak, jitter_draw());
        inner.failure_streak = inner.failure_streak.saturating_add(1);
        SystemTime::now() + wait
    }

    // ---- reads -------------------------------------------------------------------------------

    pub fn summary(&self) -> ServerSummary {
        let inner = self.lock();
        ServerSummary {
            mcp_server_id: self.id.clone(),
            state: inner.lifecycle.state(),
            mode: self.config.mode.as_str().into(),
            alive: inner.process.is_some(),
            tools_count: inner.tools.infos.len(),
            health_status: health_status(inner.lifecycle.state(), inner.health.consecutive_failures).into(),
            dead: inner.lifecycle.dead().map(DeadRecord::from),
            last_change: inner.last_change.clone(),
            isolation: self.config.isolation,
            instances: Vec::new(),
        }
    }

    pub fn details(&self) -> ServerDetails {
        let mut details = self.details_kept();
        details.config = Some(self.config_facts());
        details.process = details.meta.pid.filter(|_| details.alive).and_then(proc_facts::read);
        details
    }

    /// What the config says of it, never a secret (`hangar_core::server_facts`).
    fn config_facts(&self) -> hangar_core::server_facts::ConfigFacts {
        let config = &self.config;
        hangar_core::server_facts::ConfigFacts {
            arguments: config.command.len().saturating_sub(1),
            endpoint: config.endpoint.as_deref().and_then(hangar_core::server_facts::shown_endpoint),
            env: config.env.keys().cloned().collect(),
            max_concurrent_calls: config.limits.concurrency(DEFAULT_SERVER_CONCURRENCY),
            rate_limit: config.limits.rate_limit.clone(),
            expose_as: config.expose_as.clone().unwrap_or_else(|| self.id.clone()),
            handshake_timeout_s: config.handshake_timeout_s,
        }
    }

    /// The details the server keeps (its process read apart, outside the lock).
    fn details_kept(&self) -> ServerDetails {
        let inner = self.lock();
        ServerDetails {
            mcp_server_id: self.id.clone(),
            state: inner.lifecycle.state(),
            mode: self.config.mode.as_str().into(),
            alive: inner.process.is_some(),
            tools: inner.tools.infos.clone(),
            tools_source: inner.tools_source,
            health: inner.health.clone(),
            meta: inner.meta.clone(),
            dead: inner.lifecycle.dead().map(DeadRecord::from),
            sandbox: self.config.sandbox().map(|configured| hangar_core::sandbox::SandboxDetails {
                configured: configured.clone(),
                in_effect: inner.sandbox_in_effect.clone(),
            }),
            auth: self.config.auth.as_ref().map(auth_details),
            isolation: self.config.isolation,
            instances: Vec::new(),
            config: None,
            process: None,
        }
    }

    pub fn tools(&self) -> Vec<ToolRecord> {
        let inner = self.lock();
        let declarations = inner.tools.infos.iter().zip(&inner.tools.raw);
        declarations.map(|(tool, raw)| ToolRecord { tool: tool.clone(), digest: tool_digest::digest(raw) }).collect()
    }

    pub fn metrics(&self) -> ServerMetrics {
        let inner = self.lock();
        let c = &inner.counters;
        ServerMetrics {
            mcp_server_id: self.id.clone(),
            state: inner.lifecycle.state(),
            starts: c.starts,
            stops: c.stops.clone(),
            deaths: c.deaths.clone(),
            tool_calls: c.tool_calls,
            tool_call_errors: c.tool_call_errors,
            call_latency: c.call_latency.clone(),
            health_checks_ok: c.checks_ok,
            health_checks_failed: c.checks_failed,
            capability_violations: c.capability_violations,
            messages_skipped: c.messages_skipped,
            tool_drifts: c.tool_drifts,
            refused: self.limiter.refused(),
            tools: c
                .tools
                .iter()
                .map(|(tool, t)| ToolMetrics { tool: tool.clone(), errors: t.errors, latency: t.latency.clone() })
                .collect(),
        }
    }

    /// Adds each tool's calls of the last hour (as of `now_s`) into `tools`, by tool name.
    pub fn recent_calls(&self, now_s: u64, tools: &mut BTreeMap<String, hangar_core::call_stats::Merged>) {
        let inner = self.lock();
        for (tool, counters) in &inner.counters.tools {
            counters.recent.add_to(now_s, tools.entry(tool.clone()).or_default());
        }
    }

    /// The tools as declared, for the front door's catalog.
    pub fn declared_tools(&self) -> Vec<serde_json::Value> {
        self.lock().tools.raw.clone()
    }

    /// The names of its tools, in the order it declared them, for the front door's index.
    pub fn tool_names(&self) -> Vec<String> {
        self.lock().tools.infos.iter().map(|t| t.name.clone()).collect()
    }

    /// Takes a new tool list: the one place a server's tools change. The front door's index is
    /// marked stale before subscribers hear of the change, so no call made after the
    /// announcement routes on an old name.
    /// A remembered list becomes live here, announced only if it changed.
    fn set_tools(&self, inner: &mut Inner, tools: Tools) {
        inner.tools_source = ToolsSource::Live;
        if inner.tools == tools && inner.catalog_known {
            return;
        }
        inner.catalog_known = true;
        if inner.tools == tools {
            // Its first list, and empty: nothing to announce, but now known.
            self.remember(inner);
            return;
        }
        inner.tools = tools;
        self.remember(inner);
        if self.instance_of.is_some() {
            return;
        }
        self.shared.tools_generation.fetch_add(1, Ordering::SeqCst);
        let _ = self.shared.tool_changes.send(self.id.clone());
    }

    /// Whether its tools are unknown: nothing was remembered of it, and it was never started in
    /// this run or its first start is still under way (the front door starts it to learn them;
    /// a start under way is joined, so a call arriving mid-discovery waits for the tools too). A
    /// server whose starts all failed is not started again for that: it has no tools to show.
    pub fn tools_unknown(&self) -> bool {
        let inner = self.lock();
        !inner.catalog_known && (inner.counters.starts == 0 || inner.lifecycle.state() == State::Initializing)
    }

    /// What the prober should check and when, if this server is serving.
    pub fn probe_target(&self) -> Option<ProbeTarget> {
        let inner = self.lock();
        if !matches!(inner.lifecycle.state(), State::Ready | State::Degraded) || inner.process.is_none() {
            return None;
        }
        let interval = self.config.health_check_interval();
        // The next check is due one interval after the later of the last check and the start.
        let basis = inner.last_check.max(inner.ready_since).unwrap_or_else(Instant::now);
        let due_in = (basis + interval).saturating_duration_since(Instant::now());
        Some(ProbeTarget {
            mcp_server: self.id.clone(),
            interval_ms: millis(interval),
            timeout_ms: millis(self.config.probe_timeout()),
            due_in_ms: millis(due_in),
        })
    }
}

#[cfg(test)]
impl Server {
    /// Gives the server a tool list as if its upstream had just declared it.
    pub fn declare_for_test(&self, names: &[&str]) {
        let mut tools = Tools::default();
        for name in names {
            tools.infos.push(ToolInfo { name: (*name).into(), description: None, input_schema: serde_json::json!({}) });
            tools.raw.push(serde_json::json!({"name": name}));
        }
        let mut inner = self.lock();
        self.set_tools(&mut inner, tools);
    }
}

/// A server that stayed ready for [`STABLE_AFTER`] starts its backoff over; whether it had.
fn forgive_if_stable(inner: &mut Inner) -> bool {
    let stable = inner.ready_since.is_some_and(|since| since.elapsed() >= stable_after());
    if stable {
        inner.failure_streak = 0;
    }
    stable
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn health_status(state: State, consecutive_failures: u32) -> &'static str {
    match state {
        State::Ready if consecutive_failures == 0 => "healthy",
        State::Ready => "degraded",
        State::Degraded | State::Dead => "unhealthy",
        State::Cold | State::Initializing => "unknown",
    }
}

/// A draw in [0, 1) for backoff jitter. Randomly keyed hashing of the clock is random enough to
/// spread restarts, without a dependency for it.
fn jitter_draw() -> f64 {
    let bits = std::collections::hash_map::RandomState::new().hash_one(Instant::now());
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

impl Server {
    /// Tool calls now running at the upstream (a task's included): what a drain waits for.
    pub fn calls_in_flight(&self) -> u32 {
        self.lock().calls_in_flight
    }
}

/// The server's `auth:`, as its details show it: never a value.
fn auth_details(auth: &hangar_core::upstream_auth::UpstreamAuth) -> hangar_core::record::AuthDetails {
    let kind = match () {
        _ if auth.oauth.is_some() => "oauth",
        _ if auth.token_exchange.is_some() => "token_exchange",
        _ => "headers",
    };
    // A token of each caller's own is none the hangar's checks may use.
    hangar_core::record::AuthDetails {
        kind: kind.into(),
        headers: auth.headers.iter().flat_map(|headers| headers.keys().cloned()).collect(),
        checks: if auth.per_caller() { "reachability only" } else { "its credential" }.into(),
    }
}
