//! The control-socket requests about one server (its record, tools, logs, start, stop, health
//! check) and a front-door client's other MCP requests to it. Each is one `ipc::Request`
//! variant's body, so the supervisor answers each with a handler of its own; the wire shape is
//! the variant's name over the struct's fields.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The server's record, as the caller's view sees it. Answers
/// [`Reply::Server`](crate::ipc::Reply::Server).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Get {
    pub mcp_server: String,
}

/// Starts the server (a view that may act). Answers [`Reply::Started`](crate::ipc::Reply::Started).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Start {
    pub mcp_server: String,
}

/// Stops the server (a view that may act). Answers [`Reply::Stopped`](crate::ipc::Reply::Stopped).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stop {
    pub mcp_server: String,
}

/// The server's tools as the caller's view sees them. Answers
/// [`Reply::Tools`](crate::ipc::Reply::Tools).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tools {
    pub mcp_server: String,
}

/// The server's last `lines` log lines (1 to [`MAX_LOG_LINES`](crate::ipc::MAX_LOG_LINES)), for a
/// view that may read them. Answers [`Reply::Logs`](crate::ipc::Reply::Logs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Logs {
    pub mcp_server: String,
    pub lines: usize,
}

/// Sends the upstream a `tools/list` with a timeout; answers
/// [`CheckOutcome`](crate::ipc::CheckOutcome). Changes nothing but the server's tool list (and
/// what capability enforcement makes of it). Only for the hangar's own clients (the prober).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub mcp_server: String,
    pub timeout_ms: u64,
}

/// Any other MCP request (`prompts/list`, `resources/read`, ...) passed to one upstream, which
/// is started first if it is cold. Answers the upstream's result. Never a `tools/call`
/// ([`ErrorKind::InvalidArgument`](crate::ipc::ErrorKind::InvalidArgument)): a tool call is a
/// [`Request::Call`](crate::ipc::Request::Call).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Forward {
    pub mcp_server: String,
    pub method: String,
    pub params: Value,
    pub timeout_ms: Option<u64>,
    /// The legacy session it was sent in, if any: an isolated server's `per_session` instance
    /// is that session's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}
