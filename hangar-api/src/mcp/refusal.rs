//! `/mcp`'s answers for the middleware that refuses a request before any handler runs (the
//! body limit, the cross-site guard): the same refusals as REST's, in the JSON-RPC shape.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hangar_core::jsonrpc::RpcError;
use serde_json::Value;

use super::reply::McpReply;

pub fn is_mcp_path(path: &str) -> bool {
    matches!(path, "/mcp" | "/mcp/" | "/sse" | "/messages")
}

pub fn payload_too_large(limit: usize) -> Response {
    let err = RpcError::invalid_request(format!("Invalid Request: the body is larger than {limit} bytes"));
    McpReply::error(StatusCode::PAYLOAD_TOO_LARGE, &Value::Null, &err).into_response()
}

/// A body that could not be read (a broken chunked encoding, a client gone mid-body).
pub fn unreadable_body(detail: &str) -> Response {
    McpReply::error(StatusCode::BAD_REQUEST, &Value::Null, &RpcError::parse_error(detail)).into_response()
}

/// The cross-site guard's 403, in the JSON-RPC shape.
pub fn forbidden(why: &str) -> Response {
    let err = RpcError::invalid_request(format!("Forbidden: {why}"));
    McpReply::error(StatusCode::FORBIDDEN, &Value::Null, &err).into_response()
}
