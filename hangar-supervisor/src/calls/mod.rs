//! A tool call's one pipeline: every `Request::Call`, whatever surface sent it, and every call
//! the supervisor makes on a caller's behalf (a task's runs, a batch's calls), goes through the
//! same named stages, each in its own file:
//!
//! 1. `resolve.rs`: where the call goes: a server's tool by name, or a front-door name resolved
//!    within the caller's view (`Hangar::resolve`).
//! 2. `judge.rs`: the caller's [`Decision`]: the view's rules on the tool and its arguments, and
//!    the call's audit entry.
//! 3. `admit.rs`: what the call must satisfy before it may run: arguments an object, its
//!    `Mcp-Param-*` headers, a tool's task support, then the hangar's and the server's limits.
//! 4. `run.rs`: the upstream request, with its timeout, relay and trace.
//! 5. Then the answer (a caller who must first connect their own account to the server is
//!    asked to, `connect.rs`): returned as it is ([`Hangar::one_call`]), or `hold/` (a question to the
//!    client: the call waits, still running, for its retry), or `park/` (a task the supervisor
//!    owns, for a client that takes tasks; `park/batch.rs` runs `hangar_call` batches).
//!
//! The client's stance ([`hangar_core::ipc::Stance`]) is read once, in [`Hangar::call_spec`]:
//! a batch, or a call that takes tasks, is parked; a 2026-07-28 call may hold; a legacy
//! session's call may be cancelled by its request id (`kept/client_relay.rs`, from any API instance).
//!
//! Where later stages slot in, each in one place:
//! - credentials for the upstream: the server's connection carries them (`server/callers.rs`
//!   gives each caller of a `per: user` or `token_exchange` server a connection with their own
//!   token); a caller with none is asked to connect (`connect.rs`);
//! - argument policy (a profile's rules on calls, `hangar_core::rules`) is judged in
//!   `judge.rs`, where the view's rules judge the call; a call a rule marks `approve` then waits
//!   for a person's decision (`approve.rs`), before admission;
//! - redaction of what the call returns: at the end of the stages (`Decision::redact`), so a
//!   task's, a held call's and a batch's answers are as clean as a plain call's;
//! - per-identity quotas (a profile's `limits`): `admit.rs`, beside the limits.
//!
//! Architecture invariant: no stage knows the surface the call came through except by its
//! stance; the state that outlives a request (tasks, held calls and batches, cancels) is
//! [`Calls`]'s, not `Hangar`'s.

mod admit;
mod approve;
mod connect;
mod hold;
mod judge;
mod kept;
mod park;
mod resolve;
mod run;
mod running;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use hangar_core::access::Caller;
use hangar_core::ipc::{CallEra, CallSpec, Called, ErrorKind, IpcError, Outcome, Reply, Stance, Target};
use hangar_core::sync::UnpoisonedRw;
use hangar_core::trace::{TraceContext, outcome};
use hangar_runtime::telemetry::{Kind, names as spans};
use serde_json::Value;
use tokio::sync::mpsc;

pub(crate) use self::kept::{Calls, Noted, client_answer_late};
use crate::hangar::{Decision, Hangar, admit_caller};

/// One call of a [`CallSpec`] (or of a batch), as the supervisor makes it.
pub(crate) struct CallRequest {
    pub(crate) target: Target,
    pub(crate) arguments: Value,
    pub(crate) timeout_ms: Option<u64>,
    pub(crate) relay: hangar_core::ipc::Relay,
    pub(crate) extra: Option<Value>,
    /// Where the call sits in a trace: the caller's context as received (its `trace_id_hex()`
    /// is what the call's audit entry records), or the admission span's within it.
    pub(crate) trace: Option<TraceContext>,
    pub(crate) param_headers: Option<Box<hangar_core::custom_headers::ParamHeaders>>,
    pub(crate) stance: Stance,
    /// Whether a legacy upstream's own request to the client holds the call (`hold`): a
    /// [`CallEra::Modern`] call's, and a supervisor-run batch's calls.
    pub(crate) hold: bool,
    /// Where the upstream's notifications about the call go (as far as `relay` asks), while
    /// someone listens.
    pub(crate) notices: Option<mpsc::UnboundedSender<Value>>,
}

