//! What differs between the two eras once a request has passed its era's own checks, as data
//! the one dispatcher reads: each era module declares its `Era`.

use axum::http::StatusCode;
use hangar_core::jsonrpc::RpcError;
use serde_json::Value;

/// The methods both eras serve.
const SHARED_METHODS: [&str; 8] = [
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
];

pub struct Era {
    /// The methods only this era serves (legacy `initialize` aside: it starts a session, in
    /// `legacy`).
    pub own_methods: &'static [&'static str],
    /// Shapes a method's result for the era's clients (adding or removing 2026-07-28's fields).
    pub finish: fn(method: &str, result: Value) -> Value,
    /// The HTTP status that carries a JSON-RPC error answer.
    pub error_status: fn(&RpcError) -> StatusCode,
    /// Whether a `tools/call`'s `Mcp-Param-*` headers (SEP-2243, 2026-07-28) are checked
    /// against its arguments.
    pub mirrors_params: bool,
}

impl Era {
    pub fn serves(&self, method: &str) -> bool {
        SHARED_METHODS.contains(&method) || self.own_methods.contains(&method)
    }
}
