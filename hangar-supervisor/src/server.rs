//! One configured upstream: its process, its connection, its lifecycle.
//!
//! The lifecycle itself is the pure [`hangar_core::lifecycle::Lifecycle`]; this module feeds it
//! events from the real world and does what each state needs. Every transition goes through
//! [`Server::transition`], which also logs it and streams it to subscribers, so the log line and
//! the state-change stream cannot disagree.
//!
//! Concurrency: `inner` is a short-held std mutex (never held across an await). `start_lock`
//! serializes starts, so concurrent starts of one server share one spawn: the second waits and
//! finds the server ready.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use hangar_core::config::{EnforcementMode, ServerConfig};
use hangar_core::ipc::{ErrorKind, IpcError, Started, Stopped};
use hangar_core::lifecycle::{Event, Lifecycle, State, StopReason};
use hangar_core::record::{DeadRecord, Health, Meta, ServerDetails, ServerSummary, StateChange, ToolInfo, ToolRecord};
use hangar_core::time::rfc3339_millis;
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::BufReader;
use tokio::process::Child;
use tokio::sync::{broadcast, mpsc, watch};

use crate::logs::{LogRing, Stream};
use crate::spawn::{self, Pipes, signal_group};
use crate::upstream::{Era, Notice, RequestError, Upstream};
use hangar_runtime::lines::{Line, read_line};

/// How long a stopping child gets after its stdin closes, and again after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// The `server/discover` probe waits at most this long before trying the legacy handshake.
const DISCOVER_TIMEOUT: Duration = Duration::from_secs(2);
/// A `tools/call` without a timeout of its own.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Pages of `tools/list` followed before giving up on an upstream's cursor.
const MAX_TOOL_PAGES: usize = 100;

/// What all servers share with the rest of the supervisor.
pub struct Shared {
    pub events: broadcast::Sender<StateChange>,
    pub shutting_down: AtomicBool,
}

pub struct Server {
    id: String,
    config: ServerConfig,
    shared: Arc<Shared>,
    log: Arc<LogRing>,
    inner: Mutex<Inner>,
    start_lock: tokio::sync::Mutex<()>,
}

struct Inner {
    lifecycle: Lifecycle,
    /// Bumped on every start and stop, so news from an old process is recognized and ignored.
    generation: u64,
    process: Option<Process>,
    tools: Vec<ToolInfo>,
    health: Health,
    meta: Meta,
    last_used: Instant,
    spawns: u64,
}

/// A running child.
#[derive(Clone)]
struct Process {
    pid: u32,
    upstream: Arc<Upstream>,
    /// Set to a description of how it ended once the child has been reaped.
    exited: watch::Receiver<Option<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// `start` on a surface: revives any dead server.
    Explicit,
    /// A call to a server that is not running: revives a dead one only after its backoff.
    Call,
}

impl Server {
    pub fn new(id: String, config: ServerConfig, shared: Arc<Shared>) -> Arc<Server> {
        let meta = Meta {
            program: config.command.first().cloned().unwrap_or_default(),
            description: config.description.clone(),
            idle_ttl_s: config.idle_ttl_s,
            health_check_interval_s: config.health_check_interval_s,
            ..Meta::default()
        };
        Arc::new(Server {
            log: Arc::new(LogRing::new(&id)),
            id,
            config,
            shared,
            inner: Mutex::new(Inner {
                lifecycle: Lifecycle::default(),
                generation: 0,
                process: None,
                tools: Vec::new(),
                health: Health::default(),
                meta,
                last_used: Instant::now(),
                spawns: 0,
            }),
            start_lock: tokio::sync::Mutex::new(()),
        })
    }