impl Hangar {
    /// A front-door call run on its own, so that it may outlive the request that started it (a
    /// call held for its client's answer): judged, admitted and recorded as any call, with the
    /// front door's upstream words.
    pub(crate) async fn call_on_its_own(self: Arc<Self>, caller: Caller, call: CallRequest) -> Outcome {
        let access = self.access.reading().clone();
        let view = match admit_caller(&access, &caller) {
            Ok(view) => view,
            Err(refused) => return Outcome::Err(refused),
        };
        let decide = Decision::by(&caller, &view, &self.shared.journal, &access.audit);
        let called = self.pipeline(&decide, call).await;
        let answer = called.map(Reply::Called).map_err(|err| self.upstream_words(err, true));
        decide.finish(&answer);
        match answer {
            Ok(reply) => Outcome::Ok(reply),
            Err(error) => Outcome::Err(error),
        }
    }

    /// The hangar itself, for work that outlives the request (a task's run, a held call's
    /// expiry); gone only once the hangar is being dropped at shutdown.
    pub(crate) fn owned(&self) -> Result<Arc<Hangar>, IpcError> {
        self.me.upgrade().ok_or_else(IpcError::shutting_down)
    }

    /// A call the supervisor makes on `caller`'s behalf (a task's run, a batch's call): judged,
    /// admitted and recorded as any call of theirs, and answered in the words its stance says.
    pub(crate) async fn call_as(&self, caller: &Caller, call: CallRequest) -> Result<Value, IpcError> {
        let access = self.access.reading().clone();
        let view = admit_caller(&access, caller)?;
        if self.shared.shutting_down.load(Ordering::SeqCst) {
            return Err(IpcError::shutting_down());
        }
        let decide = Decision::by(caller, &view, &self.shared.journal, &access.audit);
        let answer = self.one_call(&decide, call).await.map(Reply::Called);
        decide.finish(&answer);
        match answer? {
            Reply::Called(result) => Ok(result),
            _ => Err(IpcError::new(ErrorKind::Internal, "the call answered something else")),
        }
    }

    /// [`Request::Call`]: a batch, or a call that may become a task, goes its own way; any
    /// other call is made here ([`Hangar::one_call`]).
    pub(crate) async fn call_spec(
        &self,
        decide: &Decision<'_>,
        spec: CallSpec,
        notices: Option<mpsc::UnboundedSender<Value>>,
    ) -> Result<Reply, IpcError> {
        let CallSpec { called, stance, relay, trace, param_headers, extra, subject_token, unchecked_session: _ } = spec;
        // The token the caller came with, for the servers that exchange it: this call's runs
        // (a task's included) and no one else's.
        if let Some(subject) = subject_token {
            self.shared.subjects.offer(&decide.caller().identity, subject);
        }
        let (target, arguments, timeout_ms) = match called {
            Called::Batch(batch) => {
                let batch = park::BatchRequest { batch, trace, extra, relay, asks: stance.asks };
                return match stance.tasks {
                    Some(tasks) => self.task_batch(decide.caller(), batch, tasks.shortcut_ms, notices).await,
                    None => self.held_batch(decide.caller(), batch, notices).await,
                };
            }
            Called::One { target, arguments, timeout_ms } => (target, arguments, timeout_ms),
        };
        let hold = stance.era == CallEra::Modern;
        let call =
            CallRequest { target, arguments, timeout_ms, relay, extra, trace, param_headers, stance, hold, notices };
        if let Some(tasks) = call.stance.tasks {
            return self.task_call(decide.caller(), decide.view(), call, tasks.shortcut_ms).await;
        }
        self.one_call(decide, call).await.map(Reply::Called)
    }

    /// One call, made now: held for its client's answer when it may be (see `hold`),
    /// its failure in the words of the surface it came through.
    pub(crate) async fn one_call(&self, decide: &Decision<'_>, call: CallRequest) -> Result<Value, IpcError> {
        let to_front_door = call.stance.era != CallEra::Hangar || matches!(call.target, Target::Exposed { .. });
        let stance = call.stance.clone();
        let called = match call.hold {
            true => self.held_or_called(decide, call).await,
            false => self.pipeline(decide, call).await,
        };
        let called = called.or_else(|err| self.ask_to_connect(decide.caller(), &stance, err));
        if let Err(err) = &called {
            self.await_upstream_elicitations(decide.caller(), &stance, err);
        }
        called.map_err(|err| self.upstream_words(err, to_front_door))
    }

