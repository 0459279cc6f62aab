//! Stage 4 of the call pipeline: the upstream's `tools/call`, with its timeout, the relay of
//! its notifications, and the trace it carries on. Credentials for the upstream belong here.

use std::sync::Arc;
use std::time::Duration;

use hangar_core::ipc::IpcError;
use serde_json::Value;

use super::CallRequest;
use crate::hangar::MAX_CALL_TIMEOUT;
use crate::server::{CallTrace, DEFAULT_CALL_TIMEOUT, Server};

/// Stage 4: `tool` of `server` called as `identity`; the upstream's relayed notifications go
/// to the call's `notices`.
pub(super) async fn upstream(
    server: &Arc<Server>,
    tool: &str,
    call: CallRequest,
    identity: &str,
) -> Result<Value, IpcError> {
    let CallRequest { arguments, timeout_ms, relay, extra, trace, notices, stance, .. } = call;
    let timeout = timeout_ms.map_or(DEFAULT_CALL_TIMEOUT, Duration::from_millis).min(MAX_CALL_TIMEOUT);
    let arguments = if arguments.is_null() { serde_json::json!({}) } else { arguments };
    // The client, as far as roots go: its identity, and its session when it has one.
    let session = stance.cancel_by.as_ref().map_or("", |by| by.session.as_str());
    let asker: Arc<str> = format!("{identity}\0{session}").into();
    let relay = notices.map(|to| crate::upstream::Relay {
        progress: relay.progress,
        logs: relay.logs,
        asks: relay.asks,
        to,
        asker: Some(asker),
    });
    let traced = CallTrace { parent: trace, identity };
    server.call(tool, arguments, extra, timeout, relay, traced).await
}
