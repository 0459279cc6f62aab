//! The legacy era (2025-11-25 and earlier): `initialize`, then requests in a session.
//!
//! Sessions are stateless (see [`super::session`]): any API instance accepts any id it could
//! have minted, so a client keeps working across restarts and replicas.

use axum::http::{HeaderMap, StatusCode};
use hangar_core::echo::bounded;
use serde_json::{Value, json};

use super::errors::{RpcError, SESSION_NOT_FOUND};
use super::headers::single;
use super::id::{Id, Incoming};
use super::message::{self, Message};
use super::methods::{self, INSTRUCTIONS};
use super::reply::{McpReply, SESSION_HEADER};
use super::{front_door, session, stream};
use crate::app::AppState;

pub const LEGACY_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// What `initialize` answers when the client asks for a version we do not speak.
pub const LATEST: &str = "2025-11-25";

pub async fn handle(app: &AppState, headers: &HeaderMap, mut body: Incoming) -> McpReply {
    let bad = StatusCode::BAD_REQUEST;
    let raw_token = body.progress_token.take();
    let message = match message::parse(body) {
        Ok(message) => message,
        Err(invalid) => return McpReply::error(bad, &invalid.id, &invalid.error),
    };
    let id = match &message {
        Message::Request { id, .. } => id.clone(),
        _ => Id::null(),
    };
    if let Ok(Some(version)) = single(headers, "MCP-Protocol-Version")
        && !LEGACY_VERSIONS.contains(&version.as_str())
    {
        let err =
            RpcError::invalid_request(format!("Bad Request: unsupported MCP-Protocol-Version `{}`", bounded(&version)));
        return McpReply::error(bad, &id, &err);
    }
    match message {
        Message::Request { id, method, params } if method == "initialize" => {
            let mut capabilities = front_door::capabilities(&app.supervisor).await;
            // Legacy resource subscriptions are routed to the upstream that has the resource.
            if let Some(resources) = capabilities.get_mut("resources") {
                resources["subscribe"] = json!(true);
            }
            initialize(&id, params.as_ref(), &capabilities)
        }
        message => {
            if let Err(reply) = check_session(headers, &id) {
                return reply;
            }
            match message {
                Message::Request { id, method, params } => {
                    if method == "tools/call"
                        && stream::accepts_event_stream(headers)
                        && let Some(wanted) = stream::Wanted::from_params(params.as_ref(), raw_token)
                    {
                        match stream::front_door_call(app, &id, params.clone(), wanted, to_legacy).await {
                            Ok(Some(reply)) => return reply,
                            Ok(None) => {}
                            Err(err) => return McpReply::error(StatusCode::OK, &id, &err),
                        }
                    }
                    dispatch(app, &id, &method, params).await
                }
                Message::Notification { .. } | Message::Response => McpReply::accepted(),
            }
        }
    }
}

/// Negotiates: the client's version if we speak it, else our latest; mints the session.
pub fn initialize(id: &Id, params: Option<&Value>, capabilities: &Value) -> McpReply {
    let requested = params.and_then(|p| p.get("protocolVersion")).and_then(Value::as_str);
    let version = requested.filter(|v| LEGACY_VERSIONS.contains(v)).unwrap_or(LATEST);
    let result = json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": methods::server_info(),
        "instructions": INSTRUCTIONS,
    });
    let mut reply = McpReply::result(id, result);
    reply.session_id = Some(session::mint(version));
    reply
}

/// A request without a session is a bad request; one with an id we would never mint is an
/// unknown session (404, so the client starts over with `initialize`).
pub fn check_session(headers: &HeaderMap, id: &Id) -> Result<(), McpReply> {
    match single(headers, SESSION_HEADER) {
        Ok(None) => Err(McpReply::error(
            StatusCode::BAD_REQUEST,
            id,
            &RpcError::invalid_request(
                "Bad Request: missing session (no Mcp-Session-Id header); send initialize first",
            ),
        )),
        Ok(Some(session)) if session::parse(&session).is_some() => Ok(()),
        _ => Err(McpReply::error(StatusCode::NOT_FOUND, id, &RpcError::new(SESSION_NOT_FOUND, "Session not found"))),
    }
}

async fn dispatch(app: &AppState, id: &Id, method: &str, params: Option<Value>) -> McpReply {
    let result = match method {
        "ping" => Ok(json!({})),
        _ => match methods::shared(app, method, params).await {
            Some(result) => result.map(to_legacy),
            None => Err(RpcError::method_not_found(method)),
        },
    };
    match result {
        Ok(result) => McpReply::result(id, result),
        Err(err) => McpReply::error(StatusCode::OK, id, &err),
    }
}

/// A modern upstream's result, bridged for a legacy client: without the 2026-07-28 fields.
fn to_legacy(mut result: Value) -> Value {
    if let Value::Object(map) = &mut result {
        for key in ["resultType", "ttlMs", "cacheScope"] {
            map.remove(key);
        }
        if let Some(Value::Object(meta)) = map.get_mut("_meta") {
            meta.remove("io.modelcontextprotocol/serverInfo");
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
