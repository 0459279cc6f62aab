//! What a running server is asked to do: tool calls, other MCP requests passed through
//! (`forward`), a client's answer to the upstream's own question (`answer_ask`), a 2026-07-28
//! `subscriptions/listen`, and stopping it.
//!
//! A request cut off because its upstream's process died (its pipe closed under it: a signal,
//! the OOM killer, a crash) is answered only once that death is on record: the process reaped,
//! the server `dead` (`process::watch_exit`), bounded by [`DEATH_ON_RECORD_WITHIN`] for a stdio
//! child (whose closed pipe means it is gone or going) and by [`EXIT_GRACE`] for an HTTP one
//! (whose connection may drop while it lives on). The error then says how it ended, in the dead
//! record's words (`DeadRecord::died_during`), and every read made after the answer shows
//! `dead`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hangar_core::front_door::Unknown;
use hangar_core::ipc::{ErrorKind, IpcError, Stopped, UPSTREAM_DATA_DETAIL, UPSTREAM_MESSAGE_DETAIL};
use hangar_core::lifecycle::{Event, State, StopReason};
use hangar_core::record::DeadRecord;
use hangar_core::trace::{self, TraceContext};
use hangar_runtime::telemetry::{Kind, Span, names as spans};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::process::{EXIT_GRACE, STOP_GRACE, terminate};
use super::{Cause, Server};
use crate::upstream::{Relay, RequestError, Upstream};

/// A `tools/call` without a timeout of its own.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a request cut off by a stdio upstream's closed pipe waits for its death to be on
/// record. A dead process is reaped at once; one that only closed its pipe is killed within
/// [`EXIT_GRACE`]; this bounds a reaping that hangs (an unkillable process).
const DEATH_ON_RECORD_WITHIN: Duration = Duration::from_secs(5);

impl Server {
    /// Stops the server (a no-op for a cold or dead one) and waits until its process is gone;
    /// unless it only went idle, its instances (if it is isolated) stop with it.
    pub async fn stop(&self, reason: StopReason) -> Stopped {
        let instances = async {
            if reason != StopReason::Idle {
                self.stop_instances(reason).await;
            }
        };
        let (_, stopped) = tokio::join!(instances, self.stop_own(reason));
        stopped
    }

    /// Stops its own process, not its instances'.
    pub(super) async fn stop_own(&self, reason: StopReason) -> Stopped {
        let process = {
            let mut inner = self.lock();
            if matches!(inner.lifecycle.state(), State::Initializing | State::Ready | State::Degraded) {
                self.transition(&mut inner, Event::Stop(reason));
                inner.last_stop = Some(reason);
                inner.generation += 1;
                inner.meta.pid = None;
                inner.process.take()
            } else {
                None
            }
        };
        if let Some(process) = process {
            terminate(process, STOP_GRACE).await;
        }
        Stopped { stopped: self.id.clone(), reason }
    }

