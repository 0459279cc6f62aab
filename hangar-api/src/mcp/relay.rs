//! A legacy session's front-door `tools/call`, with requests both ways: the client may cancel it
//! by its own request id from any API instance (`notifications/cancelled`), and an upstream's
//! `input_required` (2026-07-28 MRTR) reaches the client as server-to-client requests on the
//! call's event stream, whose answers (POSTed to any API instance, routed by the supervisor)
//! go back to the upstream as the retry's `inputResponses`.

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use hangar_core::echo::bounded;
use hangar_core::ipc::{CallSpec, Called, ErrorKind, IpcError, Target};
use hangar_core::jsonrpc::{Message, RpcError};
use hangar_core::mcp::{
    CLIENT_REQUESTS, INPUT_REQUESTS, INPUT_RESPONSES, META_CLIENT_CAPABILITIES, NOTIFICATION_CANCELLED, REQUEST_STATE,
    RESULT_TYPE_INPUT_REQUIRED, declares, not_declared,
};
use hangar_core::session_meta::{self, SESSION_NOTICE};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};

use super::era::Era;
use super::errors::session_not_found;
use super::front_door::{self, upstream_failure};
use super::id::Id;
use super::params::{ToolCall, Wanted};
use super::reply::{Answer, McpReply, sse_event};
use super::{stance, stream};
use crate::random;
use crate::supervisor::AsCaller;

/// How many times one call may come back `input_required` before the hangar gives up on it.
pub(super) const MAX_ROUNDS: usize = 16;
/// A backstop only: the supervisor ends the wait for the client's answer at
/// `tool_access.client_answer_timeout_s` (at most a day), and that error goes to the upstream.
const CLIENT_ANSWER_WAIT: std::time::Duration =
    std::time::Duration::from_secs(hangar_core::config::MAX_CLIENT_ANSWER_TIMEOUT_S as u64 + 60);

/// A front-door call in a legacy session, as far as it has got.
struct LegacyCall {
    supervisor: AsCaller,
    session: String,
    id: Id,
    target: Target,
    arguments: Value,
    params: Map<String, Value>,
    /// What the client asked to hear about the call (the session's log level among it).
    wanted: Option<Wanted>,
    /// The session is checked by the call itself (`legacy::checked_by_the_call`): the
    /// supervisor's first notice says the session's log level, if it set one.
    unchecked: bool,
}

/// How a round of the call ended.
enum Round {
    Done(Result<Value, IpcError>),
    /// The client left (closed the stream, or its POST): dropping the call cancels it upstream.
    Left,
}

impl LegacyCall {
    /// One `tools/call` to the upstream, cancellable by the client's id; the notifications the
    /// client asked for go to it meanwhile, and, when it takes event streams, a legacy
    /// upstream's own requests are asked of it (either starts the event stream).
    async fn round(&mut self, sink: &mut Sink) -> Round {
        let mut relay = self.wanted.as_ref().map(stream::relay).unwrap_or_default();
        relay.asks = sink.streams;
        if self.unchecked {
            // The log lines, if the session wants them: the supervisor knows whether it does.
            relay.logs = sink.streams;
        }
        let extra = (!self.params.is_empty()).then(|| Value::Object(self.params.clone()));
        let stance = stance::legacy(extra.as_ref(), &self.session, &self.id);
        let called = Called::One { target: self.target.clone(), arguments: self.arguments.clone(), timeout_ms: None };
        let unchecked_session = self.unchecked.then(|| self.session.clone());
        let spec = CallSpec { unchecked_session, ..CallSpec::new(called, stance, relay, extra) };
        let supervisor = self.supervisor.clone();
        let (mut notices, reply) = supervisor.call(spec);
        tokio::pin!(reply);
        let outcome = loop {
            let notice = tokio::select! {
                Some(notice) = notices.recv() => notice,
                outcome = &mut reply => break outcome,
                () = sink.gone() => return Round::Left,
            };
            if self.take(sink, notice).await.is_err() {
                return Round::Left;
            }
        };
        while let Ok(notice) = notices.try_recv() {
            let _ = self.take(sink, notice).await;
        }
        Round::Done(outcome)
    }

