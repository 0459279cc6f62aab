//! Starting a server: explicitly, lazily by a call, or as a recovery restart.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use hangar_core::ipc::{ErrorKind, IpcError, Started};
use hangar_core::lifecycle::{DeadReason, Event, RevivedBy, State, StopReason};
use hangar_core::record::{DeadRecord, ToolDrift, ToolInfo};
use hangar_core::sync::Unpoisoned;
use hangar_core::time::rfc3339_millis;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::process::{Process, STOP_GRACE, drain_into_log, follow_notices, terminate, wait_exit, watch_exit};
use super::{Cause, Inner, Server, Tools, millis};
use crate::logs::{LogRing, Stream};
use crate::sandbox::PrivateDir;
use crate::spawn::{self, Pipes};
use crate::upstream::{Era, HttpUpstream, RequestError, StdioUpstream, Upstream};
use hangar_core::config::Mode;

/// Pages of `tools/list` followed before giving up on an upstream's cursor.
const MAX_TOOL_PAGES: usize = 100;

/// How often a managed HTTP server's endpoint is tried while it comes up.
const LISTEN_POLL: Duration = Duration::from_millis(25);

/// Why a start did not bring the server up.
pub(super) enum StartFailure {
    Spawn(String),
    /// Something else already answers on a managed server's endpoint.
    PortHeld(String),
    Exited(String),
    Handshake(String),
    Blocked(Vec<String>),
    /// Pinned tools drifted, in block mode.
    Drifted(ToolDrift),
    /// The endpoint refused the hangar's credentials (401 or 403), in the hangar's words.
    Unauthorized(String),
    Stopped,
}

/// What every start joined to one spawn is told, once it is over.
pub(super) type StartOutcome = watch::Receiver<Option<Result<Started, IpcError>>>;

/// Marks a start in flight; dropped when it is over, so the next start runs anew.
struct InFlightStart(Arc<Server>);

impl Drop for InFlightStart {
    fn drop(&mut self) {
        self.0.starting().take();
    }
}

impl Server {
    /// Brings the server to `ready`, or says why it could not. Starts that arrive while one is
    /// in flight join it, whatever their surface or cause: one spawn, and all of them get its
    /// outcome, success or the same error. The start runs in a task of its own, so a caller
    /// that gives up leaves it whole for the others.
    pub async fn start(self: &Arc<Self>, cause: Cause) -> Result<Started, IpcError> {
        let mut outcome = {
            let mut starting = self.starting();
            match &*starting {
                Some(in_flight) => in_flight.clone(),
                None => {
                    let (generation, old) = match self.begin_start(cause) {
                        Ok(begun) => begun,
                        Err(answer) => return answer,
                    };
                    let (tx, rx) = watch::channel(None);
                    *starting = Some(rx.clone());
                    let server = self.clone();
                    tokio::spawn(async move {
                        // Later starts look at the state again; those that joined get this
                        // outcome (cleared on drop too, so even a panicked start is not joined).
                        let in_flight = InFlightStart(server.clone());
                        let result = server.run_start(generation, old, cause).await;
                        drop(in_flight);
                        let _ = tx.send(Some(result));
                    });
                    rx
                }
            }
        };
        let result = match outcome.wait_for(Option::is_some).await {
            Ok(done) => done.clone(),
            Err(_) => None,
        };
        result.unwrap_or_else(|| Err(IpcError::new(ErrorKind::Internal, format!("`{}`: the start was lost", self.id))))
    }