    /// Calls one of the upstream's tools, starting the server first if it is cold. Dropping the
    /// future (the caller gave up) cancels the call upstream. The upstream's request carries
    /// `traced.parent` (or, with span export on, the round-trip span's context) as its
    /// `_meta.traceparent`.
    ///
    /// Only a tool the upstream declares (as its list stands once it runs) is called; any other
    /// name is the hangar's `Unknown tool` and never reaches it, so a profile's globs, which
    /// judge the declared names, cannot be passed by another spelling of one.
    pub async fn call(
        self: &Arc<Self>,
        tool: &str,
        arguments: Value,
        extra: Option<Value>,
        timeout: Duration,
        relay: Option<Relay>,
        traced: CallTrace<'_>,
    ) -> Result<Value, IpcError> {
        // A caller's own connection, for a server whose callers bring their own credential.
        let per_caller = self.per_caller();
        let (upstream, exited) = match per_caller {
            true => (self.ready_caller_link(traced.identity).await?, None),
            false => self.ready_upstream().await?,
        };
        self.check_declared(tool)?;
        let _counted = CallInFlight::begin(self);
        let started = Instant::now();
        let mut params = match extra {
            Some(Value::Object(extra)) => extra,
            _ => serde_json::Map::new(),
        };
        // An HTTP upstream hears the tool's custom headers as a client would send them.
        let headers = hangar_core::custom_headers::headers_for(&self.param_headers(tool), &arguments);
        params.insert("name".into(), json!(tool));
        params.insert("arguments".into(), arguments);
        let mut span =
            self.shared.telemetry.as_ref().map(|t| t.span(spans::UPSTREAM, Kind::Client, traced.parent.as_ref()));
        if let Some(trace) = span.as_ref().map(Span::context).or(traced.parent) {
            trace::write_params_meta(&mut params, &trace);
        }
        upstream.sync_roots(relay.as_ref()).await;
        let outcome =
            upstream.request_with_headers("tools/call", Value::Object(params), timeout, relay, &headers).await;
        {
            let mut inner = self.lock();
            let seconds = started.elapsed().as_secs_f64();
            inner.counters.call_latency.observe(seconds);
            inner.counters.tool_call(tool, seconds, outcome.is_err());
            if let Err(err) = &outcome {
                // An over-long answer was already counted against the server when it was skipped
                // (`protocol_violation`): one fault, one failure.
                if !matches!(err, RequestError::Oversized { .. }) {
                    inner.health.total_failures += 1;
                }
                inner.counters.tool_call_errors += 1;
            }
        }
        let outcome = match outcome {
            Ok(result) => Ok(result),
            Err(err) if per_caller => Err(self.caller_request_failed(
                traced.identity,
                &format!("tool `{}`", hangar_core::echo::bounded(tool)),
                err,
            )),
            Err(err) => {
                let what = format!("tool `{}`", hangar_core::echo::bounded(tool));
                Err(self.failed(&what, err, &upstream, exited).await)
            }
        };
        if let Some(span) = span.take() {
            self.end_span(span, tool, traced.identity, &outcome);
        }
        outcome
    }

    fn end_span(&self, mut span: Span, tool: &str, identity: &str, outcome: &Result<Value, IpcError>) {
        span.set(spans::MCP_SERVER, self.id.clone());
        span.set(spans::TOOL, tool);
        span.set(spans::IDENTITY, identity);
        span.set(spans::OUTCOME, trace::outcome(outcome.as_ref().map_err(|err| err.kind)));
        span.end();
    }

    /// Hands the client's answer to the running upstream's own request relayed as `ask_id`;
    /// whether it still waited (a restarted upstream asked nothing of this client).
    pub fn answer_ask(&self, ask_id: &str, response: &Value) -> bool {
        let upstream = self.lock().process.as_ref().map(|process| process.upstream.clone());
        upstream.is_some_and(|upstream| upstream.answer_ask(ask_id, response))
    }