    /// A notice about the call: what its session carries (the supervisor's first), or one for
    /// the client ([`LegacyCall::pass_on`]).
    async fn take(&mut self, sink: &mut Sink, notice: Value) -> Result<(), ()> {
        if notice.get("method").and_then(Value::as_str) != Some(SESSION_NOTICE) {
            return self.pass_on(sink, notice).await;
        }
        let carried = notice.pointer("/params/_meta").and_then(Value::as_object).cloned().unwrap_or_default();
        if let Value::Object(meta) = self.params.entry("_meta").or_insert_with(|| Value::Object(Map::new())) {
            for (key, value) in carried {
                meta.entry(key).or_insert(value);
            }
        }
        if self.wanted.is_none() {
            let meta = self.params.get("_meta").cloned();
            self.wanted = Wanted::from_params(Some(&json!({"_meta": meta})), None);
        }
        Ok(())
    }

    /// A notice about the call, to the client: a notification it asked for, or an upstream's
    /// own request, asked and answered. `Err` when the client left.
    async fn pass_on(&self, sink: &mut Sink, notice: Value) -> Result<(), ()> {
        let wanted = self.wanted.as_ref();
        let is_ask = notice.get("id").is_some();
        let event = if is_ask { None } else { wanted.and_then(|wanted| stream::rewrite(wanted, notice.clone())) };
        if !is_ask && event.is_none() {
            return Ok(());
        }
        let events = sink.stream().ok_or(())?;
        match event {
            Some(event) => events.send(event).await.map_err(drop),
            None => self.answer_upstream_ask(events, notice).await,
        }
    }

    /// Asks the client what a legacy upstream asked, and gives the upstream its answer (or the
    /// hangar's error when the client could not be asked).
    async fn answer_upstream_ask(&self, events: &mpsc::Sender<Bytes>, ask: Value) -> Result<(), ()> {
        let text = |key: &str| ask.get(key).and_then(Value::as_str).unwrap_or_default();
        let (server, ask_id, method) = (text("mcp_server"), text("id"), text("method"));
        let response = match asked_of(&self.declared().await, method, ask.get("params")) {
            Err(refused) => Err(Asked::Failed(refused)),
            Ok(()) => ask_client(&self.supervisor, &self.session, events, method, ask.get("params")).await,
        };
        let response = match response {
            Ok(response) => response,
            Err(Asked::Left) => return Err(()),
            Err(Asked::Failed(error)) => json!({"error": error.to_json()}),
        };
        if let Err(err) = self.supervisor.answer_upstream(server, ask_id, response).await {
            tracing::debug!(error = %err.message, "a client's answer to an upstream's request did not reach it");
        }
        Ok(())
    }

    /// What the client said it can be asked: the params' `_meta` client capabilities, or, for a
    /// call whose session the supervisor checked, what the session's client declared (asked
    /// now: only an upstream that asks something needs it).
    async fn declared(&self) -> Value {
        let own = declared_in(self.params.get("_meta"));
        if !own.is_null() || !self.unchecked {
            return own;
        }
        match self.supervisor.session_use(&self.session, None).await {
            Ok(state) => session_meta::declared_upstream(&state.capabilities),
            Err(err) => {
                tracing::debug!(kind = err.kind.as_str(), "a session's declared capabilities could not be read");
                Value::Null
            }
        }
    }

    /// The retry after the client answered: its answers and the upstream's state, as asked.
    fn retry_with(&mut self, responses: Map<String, Value>, asked: &Value) {
        self.params.insert(INPUT_RESPONSES.into(), Value::Object(responses));
        match asked.get(REQUEST_STATE) {
            Some(state) => self.params.insert(REQUEST_STATE.into(), state.clone()),
            None => self.params.remove(REQUEST_STATE),
        };
    }
}