    fn starting(&self) -> std::sync::MutexGuard<'_, Option<StartOutcome>> {
        self.starting.locked()
    }

    /// Moves the server to `initializing` for a new start (the new generation, and the process
    /// it replaces), or answers at once when no start is needed or allowed now.
    fn begin_start(&self, cause: Cause) -> Result<(u64, Option<Process>), Result<Started, IpcError>> {
        let mut inner = self.lock();
        if let Some(answer) = self.without_starting(&inner, cause) {
            return Err(answer);
        }
        if self.shared.shutting_down.load(Ordering::SeqCst) {
            return Err(Err(IpcError::shutting_down()));
        }
        let old = inner.process.take();
        if !self.transition(&mut inner, Event::Start) {
            return Err(Err(IpcError::new(
                ErrorKind::Internal,
                format!("`{}` cannot be started from its current state", self.id),
            )));
        }
        inner.generation += 1;
        Ok((inner.generation, old))
    }

    /// The start itself: the old process gone, the new one up and through its handshake.
    async fn run_start(
        self: &Arc<Self>,
        generation: u64,
        old: Option<Process>,
        cause: Cause,
    ) -> Result<Started, IpcError> {
        if let Some(old) = old {
            match self.config.mode {
                // The new process needs the old one's port: wait until it is gone.
                Mode::Http => terminate(old, STOP_GRACE).await,
                Mode::Subprocess | Mode::Remote => drop(tokio::spawn(terminate(old, STOP_GRACE))),
            }
        }
        match self.bring_up(generation).await {
            Ok(()) => Ok(self.started(&self.lock())),
            Err(failure) => Err(self.fail_start(generation, failure, cause)),
        }
    }

    /// The answer when no start is needed or allowed now; `None` to go ahead.
    fn without_starting(&self, inner: &Inner, cause: Cause) -> Option<Result<Started, IpcError>> {
        let state = inner.lifecycle.state();
        match (state, cause) {
            (State::Ready, _) => Some(Ok(self.started(inner))),
            // Recovery runs only for a degraded server; anything else means someone acted first.
            (_, Cause::Recovery { .. }) if state != State::Degraded => Some(Err(IpcError::new(
                ErrorKind::Stopped,
                format!("`{}` is {} now; recovery is over", self.id, state.as_str()),
            ))),
            (State::Degraded, Cause::Call) if inner.process.is_some() => Some(Ok(self.started(inner))),
            (State::Degraded, Cause::Call) => Some(Err(IpcError::new(
                ErrorKind::RetryLater,
                format!("`{}` is degraded and its recovery restart is pending", self.id),
            ))),
            (State::Dead, Cause::Call) => self.refuse_call_to_dead(inner).map(Err),
            (State::Dead, _) => self.refuse_start_in_backoff(inner).map(Err),
            _ => None,
        }
    }

    fn started(&self, inner: &Inner) -> Started {
        Started {
            mcp_server: self.id.clone(),
            state: inner.lifecycle.state(),
            tools: inner.tools.infos.iter().map(|t| t.name.clone()).collect(),
        }
    }

    /// Why an explicit start may not run now, if its backoff has not passed: a server that keeps
    /// failing is not spawned again on demand (from any surface) before its next start is due.
    fn refuse_start_in_backoff(&self, inner: &Inner) -> Option<IpcError> {
        let now = SystemTime::now();
        let dead = inner.lifecycle.dead()?;
        let next = dead.next_start_at(now)?;
        let record = DeadRecord::from(dead);
        let wait_ms = millis(next.duration_since(now).unwrap_or_default());
        let message = record.start_refusal(&self.id, &rfc3339_millis(next));
        Some(
            IpcError::new(ErrorKind::RetryLater, message)
                .with_details(json!({"dead": record, "retry_after_ms": wait_ms})),
        )
    }

    /// Why a call may not revive this dead server now, if it may not.
    fn refuse_call_to_dead(&self, inner: &Inner) -> Option<IpcError> {
        let dead = inner.lifecycle.dead()?;
        if dead.call_may_revive(SystemTime::now()) {
            return None;
        }
        let record = DeadRecord::from(dead);
        let wait_ms = dead.retry_allowed_at.map(|at| millis(at.duration_since(SystemTime::now()).unwrap_or_default()));
        let kind = match (record.revived_by, record.reason) {
            (RevivedBy::Start, DeadReason::UpstreamUnauthorized) => ErrorKind::UpstreamUnauthorized,
            (RevivedBy::Start, _) => ErrorKind::CapabilityBlocked,
            (RevivedBy::CallOrStart, _) => ErrorKind::RetryLater,
        };
        let error = IpcError::new(kind, record.call_refusal(&self.id));
        let details = match wait_ms {
            Some(ms) if record.revived_by != RevivedBy::Start => json!({"dead": record, "retry_after_ms": ms}),
            _ => json!({"dead": record}),
        };
        Some(error.with_details(details))
    }

    async fn bring_up(self: &Arc<Self>, generation: u64) -> Result<(), StartFailure> {
        let deadline = Instant::now() + self.config.handshake_timeout();
        let process = match self.config.mode {
            Mode::Subprocess => self.spawn_stdio(generation)?,
            Mode::Http => {
                self.preflight().await?;
                let process = self.spawn_http(generation)?;
                self.wait_listening(&process, deadline).await?;
                process
            }
            Mode::Remote => self.connect_remote(generation)?,
        };
        let upstream = process.upstream.clone();
        let mut exited = process.exited.clone();
        let handshake_and_tools = async {
            let handshake = upstream.handshake(deadline).await?;
            let tools = list_tools(&upstream, deadline, &self.log).await?;
            Ok::<_, RequestError>((handshake, tools))
        };
        let (handshake, tools) = tokio::select! {
            outcome = tokio::time::timeout_at(deadline.into(), handshake_and_tools) => match outcome {
                Ok(Ok(done)) => done,
                Ok(Err(RequestError::Closed { method })) => {
                    return Err(self.closed_during_handshake(&process, &mut exited, deadline, &method).await);
                }
                // The era probe and each request get a share of the time; the bound that ran out
                // is the whole handshake's, so that is the one to name.
                Ok(Err(RequestError::Timeout { method, .. })) => {
                    return Err(StartFailure::Handshake(self.handshake_timed_out(&format!("`{method}` went unanswered"))));
                }
                // Without a caller's credential, a refusal is the answer expected: it is there.
                Ok(Err(RequestError::Unauthorized { .. })) if self.per_caller() => {
                    return self.up_reachable(generation);
                }
                Ok(Err(err @ RequestError::Unauthorized { .. })) => {
                    return Err(StartFailure::Unauthorized(self.unauthorized(&err)));
                }
                Ok(Err(err)) => return Err(StartFailure::Handshake(err.to_string())),
                Err(_) => return Err(StartFailure::Handshake(self.handshake_timed_out("it was still under way"))),
            },
            how = wait_exit(&mut exited) => return Err(StartFailure::Exited(how)),
        };
        let mut inner = self.lock();
        if inner.generation != generation || inner.lifecycle.state() != State::Initializing {
            return Err(StartFailure::Stopped);
        }
        if let Some(blocked) = self.unexpected_tools(&mut inner, &tools.infos) {
            return Err(StartFailure::Blocked(blocked));
        }
        if let Some(drift) = self.drifted_tools(&mut inner, &tools) {
            return Err(StartFailure::Drifted(drift));
        }
        self.set_tools(&mut inner, tools);
        inner.meta.protocol_era = Some(
            match handshake.era {
                Era::Modern => "modern",
                Era::Legacy => "legacy",
            }
            .into(),
        );
        inner.meta.protocol_version = Some(handshake.protocol_version);
        inner.declared = Some(handshake.capabilities);
        inner.health.consecutive_failures = 0;
        inner.last_used = Instant::now();
        inner.last_check = None;
        self.transition(&mut inner, Event::HandshakeDone);
        Ok(())
    }

    /// A server whose callers bring their own credential is up once it answers at all: its
    /// tools are learned at the first caller's connection (`callers.rs`), its era there too.
    fn up_reachable(&self, generation: u64) -> Result<(), StartFailure> {
        let mut inner = self.lock();
        if inner.generation != generation || inner.lifecycle.state() != State::Initializing {
            return Err(StartFailure::Stopped);
        }
        inner.meta.protocol_era = None;
        inner.meta.protocol_version = None;
        inner.declared = None;
        inner.health.consecutive_failures = 0;
        inner.last_used = Instant::now();
        inner.last_check = None;
        self.transition(&mut inner, Event::HandshakeDone);
        Ok(())
    }

    /// Why a start whose upstream closed the connection during the handshake failed. A child is
    /// given until the handshake's deadline to exit, so the failure can say how it ended; a
    /// remote endpoint (nothing refused it but the far end) and a child that lingers are not
    /// waited for past it: the start ends either way.
    async fn closed_during_handshake(
        &self,
        process: &Process,
        exited: &mut watch::Receiver<Option<String>>,
        deadline: Instant,
        method: &str,
    ) -> StartFailure {
        if process.pid.is_none() {
            return StartFailure::Handshake(format!("its endpoint refused or closed the connection during `{method}`"));
        }
        match tokio::time::timeout_at(deadline.into(), wait_exit(exited)).await {
            Ok(how) => StartFailure::Exited(how),
            Err(_) => StartFailure::Handshake(
                self.handshake_timed_out(&format!("it closed the connection during `{method}` and did not exit")),
            ),
        }
    }

    /// Why a start that ran out of `handshake_timeout_s` failed, naming the key and its value.
    fn handshake_timed_out(&self, detail: &str) -> String {
        format!(
            "it did not complete the MCP handshake within handshake_timeout_s ({} s): {detail}; the hangar stopped it",
            self.config.handshake_timeout_s
        )
    }

    /// A stdio child: MCP on its stdin and stdout, its stderr into the log.
    fn spawn_stdio(self: &Arc<Self>, generation: u64) -> Result<Process, StartFailure> {
        let (mut child, private_dir) = self.spawn_child(Pipes::All)?;
        let (Some(pid), Some(stdin), Some(stdout), Some(stderr)) =
            (child.id(), child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(StartFailure::Spawn("the child's pipes were not set up".into()));
        };
        tokio::spawn(drain_into_log(stderr, Stream::Stderr, self.log.clone()));
        let (notices_tx, notices_rx) = mpsc::unbounded_channel();
        let upstream = Arc::new(Upstream::stdio(StdioUpstream::start(stdin, stdout, self.log.clone(), notices_tx)));
        tokio::spawn(follow_notices(self.clone(), generation, notices_rx));
        let (exited_tx, exited) = watch::channel(None);
        tokio::spawn(watch_exit(self.clone(), generation, child, pid, upstream.clone(), exited_tx));
        self.running(generation, Process { pid: Some(pid), upstream, exited, _remote: None, _private_dir: private_dir })
    }

    /// A managed HTTP child: MCP over HTTP at its endpoint, its stdout and stderr into the log.
    fn spawn_http(self: &Arc<Self>, generation: u64) -> Result<Process, StartFailure> {
        let (mut child, private_dir) = self.spawn_child(Pipes::Output)?;
        let (Some(pid), Some(stdout), Some(stderr)) = (child.id(), child.stdout.take(), child.stderr.take()) else {
            return Err(StartFailure::Spawn("the child's pipes were not set up".into()));
        };
        tokio::spawn(drain_into_log(stdout, Stream::Stdout, self.log.clone()));
        tokio::spawn(drain_into_log(stderr, Stream::Stderr, self.log.clone()));
        let upstream = self.http_upstream(generation)?;
        let (exited_tx, exited) = watch::channel(None);
        tokio::spawn(watch_exit(self.clone(), generation, child, pid, upstream.clone(), exited_tx));
        self.running(generation, Process { pid: Some(pid), upstream, exited, _remote: None, _private_dir: private_dir })
    }

    /// A remote endpoint: nothing to spawn.
    fn connect_remote(self: &Arc<Self>, generation: u64) -> Result<Process, StartFailure> {
        let upstream = self.http_upstream(generation)?;
        let (never_exits, exited) = watch::channel(None);
        let remote = Some(Arc::new(never_exits));
        self.running(generation, Process { pid: None, upstream, exited, _remote: remote, _private_dir: None })
    }

    fn http_upstream(self: &Arc<Self>, generation: u64) -> Result<Arc<Upstream>, StartFailure> {
        let endpoint = self.config.endpoint.as_deref().ok_or(StartFailure::Spawn("no endpoint".into()))?;
        let (notices_tx, notices_rx) = mpsc::unbounded_channel();
        let headers: Vec<(&str, &str)> = self.config.auth_headers().collect();
        let oauth = self.config.auth.as_ref().and_then(|auth| auth.oauth.as_ref());
        let vault = self.shared.vault.get().cloned();
        let link = HttpUpstream::new(endpoint, &headers, oauth, vault, self.log.clone(), notices_tx)
            .map_err(StartFailure::Spawn)?;
        tokio::spawn(follow_notices(self.clone(), generation, notices_rx));
        Ok(Arc::new(Upstream::http(link)))
    }

    /// Spawns the configured command, in its sandbox if it has one; with the sandbox's private
    /// directory, which lives as long as the process's record.
    fn spawn_child(&self, pipes: Pipes) -> Result<(tokio::process::Child, Option<Arc<PrivateDir>>), StartFailure> {
        let (program, args) = self.config.command.split_first().ok_or(StartFailure::Spawn("no command".into()))?;
        let mut env: Vec<(String, String)> =
            self.config.env_values().map(|(name, value)| (name.to_owned(), value.to_owned())).collect();
        let Some(sandbox) = self.config.sandbox() else {
            self.lock().sandbox_in_effect = None;
            let child = spawn::spawn(program.as_ref(), args, &env, pipes)
                .map_err(|err| StartFailure::Spawn(format!("cannot run `{program}`: {err}")))?;
            return Ok((child, None));
        };
        let began = Instant::now();
        let path = self.config.env_values().find(|(name, _)| *name == "PATH").map(|(_, value)| value);
        let prepared =
            crate::sandbox::prepare(&self.id, sandbox, &self.config.command, path).map_err(StartFailure::Spawn)?;
        let prepare_us = began.elapsed().as_micros();
        env.extend(prepared.env);
        let (need, landlock) = (prepared.namespaces_need, prepared.landlock_refusal);
        let child = spawn::spawn_confined(prepared.program.as_os_str(), args, &env, pipes, prepared.confinement)
            .map_err(|err| {
                // The cause the hangar can see: EACCES is exec refused under the Landlock rules
                // (the namespaces' steps fail otherwise: EPERM, EINVAL, ENOSPC, EUSERS).
                let why = match err.raw_os_error() {
                    Some(libc::EACCES) => landlock,
                    _ => need,
                };
                let why = why.map(|why| format!(" ({why})")).unwrap_or_default();
                StartFailure::Spawn(format!("cannot run `{program}` in its sandbox: {err}{why}"))
            })?;
        tracing::info!(mcp_server = %self.id, prepare_us, enforced = ?prepared.in_effect.enforced, fallbacks = ?prepared.in_effect.fallbacks, "sandboxed");
        self.lock().sandbox_in_effect = Some(prepared.in_effect);
        Ok((child, prepared.private_dir.map(Arc::new)))
    }

    /// Refuses to start a managed HTTP server on an endpoint something else already answers on.
    async fn preflight(&self) -> Result<(), StartFailure> {
        let endpoint = self.config.endpoint.clone().unwrap_or_default();
        let checked = tokio::task::spawn_blocking(move || hangar_core::preflight::check_free(&endpoint)).await;
        match checked {
            Ok(Ok(())) => Ok(()),
            Ok(Err(err)) => Err(StartFailure::PortHeld(err.to_string())),
            Err(err) => Err(StartFailure::Spawn(format!("the port preflight failed: {err}"))),
        }
    }

    /// Waits, bounded, until the child listens on its endpoint; stops waiting the moment it
    /// exits. An answer counts only if the listening socket is the child's own.
    async fn wait_listening(&self, process: &Process, deadline: Instant) -> Result<(), StartFailure> {
        let endpoint = self.config.endpoint.clone().unwrap_or_default();
        let (host, port) = host_and_port(&endpoint)
            .ok_or_else(|| StartFailure::Spawn(format!("{endpoint} names no host and port")))?;
        let mut exited = process.exited.clone();
        let pid = process.pid.unwrap_or_default();
        loop {
            let connected =
                tokio::time::timeout(LISTEN_POLL * 8, tokio::net::TcpStream::connect((host.as_str(), port))).await;
            if let Ok(Ok(stream)) = connected {
                let answered = stream.peer_addr().ok();
                // Its whole subtree: a server that daemonizes listens in a descendant.
                let own = crate::proctree::subtree(pid, &crate::proctree::snapshot());
                return match answered.and_then(|addr| crate::listeners::held_by(addr, &own)) {
                    Some(false) => Err(StartFailure::PortHeld(format!(
                        "{endpoint} answered, but from a process outside `{}`'s own: a stranger holds the port",
                        self.id
                    ))),
                    _ => Ok(()),
                };
            }
            if Instant::now() >= deadline {
                return Err(StartFailure::Handshake(format!(
                    "it did not listen on {endpoint} within handshake_timeout_s ({} s); the hangar stopped it",
                    self.config.handshake_timeout_s
                )));
            }
            tokio::select! {
                () = tokio::time::sleep(LISTEN_POLL) => {}
                how = wait_exit(&mut exited) => return Err(StartFailure::Exited(how)),
            }
        }
    }

    /// Records a newly started process as the server's current one.
    /// Records `process` as the server's, unless a stop came while it was being spawned: that
    /// stop found no process to end, so this one is ended here rather than left running under
    /// a server that reads `cold`.
    fn running(&self, generation: u64, process: Process) -> Result<Process, StartFailure> {
        let mut inner = self.lock();
        if inner.generation != generation {
            tokio::spawn(terminate(process, Duration::ZERO));
            return Err(StartFailure::Stopped);
        }
        inner.meta.pid = process.pid;
        inner.meta.started_at = Some(rfc3339_millis(SystemTime::now()));
        inner.counters.starts += 1;
        inner.meta.restarts = inner.counters.starts - 1;
        inner.process = Some(process.clone());
        Ok(process)
    }

    /// Records a failed start and renders its error in the hangar's words.
    fn fail_start(&self, generation: u64, failure: StartFailure, cause: Cause) -> IpcError {
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
            StartFailure::Drifted(drift) => {
                // The same words as the dead record's detail.
                inner.blocked_because = Some(drift.detail());
                (ErrorKind::CapabilityBlocked, drift.detail())
            }
            StartFailure::Unauthorized(why) => {
                // The same words as the dead record's detail.
                inner.blocked_because = Some(why.clone());
                (ErrorKind::UpstreamUnauthorized, why.clone())
            }
            StartFailure::Stopped => (ErrorKind::Stopped, stopped_while_starting(inner.last_stop)),
            StartFailure::Spawn(why) | StartFailure::Handshake(why) => (ErrorKind::StartFailed, why.clone()),
            StartFailure::PortHeld(why) => (ErrorKind::PortHeld, why.clone()),
            StartFailure::Exited(how) => {
                (ErrorKind::StartFailed, format!("its process {how} before completing the MCP handshake"))
            }
        };
        if current && inner.lifecycle.state() == State::Initializing {
            let event = match (&failure, cause) {
                (StartFailure::Blocked(_) | StartFailure::Drifted(_), _) => Event::CapabilityBlocked,
                // Not a backoff, nor a recovery's next try: each would ask with the same credentials.
                (StartFailure::Unauthorized(_), _) => Event::Unauthorized,
                (_, Cause::Recovery { last: false }) => Event::ThresholdReached,
                (_, Cause::Recovery { last: true }) => {
                    Event::GaveUp { retry_allowed_at: Some(self.next_retry(&mut inner)) }
                }
                _ => Event::StartFailed { retry_allowed_at: Some(self.next_retry(&mut inner)) },
            };
            self.transition(&mut inner, event);
        }
        let dead = inner.lifecycle.dead().map(DeadRecord::from);
        tracing::warn!(mcp_server = %self.id, %why, "start failed");
        IpcError::new(kind, format!("`{}` did not start: {why}", self.id)).with_details(json!({"dead": dead}))
    }
}

