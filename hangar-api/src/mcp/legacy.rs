//! The legacy era (2025-11-25 and earlier): `initialize`, then requests in a session.
//!
//! Sessions are kept by the supervisor (see [`super::session`]): any API instance accepts any
//! live session, and none accepts one that ended or expired. A request in a session costs one
//! round trip to the supervisor, which also carries what the request changes in it (its log
//! level, its resource subscriptions). A front-door call of an upstream's tool, the request a
//! session makes most, has its session checked by the call itself (`relay.rs`); any other
//! request is answered after it.

use axum::http::{HeaderMap, StatusCode};
use hangar_core::echo::bounded;
use hangar_core::ipc::SessionState;
use hangar_core::jsonrpc::{self, Message, RpcError};
use hangar_core::mcp::{
    HEADER_PROTOCOL_VERSION, HEADER_SESSION_ID, LATEST_LEGACY_REVISION, LEGACY_REVISIONS, META_SERVER_INFO,
};
use hangar_core::session_meta;
use serde_json::{Value, json};

use super::about::{INSTRUCTIONS, server_info};
use super::dispatch::{self, Request};
use super::era::Era;
use super::errors::session_not_found;
use super::headers::single;
use super::id::{Id, Incoming};
use super::params::Wanted;
use super::reply::McpReply;
use super::{front_door, relay, session, stream};
use crate::state::Calling;

/// What only a session serves (beyond `initialize`); 2026-07-28 removed them.
const OWN_METHODS: [&str; 4] = ["ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"];

/// Results lose the 2026-07-28 fields; every error is carried by a 200.
static LEGACY: Era =
    Era { own_methods: &OWN_METHODS, finish: to_legacy, error_status: |_| StatusCode::OK, mirrors_params: false };

pub async fn handle(app: &Calling, headers: &HeaderMap, body: Incoming) -> McpReply {
    let bad = StatusCode::BAD_REQUEST;
    let message = match jsonrpc::classify(body.body, body.id) {
        Ok(message) => message,
        Err(invalid) => return McpReply::error(bad, &invalid.id, &invalid.error),
    };
    let id = match &message {
        Message::Request { id, .. } => id.clone(),
        _ => Id::null(),
    };
    if let Ok(Some(version)) = single(headers, HEADER_PROTOCOL_VERSION)
        && !LEGACY_REVISIONS.contains(&version.as_str())
    {
        let err =
            RpcError::invalid_request(format!("Bad Request: unsupported MCP-Protocol-Version `{}`", bounded(&version)));
        return McpReply::error(bad, &id, &err);
    }
    if let Message::Request { id, method, params } = &message
        && method == "initialize"
    {
        return initialize(app, id, params.as_ref()).await;
    }
    let change = match &message {
        Message::Request { method, params, .. } => session::change(method, params.as_ref()),
        _ => None,
    };
    let session = match session_header(headers, &id) {
        Ok(session) => session,
        Err(reply) => return reply,
    };
    let by_the_call = match &message {
        Message::Request { method, params, .. } => {
            change.is_none() && checked_by_the_call(headers, method, params.as_ref())
        }
        _ => false,
    };
    if by_the_call && let Message::Request { id, method, params } = message {
        let progress_token = body.progress_token;
        let request = Request { id, method, params, progress_token, session: Some(session), session_unchecked: true };
        return dispatch::dispatch(app, headers, &LEGACY, request).await;
    }
    let state = match session::check(app, &session, change).await {
        Ok(state) => state,
        Err((status, err)) => return McpReply::error(status, &id, &err),
    };
    match message {
        Message::Request { id, method, params } => {
            let progress_token = body.progress_token;
            let request =
                Request { id, method, params, progress_token, session: Some(session), session_unchecked: false };
            in_session(app, headers, &state, request).await
        }
        message @ (Message::Notification { .. } | Message::Response { .. }) => {
            relay::from_client(&app.supervisor, &session, message).await;
            McpReply::accepted()
        }
    }
}

/// Whether a request's session is checked by the supervisor with its call: a front-door call of
/// an upstream's tool (`relay.rs`) that does not start an event stream at once (one would
/// answer 200 before the session is known to be live, and an unknown one must be a 404).
fn checked_by_the_call(headers: &HeaderMap, method: &str, params: Option<&Value>) -> bool {
    let name = params.and_then(|p| p.get("name")).and_then(Value::as_str);
    method == "tools/call"
        && name.is_some_and(|name| front_door::route(name) == front_door::Route::Exposed)
        && !(stream::accepts_event_stream(headers) && Wanted::from_params(params, None).is_some())
}