/// The client capabilities in a call's `_meta` (`Null` when none).
pub(super) fn declared_in(meta: Option<&Value>) -> Value {
    meta.and_then(|meta| meta.get(META_CLIENT_CAPABILITIES)).cloned().unwrap_or(Value::Null)
}

/// Whether a client that `declared` these capabilities may be asked `method`: a request it did
/// not declare is refused in the words a 2026-07-28 client's would be (`mcp::not_declared`);
/// an unknown method is [`ask_client`]'s to refuse.
pub(super) fn asked_of(declared: &Value, method: &str, params: Option<&Value>) -> Result<(), RpcError> {
    let known = CLIENT_REQUESTS.iter().any(|(known, _)| *known == method);
    if known && !declares(declared, method, params) { Err(not_declared(method)) } else { Ok(()) }
}

/// Whether an upstream's result asks for the client's input first.
pub(super) fn input_required(result: &Value) -> bool {
    result.get("resultType").and_then(Value::as_str) == Some(RESULT_TYPE_INPUT_REQUIRED)
}

/// A legacy session's `tools/call` of an upstream tool (a front-door name). Answered as an event
/// stream once something must reach the client before the end (a notification it asked for, a
/// question for it, if it takes event streams); as plain JSON otherwise. `unchecked`: the
/// session is checked by the call (`legacy::checked_by_the_call`).
pub async fn tools_call(
    supervisor: &AsCaller,
    headers: &HeaderMap,
    (session, unchecked): (&str, bool),
    id: &Id,
    call: ToolCall,
    wanted: Option<Wanted>,
    era: &'static Era,
) -> Result<McpReply, RpcError> {
    // A call whose stream starts at once is resolved first, so that an unknown name is a plain
    // JSON answer; any other is resolved by the supervisor, whose `UnknownTool` is answered
    // the same way before anything was streamed. (The supervisor treats the call, of the legacy
    // era, as the front-door call it is, whatever it targets: an upstream's error words reach
    // this client, as `tool_access.upstream_errors` says.) What the client can be asked is in
    // the params' `_meta`: `legacy::in_session` declared what it said at `initialize`, or the
    // supervisor carries it into the call and the API asks for it if needed (`declared`).
    let target = match wanted {
        Some(_) => front_door::resolve(supervisor, &call.name, None, None).await?,
        None => Target::Exposed { name: call.name },
    };
    let arguments = front_door::upstream_arguments(call.arguments)?;
    let params = match front_door::pass_on(call.extra) {
        Some(Value::Object(params)) => params,
        _ => Map::new(),
    };
    let streams = stream::accepts_event_stream(headers);
    let call = LegacyCall {
        supervisor: supervisor.clone(),
        session: session.to_owned(),
        id: id.clone(),
        target,
        arguments,
        params,
        wanted,
        unchecked,
    };
    let (answer, answered) = oneshot::channel();
    let mut sink = Sink { streams, answer: Some(answer), events: None };
    if call.wanted.is_some() {
        // The client asked to hear about the call: the stream starts at once.
        sink.stream();
    }
    tokio::spawn(run(call, sink, era));
    answered.await.map_err(|_| RpcError::internal("the call ended without an answer"))
}

/// Where the call's answer goes: the POST's plain JSON answer until something must go to the
/// client before the end (a notification, a question), then an event stream.
pub(super) struct Sink {
    /// Whether the client takes event streams (else it is never asked anything).
    pub(super) streams: bool,
    pub(super) answer: Option<oneshot::Sender<McpReply>>,
    pub(super) events: Option<mpsc::Sender<Bytes>>,
}

impl Sink {
    /// The event stream, started (as the POST's answer) if it was not yet; `None` when the
    /// client does not take streams or has left.
    pub(super) fn stream(&mut self) -> Option<&mpsc::Sender<Bytes>> {
        if self.events.is_none() && self.streams {
            let (events, stream) = mpsc::channel(64);
            self.answer.take()?.send(McpReply::events(stream)).ok()?;
            self.events = Some(events);
        }
        self.events.as_ref()
    }

