//! A tool call as it crosses the control socket: [`CallSpec`], the one request every surface
//! sends for `tools/call` (`hangar_call`, REST, the front door in both eras).
//!
//! It says *what* is called ([`Called`]: one tool, or a `hangar_call` batch) and *the client's
//! stance* ([`Stance`]): which surface and era it called through, what it can be asked, whether
//! it takes tasks, and who may cancel the call. The supervisor's call pipeline reads the stance
//! once and picks its way from it; the API reads it from the client's request once and sends
//! it. Nothing here runs anything.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::batch::BatchSpec;
use crate::custom_headers::ParamHeaders;
use crate::mcp::{CLIENT_REQUESTS, META_CLIENT_CAPABILITIES};
use crate::trace::TraceContext;

/// One `tools/call` (or `hangar_call` batch) and the stance of the client that makes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallSpec {
    /// What is called.
    pub called: Called,
    /// Who calls, and how they take the answer.
    pub stance: Stance,
    /// With relay on, the upstream's progress and log notifications (and, with `asks`, a legacy
    /// upstream's own requests) for the call come back as notices before the reply.
    #[serde(default, skip_serializing_if = "Relay::is_off")]
    pub relay: Relay,
    /// Where the call sits in a trace (W3C Trace Context): the client's, or the API's span in
    /// it when spans are exported. The upstream's request carries it on (`_meta`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceContext>,
    /// A 2026-07-28 front-door call's `Mcp-Param-*` headers (SEP-2243), decoded: checked
    /// against the tool's `x-mcp-header` parameters, a mismatch refused with
    /// `ErrorKind::HeaderMismatch`. `None`: nothing to check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param_headers: Option<Box<ParamHeaders>>,
    /// The client's other `tools/call` params (its `_meta` with client capabilities,
    /// `requestState`, `inputResponses`...), passed on to the upstream as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Value>,
    /// The caller's own OAuth access token, as the API validated it: sent only for a caller
    /// that came with one, and only read to exchange it (RFC 8693) for a token of a server with
    /// `auth.token_exchange`. Never sent upstream as it is, never logged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_token: Option<crate::credential::Secret>,
    /// A legacy session's call whose session the API did not check: the supervisor checks it
    /// (live, and the caller's; else `ErrorKind::SessionNotFound`), then carries the session's
    /// log level and declared capabilities in `extra`'s `_meta` (`session_meta`) and reads the
    /// stance's `asks` from them. One round trip instead of two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unchecked_session: Option<String>,
}

/// What a call names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Called {
    /// One tool; `timeout_ms` bounds it (`None`: the default; a task's call lives as long as
    /// its task).
    One { target: Target, arguments: Value, timeout_ms: Option<u64> },
    /// `hangar_call`'s batch, run by the supervisor (each call by server and tool).
    Batch(BatchSpec),
}

/// The client's stance: what the supervisor may do with the call besides making it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stance {
    /// The surface (and era) the client called through.
    pub era: CallEra,
    /// What the client declared it can be asked (its `_meta` client capabilities).
    #[serde(default, skip_serializing_if = "Asks::is_none")]
    pub asks: Asks,
    /// `Some` when the client takes tasks (SEP-2663): a call not answered within the shortcut
    /// becomes a task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<TakesTasks>,
    /// The legacy session and request id by which the client may cancel the call from any API
    /// instance (`Request::CancelClientCall`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_by: Option<CancelBy>,
}

/// The surface a call came through: whose words its errors are in, and what may happen to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallEra {
    /// The hangar's own surface (`hangar_call`, REST): the hangar's words, never an upstream's.
    #[default]
    Hangar,
    /// A front-door call in a legacy (2025-11-25 and older) session: the upstream's error words
    /// as `tool_access.upstream_errors` allows; its questions go out on the session's stream
    /// (`Relay::asks`).
    Legacy,
    /// A front-door call outside any legacy session (2026-07-28): the upstream's error words; a
    /// legacy upstream's own request to a client that can be asked holds the call (answered
    /// `input_required`, resumed by the retry's `requestState`); a tool that runs only as a
    /// task is refused to a client that takes none.
    Modern,
}

/// What a client can be asked by an upstream mid-call (sampling, elicitation, roots), as its
/// `_meta` client capabilities declare.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Asks {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sampling: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub elicitation: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub roots: bool,
    /// Elicitation in URL mode (`elicitation: {url: {}}`): the client can send its user to a
    /// page, such as the one that connects their account to an upstream.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub elicitation_url: bool,
}

impl Asks {
    /// What the client capabilities in `params._meta` declare (nothing without them).
    pub fn declared_in(params: Option<&Value>) -> Asks {
        let declared = params.and_then(|p| p.get("_meta")).and_then(|m| m.get(META_CLIENT_CAPABILITIES));
        let has = |capability: &str| declared.is_some_and(|d| d.get(capability).is_some());
        let elicitation_url = declared.and_then(|d| d.get("elicitation")).is_some_and(|e| e.get("url").is_some());
        Asks { sampling: has("sampling"), elicitation: has("elicitation"), roots: has("roots"), elicitation_url }
    }

    /// Whether the client can be asked anything at all.
    pub fn any(&self) -> bool {
        self.sampling || self.elicitation || self.roots
    }

