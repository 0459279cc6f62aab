//! After the run: a call refused because its caller has not connected their own account to a
//! `per: user` server is never failed silently. The caller is given a connect URL minted for
//! them ([`Hangar::connect_url`]), in the way their client understands:
//! - a 2026-07-28 client that can be asked to elicit gets `input_required`, with one URL-mode
//!   elicitation; its retry after the person connected is a new call, which then runs;
//! - a legacy session whose client declared `elicitation.url` gets JSON-RPC error -32042
//!   (URL elicitation required), with the URL in its data;
//! - any other caller gets the hangar's error, whose words carry the URL (a tool error at the
//!   front door, the error of `hangar_call` or REST).

use hangar_core::access::Caller;
use hangar_core::ipc::{CallEra, ErrorKind, IpcError, Stance};
use hangar_core::mcp::{INPUT_REQUESTS, RESULT_TYPE_INPUT_REQUIRED};
use serde_json::{Value, json};

use crate::hangar::Hangar;
use crate::server::CONNECT_DETAIL;

/// JSON-RPC's "URL elicitation required" (MCP 2025-11-25).
const URL_ELICITATION_REQUIRED: i64 = -32042;
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
            CallEra::Legacy if stance.asks.elicitation_url => Err(IpcError::new(ErrorKind::UpstreamError, message)
                .with_details(json!({
                    "jsonrpc_code": URL_ELICITATION_REQUIRED,
                    "jsonrpc_data": {"elicitations": [elicitation]},
                }))),
            _ => Err(IpcError::new(ErrorKind::UpstreamUnauthorized, message)
                .with_details(json!({"connect_url": url, "expires_at": expires_at, "mcp_server": server}))),
        }
    }
}
