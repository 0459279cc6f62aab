//! A failure in the hangar's own words, as every process passes it on: an [`IpcError`] carries
//! an [`ErrorKind`] that every surface (REST envelope, MCP error, journal, metrics, traces) maps
//! the same way, and a message that is never an upstream's text.
//!
//! It depends on nothing else in the crate but [`crate::echo`] and [`crate::wire_name`], so that
//! the protocol ([`crate::ipc`]), the batch report and the trace outcomes can all name it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Keys of a failed upstream request's [`IpcError::details`] that carry the upstream's own
/// words: set only on an answer to the front door (`tool_access.upstream_errors`), never
/// journaled, audited or shown on a hangar surface.
pub const UPSTREAM_MESSAGE_DETAIL: &str = "upstream_message";
pub const UPSTREAM_DATA_DETAIL: &str = "upstream_data";

/// A failure, in the hangar's own words: never an upstream's text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct IpcError {
    pub kind: ErrorKind,
    pub message: String,
    #[serde(default)]
    pub details: Option<Value>,
}

impl IpcError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        IpcError { kind, message: message.into(), details: None }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// A caller outside its view, or not an admin.
    pub fn forbidden(message: impl Into<String>) -> Self {
        IpcError::new(ErrorKind::Forbidden, message)
    }

    /// Work refused because the hangar is stopping (it takes no new calls or starts).
    pub fn shutting_down() -> Self {
        IpcError::new(ErrorKind::ShuttingDown, "the hangar is shutting down")
    }

    pub fn not_found(mcp_server: &str) -> Self {
        IpcError::new(
            ErrorKind::NotFound,
            format!("no MCP server with id `{}` is configured", crate::echo::bounded(mcp_server)),
        )
    }
}

/// What went wrong, as a type every surface maps the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    NotFound,
    /// No front-door tool has this name (or the front door is off).
    UnknownTool,
    InvalidArgument,
    /// The caller's profile does not allow it (a tool outside its view, an admin action).
    Forbidden,
    /// The server did not come up: its process exited or its handshake failed.
    StartFailed,
    /// A managed HTTP server's endpoint was already taken by another process.
    PortHeld,
    /// A dead server's backoff has not passed yet.
    RetryLater,
    CapabilityBlocked,
    /// A configured rate limit refused the request; `details.retry_after_ms` says when to retry.
    RateLimited,
    /// A concurrency limit is reached; `details` names the limit.
    ConcurrencyLimited,
    Timeout,
    /// The upstream answered with a JSON-RPC error.
    UpstreamError,
    /// The upstream's process exited or its pipe broke during the call.
    UpstreamDied,
    /// The server was stopped while the request waited.
    Stopped,
    ShuttingDown,
    SupervisorUnavailable,
    ProtocolMismatch,
    Internal,
    /// A request's `Mcp-Param-*` headers do not mirror its arguments (SEP-2243).
    HeaderMismatch,
    /// The request needs a client capability the caller did not declare (MCP's -32021);
    /// `details.requiredCapabilities` names it.
    MissingCapability,
    /// The caller's client cancelled the request (a legacy `notifications/cancelled`).
    Cancelled,
    /// An HTTP upstream refused the hangar's credentials (its 401 or 403); the message names
    /// what it asked for (its `WWW-Authenticate` challenge, summarised) and the key to fix.
    UpstreamUnauthorized,
    /// An isolated server runs `max_instances` instances already, none of them idle: the
    /// caller's own instance cannot be started.
    InstancesExhausted,
    /// A call a rule marks `approve` waited for a person's decision past `approvals.timeout_s`
    /// (or the config was reloaded while it waited): a denial.
    ApprovalExpired,
    /// A legacy session's call named a session that is not live, or not the caller's: the
    /// client starts over with `initialize` (MCP's 404 and -32001).
    SessionNotFound,
}

impl ErrorKind {
    /// The `error_type` on MCP surfaces.
    pub fn as_str(self) -> &'static str {
        crate::wire_name::of(&self)
    }

    /// The `error.code` of the REST envelope.
    pub fn rest_code(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "McpServerNotFound",
            ErrorKind::UnknownTool => "UnknownTool",
            ErrorKind::InvalidArgument => "InvalidArgument",
            ErrorKind::Forbidden => "Forbidden",
            ErrorKind::StartFailed => "StartFailed",
            ErrorKind::PortHeld => "PortHeld",
            ErrorKind::RetryLater => "RetryLater",
            ErrorKind::CapabilityBlocked => "CapabilityBlocked",
            ErrorKind::RateLimited => "RateLimited",
            ErrorKind::ConcurrencyLimited => "ConcurrencyLimited",
            ErrorKind::Timeout => "UpstreamTimeout",
            ErrorKind::UpstreamError => "UpstreamError",
            ErrorKind::UpstreamDied => "UpstreamDied",
            ErrorKind::Stopped => "McpServerStopped",
            ErrorKind::ShuttingDown => "ShuttingDown",
            ErrorKind::SupervisorUnavailable => "SupervisorUnavailable",
            ErrorKind::ProtocolMismatch => "ProtocolMismatch",
            ErrorKind::Internal => "InternalError",
            ErrorKind::HeaderMismatch => "HeaderMismatch",
            ErrorKind::MissingCapability => "MissingCapability",
            ErrorKind::Cancelled => "Cancelled",
            ErrorKind::UpstreamUnauthorized => "UpstreamUnauthorized",
            ErrorKind::InstancesExhausted => "InstancesExhausted",
            ErrorKind::ApprovalExpired => "ApprovalExpired",
            ErrorKind::SessionNotFound => "SessionNotFound",
        }
    }

    /// The HTTP status of the REST envelope.
    pub fn http_status(self) -> u16 {
        match self {
            ErrorKind::NotFound | ErrorKind::UnknownTool | ErrorKind::SessionNotFound => 404,
            ErrorKind::InvalidArgument | ErrorKind::HeaderMismatch | ErrorKind::MissingCapability => 400,
            ErrorKind::Forbidden | ErrorKind::ApprovalExpired => 403,
            ErrorKind::RetryLater | ErrorKind::CapabilityBlocked | ErrorKind::Stopped | ErrorKind::PortHeld => 409,
            ErrorKind::StartFailed
            | ErrorKind::UpstreamError
            | ErrorKind::UpstreamDied
            | ErrorKind::UpstreamUnauthorized => 502,
            ErrorKind::RateLimited | ErrorKind::ConcurrencyLimited => 429,
            ErrorKind::Timeout => 504,
            ErrorKind::ShuttingDown
            | ErrorKind::SupervisorUnavailable
            | ErrorKind::ProtocolMismatch
            | ErrorKind::InstancesExhausted => 503,
            ErrorKind::Internal => 500,
            // nginx's "client closed request": nobody is left to read it.
            ErrorKind::Cancelled => 499,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_maps_to_a_client_or_server_error_status() {
        for kind in [ErrorKind::NotFound, ErrorKind::RetryLater, ErrorKind::Timeout, ErrorKind::SupervisorUnavailable] {
            assert!((400..600).contains(&kind.http_status()));
        }
        assert_eq!(ErrorKind::NotFound.rest_code(), "McpServerNotFound");
        assert_eq!((ErrorKind::Forbidden.as_str(), ErrorKind::Forbidden.http_status()), ("forbidden", 403));
    }
}
