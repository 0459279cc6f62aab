//! After the run: a call refused because its caller has not connected their own account to a
//! `per: user` server is never failed silently. The caller is given a connect URL minted for
//! them ([`Hangar::connect_url`]), in the way their client understands:
//! - a 2026-07-28 client that can be asked to elicit gets `input_required`, with one URL-mode
//!   elicitation; its retry after the person connected is a new call, which then runs;
//! - a legacy session whose client declared `elicitation.url` gets JSON-RPC error -32042
//!   (URL elicitation required), with the URL in its data, and later
//!   `notifications/elicitation/complete` once that caller has connected
//!   ([`Hangar::connected`]);
//! - any other caller gets the hangar's error, whose words carry the URL (a tool error at the
//!   front door, the error of `hangar_call` or REST).
//!
//! An upstream's own -32042 passes to a legacy session as it came (its `data` is protocol
//! content); the session is noted, so the upstream's `notifications/elicitation/complete` for
//! it reaches that session alone ([`Hangar::upstream_elicitation_complete`]).

use hangar_core::access::Caller;
use hangar_core::ipc::{CallEra, ErrorKind, IpcError, Stance};
use hangar_core::mcp::{INPUT_REQUESTS, RESULT_TYPE_INPUT_REQUIRED, URL_ELICITATION_REQUIRED};
use serde_json::{Value, json};

use super::kept::{Wait, Waiter};
use crate::hangar::Hangar;
use crate::server::CONNECT_DETAIL;

/// The key of the one question in `inputRequests`.
const CONNECT_KEY: &str = "connect";

impl Hangar {
    /// `err` as its caller is asked to connect, if that is what it says; else `err` itself.
    pub(super) fn ask_to_connect(&self, caller: &Caller, stance: &Stance, err: IpcError) -> Result<Value, IpcError> {
        let server = err.details.as_ref().and_then(|d| d.get(CONNECT_DETAIL)).and_then(Value::as_str);
        let Some(server) = server.map(str::to_owned) else { return Err(err) };
        let (url, expires_at) = match self.connect_url(&caller.identity, &server) {
            Ok(minted) => minted,
            Err(why) => {
                tracing::warn!(mcp_server = %server, error = %why.message, "no connect URL could be minted");
                return Err(err);
            }
        };
        let message = format!(
            "`{server}` needs your own account. Open {url} to connect it (the link works until {expires_at}, for you only), then call again."
        );
        let elicitation = json!({
            "mode": "url",
            "elicitationId": format!("hangar-connect-{}", self.calls.held.ids.next()),
            "url": url,
            "message": message,
        });
        match stance.era {
            CallEra::Modern if stance.asks.elicitation_url => Ok(json!({
                "resultType": RESULT_TYPE_INPUT_REQUIRED,
                INPUT_REQUESTS: {CONNECT_KEY: {"method": "elicitation/create", "params": elicitation}},
            })),
            CallEra::Legacy if stance.asks.elicitation_url => {
                if let (Some(by), Some(id)) = (&stance.cancel_by, elicitation["elicitationId"].as_str()) {
                    let wait = Wait { session: by.session.clone(), elicitation_id: id.to_owned() };
                    self.calls.elicitations.wait_for_connect(&caller.identity, &server, wait);
                }
                Err(IpcError::new(ErrorKind::UpstreamError, message).with_details(json!({
                    "jsonrpc_code": URL_ELICITATION_REQUIRED,
                    "jsonrpc_data": {"elicitations": [elicitation]},
                })))
            }
            _ => Err(IpcError::new(ErrorKind::UpstreamUnauthorized, message)
                .with_details(json!({"connect_url": url, "expires_at": expires_at, "mcp_server": server}))),
        }
    }
}

impl Hangar {
    /// `identity` has just connected `server`: its legacy sessions told to connect hear that it
    /// is done, and the server's tools are learned with the new token if none are known yet.
    pub(crate) fn connected(&self, identity: &str, server: &str) {
        for wait in self.calls.elicitations.connected(identity, server) {
            let done = json!({
                "jsonrpc": "2.0",
                "method": "notifications/elicitation/complete",
                "params": {"elicitationId": wait.elicitation_id},
            });
            // A session that has ended since has no one to tell.
            let _ = self.sessions.with(|all, now| all.post(&wait.session, identity, done, now));
        }
        let Ok(server) = self.server(server) else { return };
        let identity = identity.to_owned();
        tokio::spawn(async move {
            if let Err(err) = server.caller_link(&identity).await {
                tracing::info!(mcp_server = %server.id(), error = %err.message, "a new connection could not be opened");
            }
        });
    }
}

impl Hangar {
    /// A legacy session's call failed with an upstream's -32042: its elicitations' completion
    /// is awaited for that session.
    pub(super) fn await_upstream_elicitations(&self, caller: &Caller, stance: &Stance, err: &IpcError) {
        let Some(details) = &err.details else { return };
        let (Some(by), Some(server)) = (&stance.cancel_by, details.get("mcp_server").and_then(Value::as_str)) else {
            return;
        };
        if details.get("jsonrpc_code").and_then(Value::as_i64) != Some(URL_ELICITATION_REQUIRED) {
            return;
        }
        let elicitations = details.pointer("/jsonrpc_data/elicitations").and_then(Value::as_array);
        for id in elicitations.into_iter().flatten().filter_map(|e| e.get("elicitationId").and_then(Value::as_str)) {
            let waiter = Waiter { identity: caller.identity.clone(), session: by.session.clone() };
            self.calls.elicitations.wait_for_upstream(server, id, waiter);
        }
    }

    /// `server` said its elicitation in `message` is complete: the one session it was passed to
    /// hears it; no one else does.
    pub(crate) fn upstream_elicitation_complete(&self, server: &str, message: &Value) {
        let id = message.pointer("/params/elicitationId").and_then(Value::as_str);
        let Some(waiter) = id.and_then(|id| self.calls.elicitations.upstream_complete(server, id)) else { return };
        let _ = self.sessions.with(|all, now| all.post(&waiter.session, &waiter.identity, message.clone(), now));
    }
}
