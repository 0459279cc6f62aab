//! The legacy era (2025-11-25 and earlier): `initialize`, then requests in a session.
//!
//! Sessions are stateless (see [`super::session`]): any API instance accepts any id it could
//! have minted, so a client keeps working across restarts and replicas.

use axum::http::{HeaderMap, StatusCode};
use hangar_core::echo::bounded;
use hangar_core::jsonrpc::{self, Message, RpcError};
use hangar_core::mcp::{
    HEADER_PROTOCOL_VERSION, HEADER_SESSION_ID, LATEST_LEGACY_REVISION, LEGACY_REVISIONS, META_SERVER_INFO,
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
static LEGACY: Era = Era { own_methods: &OWN_METHODS, finish: to_legacy, error_status: |_| StatusCode::OK };

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
    let session = match check_session(headers, &id) {
        Ok(session) => session,
        Err(reply) => return reply,
    };
    match message {
        Message::Request { id, method, params } => {
            let request = Request { id, method, params, progress_token: body.progress_token, session: Some(session) };
            dispatch::dispatch(app, headers, &LEGACY, request).await
        }
        message @ (Message::Notification { .. } | Message::Response { .. }) => {
            relay::from_client(&app.supervisor, &session, message).await;
            McpReply::accepted()
        }
    }
}

/// Negotiates: the client's version if we speak it, else our latest; mints the session.
async fn initialize(app: &Calling, id: &Id, params: Option<&Value>) -> McpReply {
    let mut capabilities = front_door::capabilities(&app.supervisor).await;
    // Legacy resource subscriptions are routed to the upstream that has the resource.
    if let Some(resources) = capabilities.get_mut("resources") {
        resources["subscribe"] = json!(true);
    }
    let requested = params.and_then(|p| p.get("protocolVersion")).and_then(Value::as_str);
    let version = requested.filter(|v| LEGACY_REVISIONS.contains(v)).unwrap_or(LATEST_LEGACY_REVISION);
    let result = json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    });
    let mut reply = McpReply::result(id, result);
    reply.session_id = Some(session::mint(version));
    reply
}

/// A request without a session is a bad request; one with an id we would never mint is an
/// unknown session (404, so the client starts over with `initialize`).
fn check_session(headers: &HeaderMap, id: &Id) -> Result<String, McpReply> {
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
