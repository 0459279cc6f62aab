//! JSON-RPC error codes and error objects of `/mcp`.

use hangar_core::echo::bounded;
use serde_json::{Value, json};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
/// Legacy sessions: the id is not one this server mints (the TypeScript SDK's code).
pub const SESSION_NOT_FOUND: i64 = -32001;
/// 2026-07-28: a standard header is missing, malformed or disagrees with the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// 2026-07-28: the requested protocol version is not served.
pub const UNSUPPORTED_VERSION: i64 = -32022;

#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError { code, message: message.into(), data: None }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn parse_error(detail: impl std::fmt::Display) -> Self {
        RpcError::new(PARSE_ERROR, format!("Parse error: {}", bounded(&detail.to_string())))
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        RpcError::new(INVALID_REQUEST, message)
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        RpcError::new(INVALID_PARAMS, message)
    }

    pub fn method_not_found(method: &str) -> Self {
        RpcError::new(METHOD_NOT_FOUND, format!("Method not found: {}", bounded(method)))
    }

    pub fn header_mismatch(message: impl Into<String>) -> Self {
        RpcError::new(HEADER_MISMATCH, message)
    }

    /// The `error` member of a response.
    pub fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let (Some(data), Value::Object(map)) = (&self.data, &mut error) {
            map.insert("data".into(), data.clone());
        }
        error
    }
}
