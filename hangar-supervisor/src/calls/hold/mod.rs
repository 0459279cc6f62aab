//! Calls and batches held for their client's answer: a 2026-07-28 client's call whose legacy
//! upstream asks the client something mid-call (`call.rs`), and a `hangar_call` batch whose
//! calls ask (`batch.rs`). Each waits here, bound to its caller's identity, for the client's
//! retry with a `requestState` naming it, at most [`HOLD`] (or
//! `tool_access.client_answer_timeout_s`, if shorter).

mod batch;
mod call;

use std::time::Duration;

use hangar_core::ipc::{ErrorKind, IpcError};
use hangar_core::jsonrpc::{INTERNAL_ERROR, RpcError};
use hangar_core::mcp::{HELD_BATCH_STATE_PREFIX, HELD_CALL_STATE_PREFIX, REQUEST_STATE};
use serde_json::{Value, json};

use crate::hangar::Hangar;

/// How long a held call or batch waits for the client's retry.
pub const HOLD: Duration = Duration::from_secs(60);

/// The token of the held call or batch a retry's `requestState` names, if it is one of the
/// hangar's with `prefix` (a call's or a batch's).
fn state_token<'a>(extra: Option<&'a Value>, prefix: &str) -> Option<&'a str> {
    extra?.get(REQUEST_STATE)?.as_str()?.strip_prefix(prefix)
}

/// A retry naming nothing held: unknown, expired, already answered or another caller's.
fn unknown_state() -> IpcError {
    IpcError::new(ErrorKind::InvalidArgument, "Invalid params: unknown or expired `requestState`")
}

impl Hangar {
    pub(super) fn answer_held_ask(&self, server: &str, ask_id: &str, response: Value) {
        let delivered = self.server(server).is_ok_and(|server| server.answer_ask(ask_id, &response));
        if !delivered {
            tracing::debug!(mcp_server = server, "an answer to an upstream's request found it no longer waiting");
        }
    }

    /// Ends every held call and batch `state` names (a cancelled task's `requestState`, at any
    /// depth): each upstream's request is answered with an error and its call cancelled
    /// upstream at once.
    pub(crate) fn end_held_in(&self, state: &Value) {
        match state {
            Value::String(text) => {
                if let Some(token) = text.strip_prefix(HELD_CALL_STATE_PREFIX) {
                    let Some(held) = self.calls.held.calls().remove(token) else { return };
                    let error = RpcError::new(INTERNAL_ERROR, "hangar: the task was cancelled");
                    self.answer_held_ask(&held.server, &held.ask_id, json!({"error": error.to_json()}));
                    held.running.call.abort();
                } else if let Some(token) = text.strip_prefix(HELD_BATCH_STATE_PREFIX)
                    && let Some(state) = self.calls.held.batches.take_state(token)
                {
                    self.end_held_in(&state);
                }
            }
            Value::Array(items) => items.iter().for_each(|item| self.end_held_in(item)),
            Value::Object(members) => members.values().for_each(|member| self.end_held_in(member)),
            _ => {}
        }
    }
}