    pub fn log(&self) -> &LogRing {
        &self.log
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Applies a lifecycle event; on success logs it and tells subscribers.
    fn transition(&self, inner: &mut Inner, event: Event) -> bool {
        let now = SystemTime::now();
        match inner.lifecycle.apply(event, now) {
            Ok(from) => {
                let to = inner.lifecycle.state();
                let dead = inner.lifecycle.dead().map(DeadRecord::from);
                match &dead {
                    Some(d) => {
                        tracing::warn!(mcp_server = %self.id, from = from.as_str(), reason = %d.reason, "server is dead")
                    }
                    None => {
                        tracing::info!(mcp_server = %self.id, from = from.as_str(), to = to.as_str(), "state changed")
                    }
                }
                let change = StateChange { mcp_server_id: self.id.clone(), from, to, at: rfc3339_millis(now), dead };
                let _ = self.shared.events.send(change);
                true
            }
            Err(refused) => {
                tracing::debug!(mcp_server = %self.id, %refused, "transition refused");
                false
            }
        }
    }

    // ---- reads -------------------------------------------------------------------------------

    pub fn summary(&self) -> ServerSummary {
        let inner = self.lock();
        ServerSummary {
            mcp_server_id: self.id.clone(),
            state: inner.lifecycle.state(),
            mode: self.config.mode.as_str().into(),
            alive: inner.process.is_some(),
            tools_count: inner.tools.len(),
            health_status: health_status(inner.lifecycle.state(), inner.health.consecutive_failures).into(),
            dead: inner.lifecycle.dead().map(DeadRecord::from),
        }
    }

    pub fn details(&self) -> ServerDetails {
        let inner = self.lock();
        ServerDetails {
            mcp_server_id: self.id.clone(),
            state: inner.lifecycle.state(),
            mode: self.config.mode.as_str().into(),
            alive: inner.process.is_some(),
            tools: inner.tools.clone(),
            health: inner.health.clone(),
            meta: inner.meta.clone(),
            dead: inner.lifecycle.dead().map(DeadRecord::from),
        }
    }

    pub fn tools(&self) -> Vec<ToolRecord> {
        self.lock().tools.iter().map(|tool| ToolRecord { tool: tool.clone(), digest: digest(tool) }).collect()
    }

    // ---- start -------------------------------------------------------------------------------

    /// Brings the server to `ready`, or says why it could not.
    pub async fn start(self: &Arc<Self>, cause: Cause) -> Result<Started, IpcError> {
        let _one_start_at_a_time = self.start_lock.lock().await;
        let generation = {
            let mut inner = self.lock();
            match inner.lifecycle.state() {
                State::Ready => return Ok(self.started(&inner)),
                State::Degraded if cause == Cause::Call && inner.process.is_some() => return Ok(self.started(&inner)),
                State::Dead if cause == Cause::Call => {
                    if let Some(refusal) = self.refuse_call_to_dead(&inner) {
                        return Err(refusal);
                    }
                }
                _ => {}
            }
            if self.shared.shutting_down.load(Ordering::SeqCst) {
                return Err(IpcError::new(ErrorKind::ShuttingDown, "the hangar is shutting down"));
            }
            let old = inner.process.take();
            if !self.transition(&mut inner, Event::Start) {
                return Err(IpcError::new(
                    ErrorKind::Internal,
                    format!("`{}` cannot be started from its current state", self.id),
                ));
            }
            inner.generation += 1;
            if let Some(old) = old {
                tokio::spawn(terminate(old, STOP_GRACE));
            }
            inner.generation
        };
        match self.bring_up(generation).await {
            Ok(()) => Ok(self.started(&self.lock())),
            Err(failure) => Err(self.fail_start(generation, failure)),
        }
    }

    fn started(&self, inner: &Inner) -> Started {
        Started {
            mcp_server: self.id.clone(),
            state: inner.lifecycle.state(),
            tools: inner.tools.iter().map(|t| t.name.clone()).collect(),
        }
    }

    /// Why a call may not revive this dead server now, if it may not.
    fn refuse_call_to_dead(&self, inner: &Inner) -> Option<IpcError> {
        let dead = inner.lifecycle.dead()?;
        if dead.call_may_revive(SystemTime::now()) {
            return None;
        }
        let record = DeadRecord::from(dead);
        let details = json!({"dead": record});
        Some(
            match &record.retry_allowed_at {
                _ if record.revived_by == "start" => IpcError::new(
                    ErrorKind::CapabilityBlocked,
                    format!("`{}` is dead ({}); only an explicit start revives it", self.id, record.reason),
                ),
                Some(at) => IpcError::new(
                    ErrorKind::RetryLater,
                    format!("`{}` is dead ({}); a call may retry after {at}", self.id, record.reason),
                ),
                None => IpcError::new(ErrorKind::RetryLater, format!("`{}` is dead ({})", self.id, record.reason)),
            }
            .with_details(details),
        )
    }

    async fn bring_up(self: &Arc<Self>, generation: u64) -> Result<(), StartFailure> {
        let process = self.spawn_process(generation)?;
        let deadline = Instant::now() + self.config.handshake_timeout();
        let upstream = process.upstream.clone();
        let mut exited = process.exited.clone();
        let handshake_and_tools = async {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let handshake = upstream.handshake(DISCOVER_TIMEOUT.min(remaining / 2), remaining).await?;
            let tools = list_tools(&upstream, deadline, &self.log).await?;
            Ok::<_, RequestError>((handshake, tools))
        };
        let (handshake, tools) = tokio::select! {
            outcome = tokio::time::timeout_at(deadline.into(), handshake_and_tools) => match outcome {
                Ok(Ok(done)) => done,
                Ok(Err(RequestError::Closed { .. })) => return Err(StartFailure::Exited(wait_exit(&mut exited).await)),
                Ok(Err(err)) => return Err(StartFailure::Handshake(err.to_string())),
                Err(_) => return Err(StartFailure::Handshake(format!(
                    "it did not complete the MCP handshake within {:?}", self.config.handshake_timeout()
                ))),
            },
            how = wait_exit(&mut exited) => return Err(StartFailure::Exited(how)),
        };
        if let Some(blocked) = self.unexpected_tools(&tools) {
            return Err(StartFailure::Blocked(blocked));
        }
        let mut inner = self.lock();
        if inner.generation != generation || inner.lifecycle.state() != State::Initializing {
            return Err(StartFailure::Stopped);
        }
        inner.tools = tools;
        inner.meta.protocol_era = Some(match handshake.era {
            Era::Modern => "modern".into(),
            Era::Legacy => "legacy".into(),
        });
        inner.meta.protocol_version = Some(handshake.protocol_version);
        inner.health.consecutive_failures = 0;
        inner.last_used = Instant::now();
        self.transition(&mut inner, Event::HandshakeDone);
        Ok(())
    }

    fn spawn_process(self: &Arc<Self>, generation: u64) -> Result<Process, StartFailure> {
        let (program, args) = self.config.command.split_first().ok_or(StartFailure::Spawn("no command".into()))?;
        let env: Vec<(String, String)> = self.config.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let mut child = spawn::spawn(program.as_ref(), args, &env, Pipes::All)
            .map_err(|err| StartFailure::Spawn(format!("cannot run `{program}`: {err}")))?;
        let (Some(pid), Some(stdin), Some(stdout), Some(stderr)) =
            (child.id(), child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(StartFailure::Spawn("the child's pipes were not set up".into()));
        };
        tokio::spawn(drain_stderr(stderr, self.log.clone()));
        let (notices_tx, notices_rx) = mpsc::unbounded_channel();
        let upstream = Upstream::start(stdin, stdout, self.log.clone(), notices_tx);
        let (exited_tx, exited) = watch::channel(None);
        tokio::spawn(watch_exit(self.clone(), generation, child, pid, upstream.clone(), exited_tx));
        tokio::spawn(follow_notices(self.clone(), generation, notices_rx));
        let process = Process { pid, upstream, exited };
        let mut inner = self.lock();
        inner.meta.pid = Some(pid);
        inner.meta.started_at = Some(rfc3339_millis(SystemTime::now()));
        inner.spawns += 1;
        inner.meta.restarts = inner.spawns - 1;
        inner.process = Some(process.clone());
        Ok(process)
    }

    /// Records a failed start and renders its error in the hangar's words.
    fn fail_start(&self, generation: u64, failure: StartFailure) -> IpcError {
        let mut inner = self.lock();
        let current = inner.generation == generation;
        // A stop bumped the generation: whatever the start saw next was that stop's doing.
        let failure = if current { failure } else { StartFailure::Stopped };
        if current && let Some(process) = inner.process.take() {
            inner.meta.pid = None;
            tokio::spawn(terminate(process, Duration::ZERO));
        }
        let (kind, why) = match &failure {
            StartFailure::Blocked(tools) => (
                ErrorKind::CapabilityBlocked,
                format!("it serves tools outside capabilities.tools.expected_tools: {}", tools.join(", ")),
            ),
            StartFailure::Stopped => (ErrorKind::Stopped, "it was stopped while starting".into()),
            StartFailure::Spawn(why) | StartFailure::Handshake(why) => (ErrorKind::StartFailed, why.clone()),
            StartFailure::Exited(how) => {
                (ErrorKind::StartFailed, format!("its process {how} before completing the MCP handshake"))
            }
        };
        if current && inner.lifecycle.state() == State::Initializing {
            let event = match failure {
                StartFailure::Blocked(_) => Event::CapabilityBlocked,
                _ => Event::StartFailed { retry_allowed_at: None },
            };
            self.transition(&mut inner, event);
        }
        let dead = inner.lifecycle.dead().map(DeadRecord::from);
        tracing::warn!(mcp_server = %self.id, %why, "start failed");
        IpcError::new(kind, format!("`{}` did not start: {why}", self.id)).with_details(json!({"dead": dead}))
    }

    fn unexpected_tools(&self, tools: &[ToolInfo]) -> Option<Vec<String>> {
        let expected = self.config.capabilities.tools.expected_tools.as_ref()?;
        let unexpected: Vec<String> =
            tools.iter().filter(|t| !expected.contains(&t.name)).map(|t| t.name.clone()).collect();
        if unexpected.is_empty() {
            return None;
        }
        match self.config.capabilities.enforcement_mode {
            EnforcementMode::Block => Some(unexpected),
            EnforcementMode::Alert => {
                tracing::warn!(mcp_server = %self.id, unexpected = ?unexpected, "capability violation (alert mode): serving tools outside expected_tools");
                None
            }
        }
    }

    // ---- process exit and notices ----------------------------------------------------------

    fn on_exit(&self, generation: u64, how: &str) {
        let mut inner = self.lock();
        if inner.generation != generation {
            return;
        }
        inner.process = None;
        inner.meta.pid = None;
        if inner.lifecycle.state() == State::Ready {
            tracing::warn!(mcp_server = %self.id, how, "a ready server's process ended");
            self.transition(&mut inner, Event::Exited { retry_allowed_at: None });
        }
    }

    async fn on_tools_changed(self: &Arc<Self>, generation: u64) {
        let upstream = {
            let inner = self.lock();
            match (&inner.process, inner.generation == generation && inner.lifecycle.state() == State::Ready) {
                (Some(p), true) => p.upstream.clone(),
                _ => return,
            }
        };
        let deadline = Instant::now() + self.config.probe_timeout();
        let Ok(tools) = list_tools(&upstream, deadline, &self.log).await else { return };
        let blocked = self.unexpected_tools(&tools);
        let mut inner = self.lock();
        if inner.generation != generation {
            return;
        }
        inner.tools = tools;
        if let Some(unexpected) = blocked
            && self.transition(&mut inner, Event::CapabilityBlocked)
        {
            tracing::warn!(mcp_server = %self.id, unexpected = ?unexpected, "blocked: its tool list changed to include tools outside expected_tools");
            inner.generation += 1;
            if let Some(process) = inner.process.take() {
                inner.meta.pid = None;
                tokio::spawn(terminate(process, Duration::ZERO));
            }
        }
    }

    // ---- stop and call ---------------------------------------------------------------------

    /// Stops the server (a no-op for a cold or dead one) and waits until its process is gone.
    pub async fn stop(&self, reason: StopReason) -> Stopped {
        let process = {
            let mut inner = self.lock();
            let process = inner.process.take();
            if matches!(inner.lifecycle.state(), State::Initializing | State::Ready | State::Degraded) {
                self.transition(&mut inner, Event::Stop(reason));
                inner.generation += 1;
                inner.meta.pid = None;
                process
            } else {
                inner.process = process;
                None
            }
        };
        if let Some(process) = process {
            terminate(process, STOP_GRACE).await;
        }
        Stopped { stopped: self.id.clone(), reason }
    }

    /// Calls one of the upstream's tools, starting the server first if it is cold.
    pub async fn call(self: &Arc<Self>, tool: &str, arguments: Value, timeout: Duration) -> Result<Value, IpcError> {
        let upstream = self.ready_upstream().await?;
        {
            let mut inner = self.lock();
            inner.health.total_invocations += 1;
            inner.last_used = Instant::now();
        }
        let params = json!({"name": tool, "arguments": arguments});
        upstream.request("tools/call", params, timeout).await.map_err(|err| {
            self.lock().health.total_failures += 1;
            let kind = match err {
                RequestError::Timeout { .. } => ErrorKind::Timeout,
                RequestError::Closed { .. } => ErrorKind::UpstreamDied,
                RequestError::Rpc { .. } => ErrorKind::UpstreamError,
            };
            let details = match err {
                RequestError::Rpc { code, .. } => Some(json!({"jsonrpc_code": code})),
                _ => None,
            };
            let mut error = IpcError::new(kind, format!("`{}` tool `{tool}`: {err}", self.id));
            error.details = details;
            error
        })
    }

    async fn ready_upstream(self: &Arc<Self>) -> Result<Arc<Upstream>, IpcError> {
        for _ in 0..2 {
            {
                let inner = self.lock();
                if matches!(inner.lifecycle.state(), State::Ready | State::Degraded)
                    && let Some(process) = &inner.process
                {
                    return Ok(process.upstream.clone());
                }
            }
            self.start(Cause::Call).await?;
        }
        Err(IpcError::new(ErrorKind::UpstreamDied, format!("`{}` went down as it came up", self.id)))
    }

    /// Kills the process group at once; for shutdown after the polite stop ran out of time.
    pub fn kill_now(&self) {
        if let Some(process) = &self.lock().process {
            signal_group(process.pid, Signal::SIGKILL);
        }
    }
}

enum StartFailure {
    Spawn(String),
    Exited(String),
    Handshake(String),
    Blocked(Vec<String>),
    Stopped,
}

fn health_status(state: State, consecutive_failures: u32) -> &'static str {
    match state {
        State::Ready if consecutive_failures == 0 => "healthy",
        State::Ready => "degraded",
        State::Degraded | State::Dead => "unhealthy",
        State::Cold | State::Initializing => "unknown",
    }
}