    /// The pipeline of one call: resolved, judged, admitted under the limits, then run. With
    /// span export on, all of it is the admission span (a child of the caller's trace), whose
    /// context the upstream's request carries on; with it off, the trace goes on as it came.
    async fn pipeline(&self, decide: &Decision<'_>, call: CallRequest) -> Result<Value, IpcError> {
        let called = self.traced_stages(decide, call).await;
        let noted = Noted::Call { failed: called.is_err() };
        self.calls.traffic.note(&decide.caller().identity, decide.view().profile(), noted);
        called
    }

    /// [`Hangar::pipeline`]'s stages within the admission span, when spans are exported.
    async fn traced_stages(&self, decide: &Decision<'_>, call: CallRequest) -> Result<Value, IpcError> {
        let Some(telemetry) = &self.shared.telemetry else {
            return self.stages(decide, call, &mut None).await;
        };
        let mut span = telemetry.span(spans::ADMISSION, Kind::Internal, call.trace.as_ref());
        span.set(spans::IDENTITY, decide.caller().identity.clone());
        let mut admitted = None;
        let call = CallRequest { trace: Some(span.context()), ..call };
        let result = self.stages(decide, call, &mut admitted).await;
        if let Some((server, tool)) = admitted {
            span.set(spans::MCP_SERVER, server);
            span.set(spans::TOOL, tool);
        }
        span.set(spans::OUTCOME, outcome(result.as_ref().map_err(|err| err.kind)));
        span.end();
        result
    }

    /// [`Hangar::pipeline`]'s stages, in order; `admitted` learns the server and tool once they
    /// are known (for the span).
    async fn stages(
        &self,
        decide: &Decision<'_>,
        call: CallRequest,
        admitted: &mut Option<(String, String)>,
    ) -> Result<Value, IpcError> {
        // The trace as received names the call in its audit entry.
        if let Some(trace) = &call.trace {
            decide.trace(trace.trace_id_hex());
        }
        let found = self.resolve_target(decide.view(), &call.target).await;
        let judged = judge::call(decide, found, &call.arguments)?;
        let (server, tool) = (judged.server, judged.tool);
        // A call a rule asks a person to approve waits for the decision before admission.
        let approval = match judged.approve {
            Some(verdict) => Some(self.await_approval(decide, (&server, &tool, &call.arguments), verdict).await?),
            None => None,
        };
        let answer = self.admitted_stages(decide, (server, tool), call, admitted).await;
        if let Some(id) = approval {
            let outcome = match &answer {
                Ok(result) if result.get("isError").and_then(Value::as_bool) == Some(true) => "is_error",
                Ok(_) => "ok",
                Err(err) => err.kind.as_str(),
            };
            self.calls.approvals.finish(&id, outcome);
        }
        answer
    }

    /// The stages after judgement: the caller's instance, admission under the limits and the
    /// caller's quotas, the upstream's answer and its redaction.
    async fn admitted_stages(
        &self,
        decide: &Decision<'_>,
        (server, tool): (Arc<crate::server::Server>, String),
        call: CallRequest,
        admitted: &mut Option<(String, String)>,
    ) -> Result<Value, IpcError> {
        // An isolated server's call goes to the caller's own instance (`server/instances.rs`).
        let session = call.stance.cancel_by.as_ref().map(|by| by.session.as_str());
        let server = server.serving(&decide.caller().identity, session)?;
        if self.shared.telemetry.is_some() {
            *admitted = Some((server.id().to_owned(), tool.clone()));
        }
        let _permit = self.admit_call(&server, &tool, &call)?;
        // After the limits: a call they refuse spends none of the caller's quota.
        self.admit_quotas(decide.view(), &decide.caller().identity, &server, &tool).await?;
        // In flight from here to its answer (`GET /api/calls`).
        let _in_flight = self.calls.in_flight.register(server.id(), &tool, &decide.caller().identity);
        let mut answer = run::upstream(&server, &tool, call, &decide.caller().identity).await?;
        // What comes back is kept clean of secrets (`redaction:`) before any surface sees it.
        let access = self.access.reading().clone();
        decide.redact(&access.redaction, server.id(), &mut answer)?;
        Ok(answer)
    }
}
