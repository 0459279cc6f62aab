//! A legacy session's `hangar_call`, with requests both ways: each call declares the session's
//! client capabilities to its upstream, and the calls' questions (a legacy upstream's own
//! sampling, elicitation or roots request, or a 2026-07-28 upstream's `input_required`) reach
//! the client as server-to-client requests on the call's event stream, their answers carried
//! back to the upstream, as `relay.rs` does for a front-door call in a session. The client may
//! cancel the batch by its own request id from any API instance (each call names it).

use hangar_core::batch::{BatchSpec, CallSpec, with_upstream_blocks};
use hangar_core::ipc::{ErrorKind, IpcError, Relay};
use hangar_core::mcp::{INPUT_RESPONSES, REQUEST_STATE};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};

use super::era::Era;
use super::id::Id;
use super::params::{ToolCall, Wanted};
use super::relay::{self, Asked, MAX_ROUNDS, Sink, input_required};
use super::reply::McpReply;
use super::{stream, tools};
use crate::supervisor::AsCaller;
use axum::http::HeaderMap;
use hangar_core::jsonrpc::RpcError;

/// What a call of the batch needs of its client.
enum ToClient {
    /// An upstream notification about the call (progress, a log line).
    Notice(Value),
    /// A legacy upstream's own request: the client's response message (`result` or `error`).
    AskOne { method: String, params: Option<Value>, answered: oneshot::Sender<Result<Value, Asked>> },
    /// A 2026-07-28 upstream's `input_required`: the client's answers by the upstream's keys.
    AskAll { asked: Value, answered: oneshot::Sender<Result<Map<String, Value>, Asked>> },
}

/// A legacy session's `hangar_call` (its arguments read: `spec`). Answered as an event stream
/// once something must reach the client before the end (a notification it asked for, a
/// question, if it takes event streams); as plain JSON otherwise.
pub async fn hangar_call(
    supervisor: &AsCaller,
    headers: &HeaderMap,
    (session, id): (&str, &Id),
    call: &ToolCall,
    spec: BatchSpec,
    wanted: Option<Wanted>,
    era: &'static Era,
) -> Result<McpReply, RpcError> {
    let streams = stream::accepts_event_stream(headers);
    let mut relay = wanted.as_ref().map(stream::relay).unwrap_or_default();
    relay.asks = streams;
    let batch = Batch {
        supervisor: supervisor.cancellable_by(session, id.to_value()),
        session: session.to_owned(),
        relay,
        extra: tools::batch_extra(&call.extra, true),
        declared: relay::declared_in(call.extra.get("_meta")),
    };
    let (answer, answered) = oneshot::channel();
    let mut sink = Sink { streams, answer: Some(answer), events: None };
    if wanted.is_some() {
        // The client asked to hear about the calls: the stream starts at once.
        sink.stream();
    }
    tokio::spawn(run(batch, spec, sink, wanted, id.clone(), era));
    answered.await.map_err(|_| RpcError::internal("the call ended without an answer"))
}

/// What every call of the batch shares.
#[derive(Clone)]
struct Batch {
    /// Cancellable by the client's request id (each call names it).
    supervisor: AsCaller,
    session: String,
    relay: Relay,
    /// The client's log level and capabilities, for every upstream.
    extra: Option<Value>,
    /// What the client said it can be asked: nothing else is asked of it.
    declared: Value,
}

/// Runs the batch to its end, passing its calls' notifications and questions to the client.
async fn run(batch: Batch, spec: BatchSpec, mut sink: Sink, wanted: Option<Wanted>, id: Id, era: &'static Era) {
    let (to_client, mut from_calls) = mpsc::unbounded_channel();
    let (supervisor, session, declared) = (batch.supervisor.clone(), batch.session.clone(), batch.declared.clone());
    let report = hangar_runtime::batch::run(spec, move |call| call_one(batch.clone(), call, to_client.clone()));
    tokio::pin!(report);
    let mut furthest = stream::Furthest::default();
    let report = loop {
        let message = tokio::select! {
            report = &mut report => break report,
            Some(message) = from_calls.recv() => message,
            () = sink.gone() => return, // dropping the batch cancels its calls
        };
        match message {
            ToClient::Notice(notice) => {
                let event =
                    wanted.as_ref().filter(|_| furthest.passes(&notice)).and_then(|w| stream::rewrite(w, notice));
                if let Some(event) = event
                    && let Some(events) = sink.stream()
                    && events.send(event).await.is_err()
                {
                    return;
                }
            }
            ToClient::AskOne { method, params, answered } => {
                let Some(events) = sink.stream().cloned() else {
                    let _ = answered.send(Err(no_stream()));
                    continue;
                };
                let (supervisor, session) = (supervisor.clone(), session.clone());
                tokio::spawn(async move {
                    let asked = relay::ask_client(&supervisor, &session, &events, &method, params.as_ref()).await;
                    let _ = answered.send(asked);
                });
            }
            ToClient::AskAll { asked, answered } => {
                let Some(events) = sink.stream().cloned() else {
                    let _ = answered.send(Err(no_stream()));
                    continue;
                };
                let (supervisor, session, declared) = (supervisor.clone(), session.clone(), declared.clone());
                tokio::spawn(async move {
                    let _ = answered.send(relay::ask(&supervisor, &session, &events, &declared, &asked).await);
                });
            }
        }
    };
    // Notices that raced the end still go first.
    while let Ok(message) = from_calls.try_recv() {
        if let ToClient::Notice(notice) = message
            && furthest.passes(&notice)
            && let Some(event) = wanted.as_ref().and_then(|w| stream::rewrite(w, notice))
            && let Some(events) = sink.stream()
        {
            let _ = events.send(event).await;
        }
    }
    let result = with_upstream_blocks(report.into_value());
    sink.finish(id, Ok((era.finish)("tools/call", result)), era).await;
}