fn digest(tool: &ToolInfo) -> String {
    let bytes = serde_json::to_vec(tool).unwrap_or_default();
    let hash = Sha256::digest(&bytes);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// `tools/list`, following cursors, each entry checked; malformed entries are logged and skipped.
async fn list_tools(upstream: &Upstream, deadline: Instant, log: &LogRing) -> Result<Vec<ToolInfo>, RequestError> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_TOOL_PAGES {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let remaining = deadline.saturating_duration_since(Instant::now());
        let mut page = upstream.request("tools/list", params, remaining).await?;
        if let Some(Value::Array(items)) = page.get_mut("tools").map(Value::take) {
            for item in items {
                match serde_json::from_value::<ToolInfo>(item) {
                    Ok(tool) if !tool.name.is_empty() => tools.push(tool),
                    _ => log.push(Stream::Stdout, b"[hangar] skipped a malformed entry in tools/list"),
                }
            }
        }
        cursor = page.get("nextCursor").and_then(Value::as_str).map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    Ok(tools)
}

async fn drain_stderr(stderr: tokio::process::ChildStderr, log: Arc<LogRing>) {
    let mut reader = BufReader::with_capacity(64 * 1024, stderr);
    let mut buf = Vec::with_capacity(1024);
    loop {
        match read_line(&mut reader, &mut buf, crate::logs::MAX_LINE_BYTES).await {
            Ok(Line::Complete) => log.push(Stream::Stderr, &buf),
            Ok(Line::TooLong(len)) => {
                log.push(Stream::Stderr, format!("[hangar] skipped a {len}-byte line").as_bytes())
            }
            Ok(Line::Eof) | Err(_) => return,
        }
    }
}

/// Reaps the child, kills what is left of its group, and tells the server.
async fn watch_exit(
    server: Arc<Server>,
    generation: u64,
    mut child: Child,
    pid: u32,
    upstream: Arc<Upstream>,
    exited: watch::Sender<Option<String>>,
) {
    let status = tokio::select! {
        status = child.wait() => status,
        // A broken pipe is as fatal as an exit: nothing can reach the server any more.
        () = upstream.wait_closed() => {
            signal_group(pid, Signal::SIGKILL);
            child.wait().await
        }
    };
    // Whatever the upstream started in its group goes with it.
    spawn::reap_group(pid);
    let how = match status {
        Ok(status) => describe_exit(status),
        Err(err) => format!("could not be waited for ({err})"),
    };
    server.on_exit(generation, &how);
    let _ = exited.send(Some(how));
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => {
            let name = Signal::try_from(signal).map(|s| s.as_str()).unwrap_or("an unknown signal");
            format!("was killed by {name}")
        }
        (None, None) => "ended".into(),
    }
}

