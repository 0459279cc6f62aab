//! What differs between the two eras once a request has passed its era's own checks, as data
//! the one dispatcher reads: each era module declares its `Era`.

use axum::http::StatusCode;
use hangar_core::jsonrpc::RpcError;
use serde_json::Value;

pub struct Era {
    /// The methods the era serves (legacy `initialize` aside: it starts a session, in `legacy`).
    pub methods: &'static [&'static str],
    /// Shapes a method's result for the era's clients (adding or removing 2026-07-28's fields).
    pub finish: fn(method: &str, result: Value) -> Value,
    /// The HTTP status that carries a JSON-RPC error answer.
    pub error_status: fn(&RpcError) -> StatusCode,
}