fn no_stream() -> Asked {
    Asked::Failed(RpcError::internal("the client takes no event stream, so it cannot be asked"))
}

/// One call of the batch: rounds with the upstream, its questions asked of the client between
/// (and, for a legacy upstream's own request, during) them.
async fn call_one(batch: Batch, call: CallSpec, to_client: mpsc::UnboundedSender<ToClient>) -> Result<Value, IpcError> {
    let mut extra = batch.extra.clone().unwrap_or_else(|| json!({}));
    let mut rounds = 0;
    loop {
        let passed = extra.as_object().is_some_and(|e| !e.is_empty()).then(|| extra.clone());
        let target = (call.mcp_server.as_str(), call.tool.as_str());
        let (mut notices, reply) =
            batch.supervisor.call_tool(target, call.arguments.clone(), Some(call.timeout_ms), batch.relay, passed);
        tokio::pin!(reply);
        let outcome = loop {
            tokio::select! {
                Some(notice) = notices.recv() => pass_on(&batch, &to_client, notice).await,
                outcome = &mut reply => break outcome,
            }
        };
        while let Ok(notice) = notices.try_recv() {
            pass_on(&batch, &to_client, notice).await;
        }
        match outcome {
            Ok(result) if input_required(&result) => {
                rounds += 1;
                if rounds > MAX_ROUNDS {
                    let why = format!("the upstream asked for input more than {MAX_ROUNDS} times; the hangar gave up");
                    return Err(IpcError::new(ErrorKind::Internal, why));
                }
                let (answered, answer) = oneshot::channel();
                let _ = to_client.send(ToClient::AskAll { asked: result.clone(), answered });
                let responses = match answer.await {
                    Ok(Ok(responses)) => responses,
                    Ok(Err(Asked::Failed(err))) => return Err(IpcError::new(ErrorKind::Internal, err.message)),
                    Ok(Err(Asked::Left)) | Err(_) => {
                        return Err(IpcError::new(ErrorKind::Internal, "the client left before it answered"));
                    }
                };
                extra[INPUT_RESPONSES] = Value::Object(responses);
                match (result.get(REQUEST_STATE), extra.as_object_mut()) {
                    (Some(state), _) => extra[REQUEST_STATE] = state.clone(),
                    (None, Some(extra)) => drop(extra.remove(REQUEST_STATE)),
                    (None, None) => {}
                }
            }
            outcome => return outcome,
        }
    }
}

/// A notice about one call: a notification goes to the batch's stream; a legacy upstream's own
/// request is asked of the client and its answer (or the hangar's error) goes to the upstream.
async fn pass_on(batch: &Batch, to_client: &mpsc::UnboundedSender<ToClient>, notice: Value) {
    if notice.get("id").is_none() {
        let _ = to_client.send(ToClient::Notice(notice));
        return;
    }
    let text = |key: &str| notice.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let (server, ask_id, method) = (text("mcp_server"), text("id"), text("method"));
    if let Err(refused) = relay::asked_of(&batch.declared, &method, notice.get("params")) {
        let response = json!({"error": refused.to_json()});
        if let Err(err) = batch.supervisor.answer_upstream(&server, &ask_id, response).await {
            tracing::debug!(error = %err.message, "the hangar's answer to an upstream's request did not reach it");
        }
        return;
    }
    let (answered, answer) = oneshot::channel();
    let ask = ToClient::AskOne { method, params: notice.get("params").cloned(), answered };
    let response = match to_client.send(ask).map(|()| answer) {
        Ok(answer) => match answer.await {
            Ok(Ok(response)) => response,
            Ok(Err(Asked::Failed(error))) => json!({"error": error.to_json()}),
            Ok(Err(Asked::Left)) | Err(_) => json!({"error": RpcError::internal("the client left").to_json()}),
        },
        Err(_) => json!({"error": RpcError::internal("the client left").to_json()}),
    };
    if let Err(err) = batch.supervisor.answer_upstream(&server, &ask_id, response).await {
        tracing::debug!(error = %err.message, "a client's answer to an upstream's request did not reach it");
    }
}