async fn wait_exit(exited: &mut watch::Receiver<Option<String>>) -> String {
    match exited.wait_for(Option::is_some).await {
        Ok(how) => how.clone().unwrap_or_default(),
        Err(_) => "ended".into(),
    }
}

async fn follow_notices(server: Arc<Server>, generation: u64, mut notices: mpsc::UnboundedReceiver<Notice>) {
    while let Some(notice) = notices.recv().await {
        match notice {
            Notice::ToolsChanged => server.on_tools_changed(generation).await,
        }
    }
}

/// Close stdin, wait; SIGTERM the group, wait; SIGKILL the group, wait until reaped.
async fn terminate(process: Process, grace: Duration) {
    let mut exited = process.exited.clone();
    let reaped = |exited: &mut watch::Receiver<Option<String>>, wait: Duration| {
        let mut exited = exited.clone();
        async move { tokio::time::timeout(wait, exited.wait_for(Option::is_some)).await.is_ok() }
    };
    process.upstream.close_stdin();
    if !grace.is_zero() && reaped(&mut exited, grace).await {
        return;
    }
    signal_group(process.pid, Signal::SIGTERM);
    if !grace.is_zero() && reaped(&mut exited, grace).await {
        return;
    }
    signal_group(process.pid, Signal::SIGKILL);
    let _ = reaped(&mut exited, Duration::from_secs(5)).await;
}
