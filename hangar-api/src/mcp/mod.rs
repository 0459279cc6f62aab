//! MCP over Streamable HTTP at `/mcp`, hand-written JSON-RPC, both eras on one endpoint.
//!
//! This file does the HTTP part (content negotiation, body parsing; the cross-site guard in
//! `crate::guard` has already run) and picks the era per request: [`modern`] (2026-07-28,
//! stateless) or [`legacy`] (sessions). Each runs its own checks, then hands the request to the
//! one [`dispatch`]er with its [`era::Era`] (what its results and errors look like). The
//! JSON-RPC and MCP vocabulary (codes, revisions, `_meta` keys, headers) is `hangar_core`'s.

mod about;
mod apps;
mod args;
mod batch;
mod custom_headers;
mod dispatch;
mod era;
mod errors;
mod front_door;
mod headers;
mod id;
mod legacy;
mod modern;
mod old_sse;
mod params;
pub mod refusal;
mod relay;
mod relay_batch;
mod reply;
mod session;
mod stance;
mod stream;
mod subscriptions;
mod tasks;
mod tools;
mod traced;
mod way;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::header::ACCEPT;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{MethodRouter, post};
use hangar_core::ipc::ErrorKind;
use hangar_core::jsonrpc::RpcError;
use hangar_core::mcp::HEADER_SESSION_ID;
use serde_json::Value;

use self::errors::session_not_found;
use self::reply::McpReply;
use crate::state::{AppState, Calling};

pub fn routes() -> Router<AppState> {
    let endpoint =
        || -> MethodRouter<AppState> { post(post_mcp).get(get_mcp).delete(delete_mcp).fallback(other_method) };
    Router::new().route("/mcp", endpoint()).route("/mcp/", endpoint()).merge(old_sse::routes())
}

async fn post_mcp(app: Calling, headers: HeaderMap, body: Result<Bytes, BytesRejection>) -> McpReply {
    // Content-Type: application/json is already required by the cross-site guard.
    if !accepts_json(&headers) {
        let err = RpcError::invalid_request("Not Acceptable: Accept must allow application/json or text/event-stream");
        return McpReply::error(StatusCode::NOT_ACCEPTABLE, &Value::Null, &err);
    }
    let bytes = match body {
        Ok(bytes) => bytes,
        // Oversized bodies never get here: `body::bounded_body` answered them already.
        Err(rejection) => {
            let err = RpcError::parse_error(rejection.body_text());
            return McpReply::error(StatusCode::BAD_REQUEST, &Value::Null, &err);
        }
    };
    let incoming = match id::Incoming::decode(&bytes) {
        Ok(incoming) => incoming,
        Err(err) => return McpReply::error(StatusCode::BAD_REQUEST, &Value::Null, &RpcError::parse_error(err)),
    };
    if modern::is_modern(&headers, &incoming.body) {
        modern::handle(&app, &headers, incoming).await
    } else {
        legacy::handle(&app, &headers, incoming).await
    }
}

/// A legacy session's server-to-client stream (`notifications/tools/list_changed`, and what the
/// supervisor holds for the session: unsolicited upstream log lines at its level, updates of
/// resources it subscribed to); 2026-07-28 has none (`subscriptions/listen` replaces it), so a
/// GET without a session is not allowed.
async fn get_mcp(app: Calling, headers: HeaderMap) -> McpReply {
    match headers::single(&headers, HEADER_SESSION_ID) {
        Ok(Some(id)) if session::parse(&id).is_some() => match session::check(&app, &id, None).await {
            Ok(_) => {
                let front_door = front_door::enabled(&app.supervisor).await;
                subscriptions::legacy_stream(&app, id, front_door)
            }
            Err((status, err)) => McpReply::error(status, &Value::Null, &err),
        },
        Ok(Some(_)) => McpReply::error(StatusCode::NOT_FOUND, &Value::Null, &session_not_found()),
        _ => McpReply::method_not_allowed(
            "Method Not Allowed: GET opens a legacy session's stream; POST JSON-RPC messages",
        ),
    }
}

/// Ending a legacy session, for every API instance: afterwards its id is unknown (404).
async fn delete_mcp(app: Calling, headers: HeaderMap) -> McpReply {
    match headers::single(&headers, HEADER_SESSION_ID) {
        Ok(None) => McpReply::method_not_allowed("Method Not Allowed: there is no session to end"),
        Ok(Some(id)) if session::parse(&id).is_some() => match app.supervisor.session_end(&id).await {
            Ok(()) => McpReply::ok_empty(),
            Err(err) if err.kind == ErrorKind::NotFound => {
                McpReply::error(StatusCode::NOT_FOUND, &Value::Null, &session_not_found())
            }
            Err(err) => McpReply::error(session::failure_status(&err), &Value::Null, &RpcError::internal(err.message)),
        },
        _ => McpReply::error(StatusCode::NOT_FOUND, &Value::Null, &session_not_found()),
    }
}

async fn other_method() -> McpReply {
    McpReply::method_not_allowed("Method Not Allowed: POST JSON-RPC messages")
}

/// A missing `Accept` accepts anything (RFC 9110); otherwise one of its media ranges must cover
/// JSON or an event stream.
fn accepts_json(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all(ACCEPT).iter().peekable();
    if values.peek().is_none() {
        return true;
    }
    values.filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(|range| {
        let essence = range.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        matches!(essence.as_str(), "application/json" | "text/event-stream" | "*/*" | "application/*")
    })
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