    /// Whether the client can be asked `method` with `params`: as [`Asks::allows`], and an
    /// elicitation in URL mode only of a client that declared `elicitation.url`.
    pub fn allows_request(&self, method: &str, params: Option<&Value>) -> bool {
        let url = crate::mcp::elicitation_mode(params) == crate::mcp::ElicitationMode::Url;
        self.allows(method) && !(method == "elicitation/create" && url && !self.elicitation_url)
    }

    /// Whether the client can be asked `method` (one of [`CLIENT_REQUESTS`]).
    pub fn allows(&self, method: &str) -> bool {
        CLIENT_REQUESTS.iter().any(|(known, capability)| {
            *known == method
                && match *capability {
                    "sampling" => self.sampling,
                    "elicitation" => self.elicitation,
                    "roots" => self.roots,
                    _ => false,
                }
        })
    }

    fn is_none(&self) -> bool {
        !self.any()
    }
}

/// A client that takes tasks: how long its call may take and still be answered as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TakesTasks {
    pub shortcut_ms: u64,
}

/// A legacy session's request id, by which its client cancels the call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelBy {
    pub session: String,
    pub request_id: Value,
}

impl CallSpec {
    /// A call of `called` by a client of `stance`, relaying what `relay` asks, with the client's
    /// other params (`extra`); nothing else set.
    pub fn new(called: Called, stance: Stance, relay: Relay, extra: Option<Value>) -> CallSpec {
        CallSpec {
            called,
            stance,
            relay,
            trace: None,
            param_headers: None,
            extra,
            subject_token: None,
            unchecked_session: None,
        }
    }

    /// A call of one tool on the hangar's own surface, with nothing else asked.
    pub fn one(target: Target, arguments: Value, timeout_ms: Option<u64>) -> CallSpec {
        let called = Called::One { target, arguments, timeout_ms };
        CallSpec::new(called, Stance::default(), Relay::default(), None)
    }
}

/// What a call names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// A server's tool by its own name (`hangar_call`, REST).
    Tool { mcp_server: String, tool: String },
    /// A front-door name (`hangar_core::front_door`), which the supervisor resolves against the
    /// tool lists it holds; [`ErrorKind::UnknownTool`](crate::ipc::ErrorKind::UnknownTool) if it leads nowhere or the front door is off.
    Exposed { name: String },
}

impl Target {
    pub fn tool(mcp_server: impl Into<String>, tool: impl Into<String>) -> Self {
        Target::Tool { mcp_server: mcp_server.into(), tool: tool.into() }
    }
}

/// Which of an upstream's notifications about a call to send back while it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Relay {
    /// `notifications/progress` (the hangar gives the upstream a progress token of its own).
    #[serde(default)]
    pub progress: bool,
    /// `notifications/message` log lines sent while the call runs.
    #[serde(default)]
    pub logs: bool,
    /// A legacy upstream's own requests to the client (sampling, elicitation, roots) while the
    /// call runs, each a request-shaped notice (`id`, `method`, `params`, and the `mcp_server`
    /// asking) that [`Request::AnswerUpstream`](crate::ipc::Request::AnswerUpstream) answers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub asks: bool,
}

impl Relay {
    pub fn is_off(&self) -> bool {
        !self.progress && !self.logs && !self.asks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_client_can_be_asked_what_its_meta_declares() {
        let params = json!({"_meta": {META_CLIENT_CAPABILITIES: {"sampling": {}, "roots": {}}}});
        let asks = Asks::declared_in(Some(&params));
        assert_eq!(asks, Asks { sampling: true, elicitation: false, roots: true, elicitation_url: false });
        assert!(asks.any() && asks.allows("sampling/createMessage") && asks.allows("roots/list"));
        assert!(!asks.allows("elicitation/create") && !asks.allows("tools/list"));
        let url = json!({"mode": "url", "url": "https://x", "elicitationId": "e", "message": "m"});
        let form_only = Asks::declared_in(Some(&json!({"_meta": {META_CLIENT_CAPABILITIES: {"elicitation": {}}}})));
        assert!(form_only.allows_request("elicitation/create", None));
        assert!(!form_only.allows_request("elicitation/create", Some(&url)), "URL mode needs elicitation.url");
        let both = Asks::declared_in(Some(&json!({"_meta": {META_CLIENT_CAPABILITIES: {"elicitation": {"url": {}}}}})));
        assert!(both.allows_request("elicitation/create", Some(&url)));
        assert!(!Asks::declared_in(Some(&json!({"_meta": {}}))).any());
        assert!(!Asks::declared_in(None).any());
    }

    #[test]
    fn a_plain_call_keeps_a_small_shape() {
        let spec = CallSpec::one(Target::tool("m", "t"), json!({}), None);
        let text = serde_json::to_string(&spec).unwrap();
        assert_eq!(
            text,
            r#"{"called":{"one":{"target":{"tool":{"mcp_server":"m","tool":"t"}},"arguments":{},"timeout_ms":null}},"stance":{"era":"hangar"}}"#
        );
        assert_eq!(serde_json::from_str::<CallSpec>(&text).unwrap(), spec);
    }
}
