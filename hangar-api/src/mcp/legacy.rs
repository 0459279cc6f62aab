//! The legacy era (2025-11-25 and earlier): `initialize`, then requests in a session.
//!
//! Sessions are kept by the supervisor (see [`super::session`]): any API instance accepts any
//! live session, and none accepts one that ended or expired. Each request in a session costs one
//! round trip to the supervisor, which also carries what the request changes in it (its log
//! level, its resource subscriptions).

use axum::http::{HeaderMap, StatusCode};
use hangar_core::echo::bounded;
use hangar_core::ipc::{SessionChange, SessionState};
use hangar_core::jsonrpc::{self, Message, RpcError};
use hangar_core::mcp::{
    CLIENT_REQUESTS, HEADER_PROTOCOL_VERSION, HEADER_SESSION_ID, LATEST_LEGACY_REVISION, LEGACY_REVISIONS,
    META_CLIENT_CAPABILITIES, META_LOG_LEVEL, META_SERVER_INFO,
};
use serde_json::{Value, json};

use super::about::{INSTRUCTIONS, server_info};
use super::dispatch::{self, Request};
use super::era::Era;
use super::errors::session_not_found;
use super::headers::single;
use super::id::{Id, Incoming};
use super::reply::McpReply;
use super::{front_door, relay, session};
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
    let (session, state) = match check_session(app, headers, &id, change).await {
        Ok(found) => found,
        Err(reply) => return reply,
    };
    match message {
        Message::Request { id, method, params } => {
            let request = Request { id, method, params, progress_token: body.progress_token, session: Some(session) };
            in_session(app, headers, &state, request).await
        }
        message @ (Message::Notification { .. } | Message::Response { .. }) => {
            relay::from_client(&app.supervisor, &session, message).await;
            McpReply::accepted()
        }
    }
}

/// A request in a live session: a `tools/call` hears the upstream's log lines at the session's
/// level; a resource subscription the upstream cannot take itself is still the session's (the
/// supervisor hands it the upstream's updates).
async fn in_session(app: &Calling, headers: &HeaderMap, state: &SessionState, mut request: Request) -> McpReply {
    if request.method == "tools/call"
        && let Some(Value::Object(params)) = &mut request.params
        && let Value::Object(meta) = params.entry("_meta").or_insert_with(|| json!({}))
    {
        if let Some(level) = &state.log_level {
            meta.entry(META_LOG_LEVEL).or_insert_with(|| json!(level));
        }
        // What the client said at `initialize` it can be asked (sampling, elicitation, roots)
        // and whether it shows MCP Apps, declared to the upstream for this call as a 2026-07-28
        // client would (`relay.rs`, `apps.rs`).
        meta.entry(META_CLIENT_CAPABILITIES).or_insert_with(|| declared_upstream(&state.capabilities));
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

/// The part of a client's `initialize` capabilities an upstream hears with its calls: what it
/// can be asked, and the MCP Apps extension if it declared it (the hangar's own extensions,
/// tasks, stay the hangar's).
fn declared_upstream(capabilities: &Value) -> Value {
    let askable = CLIENT_REQUESTS
        .iter()
        .filter_map(|(_, capability)| Some(((*capability).to_owned(), capabilities.get(*capability)?.clone())));
    let mut declared: serde_json::Map<String, Value> = askable.collect();
    if let Some(extensions) = super::apps::declared(capabilities) {
        declared.insert("extensions".into(), extensions);
    }
    Value::Object(declared)
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

/// A request without a session is a bad request; one whose session the supervisor does not
/// know (ended, expired, never minted, another identity's) is an unknown session (404, so the
/// client starts over with `initialize`).
async fn check_session(
    app: &Calling,
    headers: &HeaderMap,
    id: &Id,
    change: Option<SessionChange>,
) -> Result<(String, SessionState), McpReply> {
    let session = match single(headers, HEADER_SESSION_ID) {
        Ok(None) => {
            return Err(McpReply::error(
                StatusCode::BAD_REQUEST,
                id,
                &RpcError::invalid_request(
                    "Bad Request: missing session (no Mcp-Session-Id header); send initialize first",
                ),
            ));
        }
        Ok(Some(session)) if session::parse(&session).is_some() => session,
        _ => return Err(McpReply::error(StatusCode::NOT_FOUND, id, &session_not_found())),
    };
    let state =
        session::check(app, &session, change).await.map_err(|(status, err)| McpReply::error(status, id, &err))?;
    Ok((session, state))
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
