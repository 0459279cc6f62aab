//! Starting a server: explicitly, lazily by a call, or as a recovery restart.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use hangar_core::ipc::{ErrorKind, IpcError, Started};
use hangar_core::lifecycle::{Event, State};
use hangar_core::record::{DeadRecord, ToolInfo};
use hangar_core::time::rfc3339_millis;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::process::{Process, STOP_GRACE, drain_stderr, follow_notices, terminate, wait_exit, watch_exit};
use super::{Cause, Inner, Server};
use crate::logs::{LogRing, Stream};
use crate::spawn::{self, Pipes};
use crate::upstream::{Era, RequestError, Upstream};

/// The `server/discover` probe waits at most this long before trying the legacy handshake.
const DISCOVER_TIMEOUT: Duration = Duration::from_secs(2);
/// Pages of `tools/list` followed before giving up on an upstream's cursor.
const MAX_TOOL_PAGES: usize = 100;

/// Why a start did not bring the server up.
pub(super) enum StartFailure {
    Spawn(String),
    Exited(String),
    Handshake(String),
    Blocked(Vec<String>),
    Stopped,
}

impl Server {
    /// Brings the server to `ready`, or says why it could not.
    pub async fn start(self: &Arc<Self>, cause: Cause) -> Result<Started, IpcError> {
        let _one_start_at_a_time = self.start_lock.lock().await;
        let generation = {
            let mut inner = self.lock();
            if let Some(answer) = self.without_starting(&inner, cause) {
                return answer;
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
            _ => None,
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
        let error = match (&record.retry_allowed_at, record.revived_by.as_str()) {
            (_, "start") => IpcError::new(
                ErrorKind::CapabilityBlocked,
                format!("`{}` is dead ({}); only an explicit start revives it", self.id, record.reason),
            ),
            (Some(at), _) => IpcError::new(
                ErrorKind::RetryLater,
                format!("`{}` is dead ({}); a call may revive it after {at}", self.id, record.reason),
            ),
            (None, _) => IpcError::new(ErrorKind::RetryLater, format!("`{}` is dead ({})", self.id, record.reason)),
        };
        Some(error.with_details(json!({"dead": record})))
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
        let mut inner = self.lock();
        if inner.generation != generation || inner.lifecycle.state() != State::Initializing {
            return Err(StartFailure::Stopped);
        }
        if let Some(blocked) = self.unexpected_tools(&mut inner, &tools) {
            return Err(StartFailure::Blocked(blocked));
        }
        inner.tools = tools;
        inner.meta.protocol_era = Some(
            match handshake.era {
                Era::Modern => "modern",
                Era::Legacy => "legacy",
            }
            .into(),
        );
        inner.meta.protocol_version = Some(handshake.protocol_version);
        inner.health.consecutive_failures = 0;
        inner.last_used = Instant::now();
        inner.last_check = None;
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
            StartFailure::Stopped => (ErrorKind::Stopped, "it was stopped while starting".into()),
            StartFailure::Spawn(why) | StartFailure::Handshake(why) => (ErrorKind::StartFailed, why.clone()),
            StartFailure::Exited(how) => {
                (ErrorKind::StartFailed, format!("its process {how} before completing the MCP handshake"))
            }
        };
        if current && inner.lifecycle.state() == State::Initializing {
            let event = match (&failure, cause) {
                (StartFailure::Blocked(_), _) => Event::CapabilityBlocked,
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

/// `tools/list`, following cursors, each entry checked; malformed entries are logged and skipped.
pub(super) async fn list_tools(
    upstream: &Upstream,
    deadline: Instant,
    log: &LogRing,
) -> Result<Vec<ToolInfo>, RequestError> {
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
