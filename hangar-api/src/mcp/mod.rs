//! MCP over Streamable HTTP at `/mcp`, hand-written JSON-RPC, both eras on one endpoint.
//!
//! This file does the HTTP part (content negotiation, body parsing; the cross-site guard in
//! `crate::guard` has already run) and picks the era per request: [`modern`] (2026-07-28,
//! stateless) or [`legacy`] (sessions). Each runs its own checks, then hands the request to the
//! one [`dispatch`]er with its [`era::Era`] (what its results and errors look like). The
//! JSON-RPC and MCP vocabulary (codes, revisions, `_meta` keys, headers) is `hangar_core`'s.

mod about;
mod args;
mod batch;
mod dispatch;
mod era;
mod errors;
mod front_door;
mod headers;
mod id;
mod legacy;
mod modern;
mod params;
pub mod refusal;
mod relay;
mod reply;
mod session;
mod stream;
mod subscriptions;
mod tools;
mod traced;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::header::ACCEPT;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{MethodRouter, post};
use hangar_core::jsonrpc::RpcError;
use hangar_core::mcp::HEADER_SESSION_ID;
use serde_json::Value;

use self::errors::session_not_found;
use self::reply::McpReply;
use crate::state::{AppState, Calling};

pub fn routes() -> Router<AppState> {
    let endpoint =
        || -> MethodRouter<AppState> { post(post_mcp).get(get_mcp).delete(delete_mcp).fallback(other_method) };
    Router::new().route("/mcp", endpoint()).route("/mcp/", endpoint())
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

/// A legacy session's server-to-client stream (`notifications/tools/list_changed`); 2026-07-28
/// has none (`subscriptions/listen` replaces it), so a GET without a session is not allowed.
async fn get_mcp(app: Calling, headers: HeaderMap) -> McpReply {
    match headers::single(&headers, HEADER_SESSION_ID) {
        Ok(Some(id)) if session::parse(&id).is_some() => subscriptions::legacy_stream(&app),
        Ok(Some(_)) => McpReply::error(StatusCode::NOT_FOUND, &Value::Null, &session_not_found()),
        _ => McpReply::method_not_allowed(
            "Method Not Allowed: GET opens a legacy session's stream; POST JSON-RPC messages",
        ),
    }
}

/// Ending a legacy session: there is nothing stored to delete, so a well-formed id just succeeds.
async fn delete_mcp(headers: HeaderMap) -> McpReply {
    match headers::single(&headers, HEADER_SESSION_ID) {
        Ok(None) => McpReply::method_not_allowed("Method Not Allowed: there is no session to end"),
        Ok(Some(id)) if session::parse(&id).is_some() => McpReply::ok_empty(),
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