/// What overtook a start, in the hangar's words: who stopped it, and why.
fn stopped_while_starting(reason: Option<StopReason>) -> String {
    let why = match reason {
        Some(StopReason::UserRequest) | None => "a stop was requested",
        Some(StopReason::Reload) => "a config reload changed or removed it",
        Some(StopReason::Shutdown) => "the hangar is shutting down",
        Some(StopReason::Idle) => "it was idle for longer than idle_ttl_s",
    };
    format!("it was stopped while starting: {why}")
}

/// The host and port an endpoint URL names (IPv6 literals without brackets).
fn host_and_port(endpoint: &str) -> Option<(String, u16)> {
    let rest = endpoint.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let default_port = if endpoint.starts_with("https://") { 443 } else { 80 };
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = after.strip_prefix(':').map_or(Some(default_port), |p| p.parse().ok())?;
        return Some((host.to_owned(), port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host.to_owned(), port.parse().ok()?)),
        None => Some((authority.to_owned(), default_port)),
    }
}

/// `tools/list`, following cursors, each entry checked; malformed entries are logged and skipped.
pub(super) async fn list_tools(upstream: &Upstream, deadline: Instant, log: &LogRing) -> Result<Tools, RequestError> {
    let mut tools = Tools::default();
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
                match serde_json::from_value::<ToolInfo>(item.clone()) {
                    Ok(tool) if !tool.name.is_empty() => {
                        tools.infos.push(tool);
                        tools.raw.push(item);
                    }
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