/// A request in a live session: a `tools/call` hears the upstream's log lines at the session's
/// level; a resource subscription the upstream cannot take itself is still the session's (the
/// supervisor hands it the upstream's updates).
async fn in_session(app: &Calling, headers: &HeaderMap, state: &SessionState, mut request: Request) -> McpReply {
    // What the client said at `initialize` it can be asked (sampling, elicitation, roots) and
    // whether it shows MCP Apps, declared to the upstream for this call as a 2026-07-28 client
    // would, with the session's log level.
    if request.method == "tools/call" && matches!(request.params, Some(Value::Object(_))) {
        session_meta::carry(state, &mut request.params);
    }
    if matches!(request.method.as_str(), "resources/subscribe" | "resources/unsubscribe") {
        let subscribed = (request.method == "resources/subscribe")
            .then(|| request.params.as_ref().and_then(|p| p.get("uri")).and_then(Value::as_str).map(str::to_owned))
            .flatten();
        let reply = session::subscription_kept(dispatch::dispatch(app, headers, &LEGACY, request).await);
        if let Some(uri) = subscribed
            && reply.body.as_ref().is_some_and(|answer| answer.outcome.is_ok())
            && let Ok(Some(session_id)) = single(headers, HEADER_SESSION_ID)
        {
            session::bridge_subscription(app, &session_id, uri).await;
        }
        return reply;
    }
    dispatch::dispatch(app, headers, &LEGACY, request).await
}

/// The `initialize` answer: the client's version if we speak it, else our latest.
pub(super) async fn negotiate(app: &Calling, params: Option<&Value>) -> (&'static str, Value) {
    let mut capabilities = front_door::capabilities(&app.supervisor).await;
    // Legacy resource subscriptions are routed to the upstream that has the resource.
    if let Some(resources) = capabilities.get_mut("resources") {
        resources["subscribe"] = json!(true);
    }
    let requested = params.and_then(|p| p.get("protocolVersion")).and_then(Value::as_str);
    let version = LEGACY_REVISIONS.into_iter().find(|v| Some(*v) == requested).unwrap_or(LATEST_LEGACY_REVISION);
    let result = json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    });
    (version, result)
}

/// Negotiates and opens the session at the supervisor.
async fn initialize(app: &Calling, id: &Id, params: Option<&Value>) -> McpReply {
    let (version, result) = negotiate(app, params).await;
    let session_id = session::mint(version);
    if let Err(err) = app
        .supervisor
        .session_open(&session_id, version, session::client_capabilities(params), session::client_info(params))
        .await
    {
        return McpReply::error(session::failure_status(&err), id, &session::open_failure(err));
    }
    let mut reply = McpReply::result(id, result);
    reply.session_id = Some(session_id);
    reply
}

/// The request's session id. A request without one is a bad request; one in a shape this
/// hangar never mints is an unknown session (404, so the client starts over with
/// `initialize`), as is one the supervisor does not know (ended, expired, another identity's).
fn session_header(headers: &HeaderMap, id: &Id) -> Result<String, McpReply> {
    match single(headers, HEADER_SESSION_ID) {
        Ok(None) => Err(McpReply::error(
            StatusCode::BAD_REQUEST,
            id,
            &RpcError::invalid_request(
                "Bad Request: missing session (no Mcp-Session-Id header); send initialize first",
            ),
        )),
        Ok(Some(session)) if session::parse(&session).is_some() => Ok(session),
        _ => Err(McpReply::error(StatusCode::NOT_FOUND, id, &session_not_found())),
    }
}

/// A modern upstream's result, bridged for a legacy client: without the 2026-07-28 fields.
fn to_legacy(_method: &str, mut result: Value) -> Value {
    if let Value::Object(map) = &mut result {
        for key in ["resultType", "ttlMs", "cacheScope"] {
            map.remove(key);
        }
        if let Some(Value::Object(meta)) = map.get_mut("_meta") {
            meta.remove(META_SERVER_INFO);
        }
        if map.get("_meta").and_then(Value::as_object).is_some_and(serde_json::Map::is_empty) {
            map.remove("_meta");
        }
    }
    result
}

#[cfg(test)]
#[path = "legacy_tests.rs"]
mod tests;
