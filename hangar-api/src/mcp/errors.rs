//! How a `/mcp` request fails beyond JSON-RPC's own errors (those are
//! [`hangar_core::jsonrpc::RpcError`]'s): MCP's errors, and a tool's two ways to fail.

use hangar_core::ipc::IpcError;
use hangar_core::jsonrpc::RpcError;
use hangar_core::mcp::{HEADER_MISMATCH, MISSING_CAPABILITY, SESSION_NOT_FOUND};

/// A legacy session id this server would never mint: the client starts over with `initialize`.
pub fn session_not_found() -> RpcError {
    RpcError::new(SESSION_NOT_FOUND, "Session not found")
}

/// A 2026-07-28 standard header that is missing, malformed or disagrees with the body.
pub fn header_mismatch(message: impl Into<String>) -> RpcError {
    RpcError::new(HEADER_MISMATCH, message)
}

/// -32021: the request needs a capability its client did not declare (the supervisor's
/// `MissingCapability`, whose details name it, as `requiredCapabilities`).
pub fn missing_capability(err: IpcError) -> RpcError {
    let error = RpcError::new(MISSING_CAPABILITY, err.message);
    match err.details {
        Some(details) => error.with_data(details),
        None => error,
    }
}

/// How a tool can fail: a malformed call is a JSON-RPC error; anything the hangar refuses or
/// that goes wrong while serving it is a tool result with `isError: true`.
#[derive(Debug)]
pub enum ToolFailure {
    Rpc(RpcError),
    Tool(IpcError),
}

impl From<RpcError> for ToolFailure {
    fn from(err: RpcError) -> Self {
        ToolFailure::Rpc(err)
    }
}

impl From<IpcError> for ToolFailure {
    fn from(err: IpcError) -> Self {
        ToolFailure::Tool(err)
    }
}