    /// Passes any other MCP request to the upstream (starting it if cold) and answers its result.
    /// A prompt or resource list of a server that is not running is answered from its last
    /// known catalog, if it has one, without starting it.
    ///
    /// A method the running upstream did not declare the capability for (prompts, resources,
    /// logging, completions) is never sent: a list is answered empty, `logging/setLevel` with
    /// `{}`, anything else with JSON-RPC's -32601, in the hangar's words.
    ///
    /// A server whose callers bring their own credential is asked on `identity`'s own connection
    /// (nothing of it is remembered: it is that caller's).
    pub async fn forward(
        self: &Arc<Self>,
        identity: &str,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, IpcError> {
        if self.per_caller() {
            return self.forward_as_caller(identity, method, params, timeout).await;
        }
        if let Some(undeclared) = self.undeclared(method) {
            return undeclared;
        }
        let listing = super::memory::is_first_page(method, &params);
        if listing && let Some(remembered) = self.remembered_list(method) {
            return remembered;
        }
        let (upstream, exited) = self.ready_upstream().await?;
        // Its handshake may just have said.
        if let Some(undeclared) = self.undeclared(method) {
            return undeclared;
        }
        self.lock().last_used = Instant::now();
        let outcome = upstream.request(method, params, timeout).await;
        if listing {
            self.keep_list(method, &outcome);
        }
        match outcome {
            Ok(result) => Ok(result),
            Err(err) => Err(self.failed(method, err, &upstream, exited).await),
        }
    }

    /// [`Server::forward`] on `identity`'s own connection.
    async fn forward_as_caller(
        self: &Arc<Self>,
        identity: &str,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, IpcError> {
        let upstream = self.ready_caller_link(identity).await?;
        if let Some(undeclared) = self.undeclared(method) {
            return undeclared;
        }
        self.lock().last_used = Instant::now();
        upstream.request(method, params, timeout).await.map_err(|err| self.caller_request_failed(identity, method, err))
    }

    /// The answer to `method` when the running upstream declared no capability for it.
    fn undeclared(&self, method: &str) -> Option<Result<Value, IpcError>> {
        let capability = crate::upstream::needed_capability(method)?;
        // Unknown until its first handshake: then asked, as any.
        let declared = self.lock().declared.as_ref().map(|d| d.get(capability).is_some());
        if declared != Some(false) {
            return None;
        }
        let empty = |key: &str| {
            // Remembered as any list, so that after a restart it is answered without a start.
            let answer = json!({ key: [] });
            self.keep_list(method, &Ok(answer.clone()));
            Some(Ok(answer))
        };
        match method {
            "prompts/list" => empty("prompts"),
            "resources/list" => empty("resources"),
            "resources/templates/list" => empty("resourceTemplates"),
            "logging/setLevel" => Some(Ok(json!({}))),
            _ => Some(Err(IpcError::new(
                ErrorKind::UpstreamError,
                format!("`{}` declares no `{capability}`: `{method}` was not sent to it", self.id),
            )
            .with_details(json!({"jsonrpc_code": hangar_core::jsonrpc::METHOD_NOT_FOUND, "jsonrpc_data": null})))),
        }
    }

    /// A failed request in the hangar's words; one cut off by its upstream's death (the link
    /// closed) once that death is on record, in the dead record's words when the server is dead.
    async fn failed(&self, what: &str, err: RequestError, upstream: &Upstream, exited: Option<Exited>) -> IpcError {
        let (RequestError::Closed { .. }, Some(mut exited)) = (&err, exited) else {
            return self.request_failure(what, err);
        };
        let within = if upstream.closed_means_gone() { DEATH_ON_RECORD_WITHIN } else { EXIT_GRACE };
        let _ = tokio::time::timeout(within, exited.wait_for(Option::is_some)).await;
        let dead = self.lock().lifecycle.dead().map(DeadRecord::from);
        match dead {
            Some(dead) => IpcError::new(err.kind(), dead.died_during(&self.id, what)),
            None => self.request_failure(what, err),
        }
    }

    /// A failed upstream request in the hangar's words; an upstream JSON-RPC error keeps its
    /// code (and protocol data) in `details`, for the front door to pass on, and its own words
    /// under [`UPSTREAM_MESSAGE_DETAIL`] and [`UPSTREAM_DATA_DETAIL`], which the hangar strips
    /// from every answer but the front door's (`Hangar::upstream_words`).
    pub(super) fn request_failure(&self, what: &str, err: RequestError) -> IpcError {
        if let RequestError::Unauthorized { .. } = err {
            return IpcError::new(err.kind(), format!("`{}` {what}: {}", self.id, self.unauthorized(&err)));
        }
        let error = IpcError::new(err.kind(), format!("`{}` {what}: {err}", self.id));
        match err {
            RequestError::Rpc { code, data, upstream, .. } => {
                let mut details = json!({"jsonrpc_code": code, "jsonrpc_data": data});
                // Its elicitations' completion comes from this server alone (`calls/connect.rs`).
                if code == hangar_core::mcp::URL_ELICITATION_REQUIRED {
                    details["mcp_server"] = json!(self.id);
                }
                if let Some(words) = upstream {
                    details[UPSTREAM_MESSAGE_DETAIL] = json!(words.message);
                    if let Some(data) = words.data {
                        details[UPSTREAM_DATA_DETAIL] = data;
                    }
                }
                error.with_details(details)
            }
            _ => error,
        }
    }

    /// An upstream's 401 or 403 in the hangar's words: what it refused, what it asked for (its
    /// challenge's parsed parameters) and the config key to fix.
    pub(super) fn unauthorized(&self, err: &RequestError) -> String {
        let key = hangar_core::upstream_auth::key_to_fix(&self.id, self.config.auth.as_ref());
        format!("{err}; fix the credentials at {key}, then reload (or start it)")
    }

    /// `Unknown tool` (in the front door's one wording) unless the upstream declares `tool`.
    fn check_declared(&self, tool: &str) -> Result<(), IpcError> {
        if self.lock().tools.infos.iter().any(|t| t.name == tool) {
            return Ok(());
        }
        Err(IpcError::new(ErrorKind::UnknownTool, Unknown::default().message("tool", tool)))
    }

    /// The running upstream (started first if need be), and what tells when its process ended
    /// (none for a remote endpoint, which has no process).
    pub(super) async fn ready_upstream(self: &Arc<Self>) -> Result<(Arc<Upstream>, Option<Exited>), IpcError> {
        for _ in 0..2 {
            {
                let inner = self.lock();
                if matches!(inner.lifecycle.state(), State::Ready | State::Degraded)
                    && let Some(process) = &inner.process
                {
                    return Ok((process.upstream.clone(), process.pid.map(|_| process.exited.clone())));
                }
            }
            self.start(Cause::Call).await?;
        }
        Err(IpcError::new(ErrorKind::UpstreamDied, format!("`{}` went down as it came up", self.id)))
    }
}

/// Says how a child's process ended, once it has (`process::Process::exited`).
type Exited = watch::Receiver<Option<String>>;

/// Where a call sits in a trace, and whose it is (for the round-trip span).
pub struct CallTrace<'a> {
    /// The admission span's context with export on; the caller's own (if any) with it off.
    pub parent: Option<TraceContext>,
    /// Who is calling, as the span names them.
    pub identity: &'a str,
}

/// Counts a call while it runs (and however it ends, cancelled included), so idle stop never
/// stops a server under a call.
struct CallInFlight<'a>(&'a Server);