    /// Resolves when the client has gone (closed the stream, or the POST before its answer).
    pub(super) async fn gone(&mut self) {
        match (&self.events, &mut self.answer) {
            (Some(events), _) => events.closed().await,
            (None, Some(answer)) => answer.closed().await,
            (None, None) => std::future::pending().await,
        }
    }

    /// The call's answer, on the stream if it started, else as the POST's JSON answer.
    pub(super) async fn finish(mut self, id: Id, outcome: Result<Value, RpcError>, era: &'static Era) {
        if let Some(events) = self.events.take() {
            let _ = events.send(sse_event(&Answer { id, outcome })).await;
        } else if let Some(answer) = self.answer.take() {
            let reply = match outcome {
                Ok(result) => McpReply::result(&id, result),
                Err(error) => McpReply::error((era.error_status)(&error), &id, &error),
            };
            let _ = answer.send(reply);
        }
    }

    /// The call's session is not live (or not the caller's): a 404 as the POST's answer, so the
    /// client starts over with `initialize` (on a stream, if one started, an error event).
    async fn session_not_found(mut self, id: Id, era: &'static Era) {
        match self.answer.take() {
            Some(answer) => drop(answer.send(McpReply::error(StatusCode::NOT_FOUND, &id, &session_not_found()))),
            None => self.finish(id, Err(session_not_found()), era).await,
        }
    }
}

/// Runs the call to its end: rounds with the upstream, and between them the upstream's questions
/// (`input_required`) asked of the client on the stream, the answers carried back in the retry.
async fn run(mut call: LegacyCall, mut sink: Sink, era: &'static Era) {
    let mut outcome = match call.round(&mut sink).await {
        Round::Done(outcome) => outcome,
        Round::Left => return,
    };
    let mut rounds = 0;
    let outcome = loop {
        match outcome {
            Ok(result) if input_required(&result) && sink.streams => {
                rounds += 1;
                if rounds > MAX_ROUNDS {
                    break Err(RpcError::internal(format!(
                        "the upstream asked for input more than {MAX_ROUNDS} times; the hangar gave up"
                    )));
                }
                let Some(events) = sink.stream() else { return };
                let declared = call.declared().await;
                match ask(&call.supervisor, &call.session, events, &declared, &result).await {
                    Ok(responses) => call.retry_with(responses, &result),
                    Err(Asked::Left) => return,
                    Err(Asked::Failed(err)) => break Err(err),
                }
                outcome = match call.round(&mut sink).await {
                    Round::Done(outcome) => outcome,
                    Round::Left => return,
                };
            }
            Err(err) if err.kind == ErrorKind::SessionNotFound => return sink.session_not_found(call.id, era).await,
            Err(err) if matches!(err.kind, ErrorKind::UnknownTool | ErrorKind::SupervisorUnavailable) => {
                break Err(front_door::refused(err));
            }
            outcome => break outcome.or_else(upstream_failure).map(|result| (era.finish)("tools/call", result)),
        }
    };
    sink.finish(call.id, outcome, era).await;
}

/// Why the client's answers did not come.
pub(super) enum Asked {
    Left,
    Failed(RpcError),
}

/// Sends each of the upstream's questions to the client as a request on the stream, one after
/// another, and waits for each answer (wherever it is POSTed); the answers by the upstream's keys.
pub(super) async fn ask(
    supervisor: &AsCaller,
    session: &str,
    events: &mpsc::Sender<Bytes>,
    declared: &Value,
    asked: &Value,
) -> Result<Map<String, Value>, Asked> {
    let Some(questions) = asked.get(INPUT_REQUESTS).and_then(Value::as_object) else {
        return Err(Asked::Failed(RpcError::internal("the upstream asked for input without `inputRequests`")));
    };
    let mut responses = Map::new();
    for (key, question) in questions {
        let method = question.get("method").and_then(Value::as_str).unwrap_or_default();
        asked_of(declared, method, question.get("params")).map_err(Asked::Failed)?;
        let response = ask_client(supervisor, session, events, method, question.get("params")).await?;
        match response.get("result") {
            Some(result) => responses.insert(key.clone(), result.clone()),
            None => {
                let why = response.pointer("/error/message").and_then(Value::as_str).unwrap_or("no reason given");
                let why = bounded(why);
                return Err(Asked::Failed(RpcError::internal(format!("the client refused `{method}`: {why}"))));
            }
        };
    }
    Ok(responses)
}

