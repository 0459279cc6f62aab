//! What a request's `params` ask for, read in one place: a `tools/call`'s tool, arguments and
//! the rest, and which notifications the client wants to hear while its call runs.

use hangar_core::custom_headers::ParamHeaders;
use hangar_core::jsonrpc::RpcError;
use hangar_core::mcp::{LOG_LEVELS, META_LOG_LEVEL, log_severity as severity};
use serde_json::{Map, Value};

use super::id::{Echo, Id};

/// A `tools/call`'s params: the tool's name, its arguments, and everything else (`_meta`,
/// `requestState`...), which is passed on to an upstream.
pub struct ToolCall {
    pub name: String,
    pub arguments: Option<Value>,
    pub extra: Map<String, Value>,
    /// Its `Mcp-Param-*` headers, when its era checks them (set by the dispatcher).
    pub param_headers: Option<ParamHeaders>,
}

impl ToolCall {
    pub fn from_params(params: Option<Value>) -> Result<ToolCall, RpcError> {
        let mut params = match params {
            Some(Value::Object(map)) => map,
            _ => return Err(RpcError::invalid_params("Invalid params: tools/call needs params with a tool `name`")),
        };
        let name = match params.remove("name") {
            Some(Value::String(name)) => name,
            _ => return Err(RpcError::invalid_params("Invalid params: tools/call needs a string `name`")),
        };
        let arguments = params.remove("arguments");
        Ok(ToolCall { name, arguments, extra: params, param_headers: None })
    }
}

/// What the client asked to hear about its call, from its `_meta`.
pub struct Wanted {
    /// As the client wrote it: it is echoed in every progress notification.
    pub progress_token: Option<Id>,
    /// The least severe log level wanted, as an index into the severities.
    log_level: Option<usize>,
}

impl Wanted {
    /// `None` when the client asked for no notifications (a plain JSON answer then).
    /// `raw_token` is the progress token as the client wrote it (see `Incoming::progress_token`).
    pub fn from_params(params: Option<&Value>, raw_token: Option<Id>) -> Option<Wanted> {
        let meta = params?.get("_meta")?;
        let token = meta.get("progressToken").filter(|t| t.is_string() || t.is_number());
        let progress_token = token.map(|token| raw_token.unwrap_or_else(|| token.echo()));
        let log_level = meta.get(META_LOG_LEVEL).and_then(Value::as_str).and_then(severity);
        (progress_token.is_some() || log_level.is_some()).then_some(Wanted { progress_token, log_level })
    }

    pub fn wants_logs(&self) -> bool {
        self.log_level.is_some()
    }

    /// Whether a log notification at `level` is wanted (an unknown level counts as the most
    /// severe).
    pub fn wants_log_at(&self, level: Option<&str>) -> bool {
        let severity = level.and_then(severity).unwrap_or(LOG_LEVELS.len());
        self.log_level.is_some_and(|wanted| severity >= wanted)
    }
}