impl<'a> CallInFlight<'a> {
    fn begin(server: &'a Server) -> Self {
        let mut inner = server.lock();
        inner.health.total_invocations += 1;
        inner.counters.tool_calls += 1;
        inner.calls_in_flight += 1;
        inner.last_used = Instant::now();
        CallInFlight(server)
    }
}

impl Drop for CallInFlight<'_> {
    fn drop(&mut self) {
        let mut inner = self.0.lock();
        inner.calls_in_flight = inner.calls_in_flight.saturating_sub(1);
        inner.last_used = Instant::now();
    }
}

impl Server {
    /// Holds a 2026-07-28 `subscriptions/listen` on the running upstream until it ends (the
    /// upstream closes it, goes down, or `timeout` passes) or the future is dropped (which
    /// cancels it upstream). Never starts the server: a subscription does not keep a stopped
    /// server up. [`ErrorKind::ProtocolMismatch`] for a legacy upstream, which takes
    /// `resources/subscribe` itself.
    pub async fn listen(&self, params: Value, timeout: Duration) -> Result<Value, IpcError> {
        let upstream = {
            let inner = self.lock();
            let running = matches!(inner.lifecycle.state(), State::Ready | State::Degraded);
            match (&inner.process, inner.meta.protocol_era.as_deref()) {
                (Some(process), Some("modern")) if running => process.upstream.clone(),
                (Some(_), Some(_)) if running => {
                    return Err(IpcError::new(ErrorKind::ProtocolMismatch, "a legacy upstream has no listen"));
                }
                _ => return Err(IpcError::new(ErrorKind::Stopped, format!("`{}` is not running", self.id))),
            }
        };
        upstream
            .request("subscriptions/listen", params, timeout)
            .await
            .map_err(|err| self.request_failure("listen", err))
    }
}