/// Sends the client one request (`method`: sampling, elicitation or roots) on the stream and
/// waits for its response message (`result` or `error`), wherever the client POSTs it.
pub(super) async fn ask_client(
    supervisor: &AsCaller,
    session: &str,
    events: &mpsc::Sender<Bytes>,
    method: &str,
    params: Option<&Value>,
) -> Result<Value, Asked> {
    if !CLIENT_REQUESTS.iter().any(|(known, _)| *known == method) {
        let method = bounded(method);
        return Err(Asked::Failed(RpcError::internal(format!("the upstream asked the client an unknown `{method}`"))));
    }
    let request_id = format!("hangar-ask-{}", random::hex(12));
    let (mut registered, mut answer) = supervisor.await_client_answer(session, &request_id);
    // Asked only once the supervisor waits for the answer, so no answer finds nobody.
    let waiting = tokio::select! {
        registered = registered.recv() => registered.is_some(),
        _ = &mut answer => false,
    };
    if !waiting {
        return Err(Asked::Failed(RpcError::internal("the supervisor could not wait for the client's answer")));
    }
    if events.send(sse_event(&client_request(&request_id, method, params))).await.is_err() {
        return Err(Asked::Left);
    }
    let response = tokio::select! {
        response = tokio::time::timeout(CLIENT_ANSWER_WAIT, answer) => response,
        () = events.closed() => return Err(Asked::Left),
    };
    let Ok(response) = response else {
        return Err(Asked::Failed(RpcError::internal(format!("the client did not answer `{method}` in time"))));
    };
    response.map_err(|err| Asked::Failed(RpcError::internal(err.message)))
}

/// Our request `id` to the client. A request without params (`roots/list`) has no `params`
/// member: a client may drop `"params": null` as an invalid message and never answer it.
fn client_request(id: &str, method: &str, params: Option<&Value>) -> Value {
    let mut request = json!({"jsonrpc": "2.0", "id": id, "method": method});
    if let Some(params) = params.filter(|params| !params.is_null()) {
        request["params"] = params.clone();
    }
    request
}

/// What a legacy session's client sends that is not a request: a cancel of one of its calls, or
/// its answer to one of our requests, each handed to the supervisor (the call or the wait may
/// be another API instance's). Anything else is acknowledged and dropped.
pub async fn from_client(supervisor: &AsCaller, session: &str, message: Message<Id>) {
    let outcome = match message {
        Message::Notification { method, params } if method == NOTIFICATION_CANCELLED => {
            let Some(request_id) =
                params.as_ref().and_then(|p| p.get("requestId")).filter(|id| id.is_string() || id.is_number())
            else {
                return;
            };
            supervisor.cancel_client_call(session, request_id.clone()).await.map(drop)
        }
        Message::Response { id, outcome } => {
            let Value::String(request_id) = id.to_value() else { return };
            let response = match outcome {
                Ok(result) => json!({"result": result}),
                Err(error) => json!({"error": error.to_json()}),
            };
            supervisor.client_answer(session, &request_id, response).await.map(drop)
        }
        _ => Ok(()),
    };
    if let Err(err) = outcome {
        tracing::debug!(error = %err.message, "a legacy client's cancel or answer did not reach the supervisor");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_without_params_has_no_params_member() {
        for params in [None, Some(&Value::Null)] {
            let request = client_request("q-1", "roots/list", params);
            assert_eq!(request, json!({"jsonrpc": "2.0", "id": "q-1", "method": "roots/list"}));
        }
        let params = json!({"maxTokens": 1});
        assert_eq!(client_request("q-2", "sampling/createMessage", Some(&params))["params"], params);
    }
}
