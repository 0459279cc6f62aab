//! Talking MCP to one upstream, over its stdio or over streamable HTTP.
//!
//! [`Upstream`] is what the rest of the supervisor uses: requests with timeouts, notifications,
//! and the handshake with era detection (a `server/discover` probe, else `initialize`, as
//! MCP 2026-07-28 says). The transports (`stdio.rs`, `http.rs`) only move JSON-RPC
//! messages; the protocol `_meta` every modern request carries is added here, once.

mod http;
mod sse;
mod stdio;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use hangar_core::challenge::Challenge;
use hangar_core::ipc::ErrorKind;
use hangar_core::jsonrpc::{INTERNAL_ERROR, METHOD_NOT_FOUND, RpcError};
use hangar_core::mcp::{
    CLIENT_REQUESTS, LATEST_LEGACY_REVISION, LEGACY_REVISIONS, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PREFIX,
    META_PROTOCOL_VERSION, MODERN_REVISION, PROTOCOL_ERRORS, URL_ELICITATION_REQUIRED,
};
use hangar_core::sync::Unpoisoned;
use serde_json::{Value, json};
use tokio::sync::mpsc;

pub use http::HttpUpstream;
pub use stdio::StdioUpstream;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    Modern,
    Legacy,
}

/// Why a request to an upstream did not get a result. Never carries the upstream's own text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    #[error("the upstream did not answer `{method}` within {timeout:?}")]
    Timeout { method: String, timeout: Duration },
    #[error("the upstream's connection closed before it answered `{method}`")]
    Closed { method: String },
    /// The upstream answered with a JSON-RPC error; its text stays in the server's log.
    #[error("the upstream answered `{method}` with JSON-RPC error {code}")]
    Rpc {
        method: String,
        code: i64,
        /// The error's `data` when the code is one of the protocol's own ([`PROTOCOL_ERRORS`]), whose
        /// data is structured protocol content (e.g. `requiredCapabilities`); else `None`.
        data: Option<Value>,
        /// The upstream's own message ([`hangar_core::echo::upstream_text`]) and any other
        /// `data`: only the front door may pass them on, to the client that called it.
        upstream: Option<Box<UpstreamWords>>,
    },
    /// The upstream's answer to this request was over the size limit: skipped unread.
    #[error(
        "the upstream answered `{method}` with a {bytes}-byte message, over the limit; the hangar skipped it unread"
    )]
    Oversized { method: String, bytes: u64 },
    /// An HTTP upstream answered with a status that carries no JSON-RPC answer.
    #[error("the upstream answered `{method}` with HTTP {status}")]
    Status { method: String, status: u16 },
    /// An HTTP upstream refused the hangar's credentials (401) or their rights (403), with
    /// its `WWW-Authenticate` challenge's parsed parameters when it sent one.
    #[error("the upstream refused `{method}` with HTTP {status}{}", challenge_words(.challenge.as_ref()))]
    Unauthorized { method: String, status: u16, challenge: Option<Challenge> },
    /// A connection that serves one caller has no token of theirs to send: they have not
    /// connected an account (`per: user`), or came with no OAuth token to exchange
    /// (`token_exchange`). Nothing was sent.
    #[error("no credential of the caller's for `{method}`: {why}")]
    NoCallerToken { method: String, why: CallerTokenMissing },
}

/// Why a caller's own token is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallerTokenMissing {
    /// A `per: user` server: the caller has not connected an account (or it was forgotten).
    NotConnected,
    /// A `token_exchange` server: the caller came with an API key, not an OAuth token.
    NoSubject,
    /// A `token_exchange` server: the exchange of the caller's token was refused or did not
    /// complete (why is in the server's log).
    ExchangeFailed,
}

impl std::fmt::Display for CallerTokenMissing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CallerTokenMissing::NotConnected => "they have not connected their account",
            CallerTokenMissing::NoSubject => "they came with no OAuth token to exchange",
            CallerTokenMissing::ExchangeFailed => "the exchange of their OAuth token failed",
        })
    }
}

/// `` (it asked for: Bearer realm="x", ...)`` when there is a challenge.
fn challenge_words(challenge: Option<&Challenge>) -> String {
    challenge.map(|c| format!(" (it asked for: {})", c.summary())).unwrap_or_default()
}

/// What an upstream's JSON-RPC error said in its own words.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamWords {
    pub message: String,
    pub data: Option<Value>,
}

impl RequestError {
    /// How surfaces classify this failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            RequestError::Timeout { .. } => ErrorKind::Timeout,
            RequestError::Closed { .. } => ErrorKind::UpstreamDied,
            RequestError::Rpc { .. } | RequestError::Status { .. } | RequestError::Oversized { .. } => {
                ErrorKind::UpstreamError
            }
            RequestError::Unauthorized { .. } | RequestError::NoCallerToken { .. } => ErrorKind::UpstreamUnauthorized,
        }
    }
}

/// Where an upstream's notifications about one request go while it runs (progress by token,
/// log lines while it is in flight), as JSON-RPC notifications.
#[derive(Debug, Clone)]
pub struct Relay {
    pub progress: bool,
    pub logs: bool,
    /// The upstream's own requests to the client go to this call (see `ipc::Relay::asks`).
    pub asks: bool,
    pub to: mpsc::UnboundedSender<Value>,
    /// Who the client is (its identity and session): whose roots an upstream holds once this
    /// call's client answered its `roots/list` (see `stdio::StdioUpstream::sync_roots`).
    pub asker: Option<std::sync::Arc<str>>,
}

/// The JSON-RPC response to an upstream's own request `id`, from the client's response message
/// (`result` or `error`) to the request as relayed.
fn ask_answer(id: Value, response: &Value) -> Value {
    let mut answer = json!({"jsonrpc": "2.0", "id": id});
    match (response.get("result"), response.get("error")) {
        (Some(result), _) => answer["result"] = result.clone(),
        (None, Some(error)) => answer["error"] = error.clone(),
        (None, None) => answer["error"] = RpcError::internal("the client answered nothing").to_json(),
    }
    answer
}

/// The answer to an upstream's own request (`id`, `method`) that no client was asked (see
/// `stdio::relay_ask`): `ping` is answered; `roots/list` outside any call is answered with no
/// roots (a shared server serves many clients, and no one client's roots are everyone's: a
/// root is asked of the client whose call is in flight); what else a client would answer
/// (sampling, elicitation: the hangar declares them, so the tools that need them are listed)
/// gets a clear error; anything else is not served.
fn answer_upstream_request(id: &Value, method: &str) -> Value {
    match method {
        "ping" => return json!({"jsonrpc": "2.0", "id": id, "result": {}}),
        "roots/list" => return json!({"jsonrpc": "2.0", "id": id, "result": {"roots": []}}),
        _ => {}
    }
    let error = match CLIENT_REQUESTS.iter().find(|(known, _)| *known == method) {
        Some((method, capability)) => RpcError::new(
            INTERNAL_ERROR,
            format!(
                "hangar: no client was asked `{method}`: the hangar asks it only of the client of the one \
                 call in flight to this server whose client can be asked: a legacy session's event \
                 stream, or a 2026-07-28 client that declared `{capability}` (declared to the server \
                 so that its tools are listed)"
            ),
        ),
        None => RpcError::new(METHOD_NOT_FOUND, "the hangar does not serve this method to upstreams"),
    };
    json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()})
}

/// What the hangar declares as a legacy upstream's client: everything a client can be asked,
/// and the MCP Apps extension.
///
/// Elicitation in both modes (`form` and `url`): a server registers what needs URL mode only
/// when told it may use it; whether the calling client can take one is checked per call.
fn client_capabilities() -> Value {
    let declared = CLIENT_REQUESTS.iter().map(|(_, capability)| {
        let given = match *capability {
            "elicitation" => json!({"form": {}, "url": {}}),
            // Told when the client whose call it serves has other roots than it last got.
            "roots" => json!({"listChanged": true}),
            _ => json!({}),
        };
        ((*capability).to_owned(), given)
    });
    let mut capabilities: serde_json::Map<String, Value> = declared.collect();
    // MCP Apps pass the front door (`hangar-api/src/mcp/apps.rs`): a server may serve them.
    let apps = json!({hangar_core::mcp::EXTENSION_UI: hangar_core::mcp::apps_extension()});
    capabilities.insert("extensions".into(), apps);
    Value::Object(capabilities)
}

/// Hands a notification to the relays it concerns: `notifications/progress` to the one whose
/// request id is its token, `notifications/message` to every relay that asked for logs (a
/// stdio log line names no request, so every call in flight then hears it). A log line no call
/// takes, and a resource update, is news for the sessions (`Notice::Unsolicited`).
fn relay_notification(
    relays: &[(u64, Relay)],
    method: String,
    params: Option<Value>,
    notices: &mpsc::UnboundedSender<Notice>,
) {
    let unsolicited = match method.as_str() {
        "notifications/message" => !relays.iter().any(|(_, r)| r.logs),
        // It comes after the call that passed the elicitation on: the hangar finds its session.
        "notifications/resources/updated" | "notifications/elicitation/complete" => true,
        _ => false,
    };
    if unsolicited {
        let _ = notices.send(Notice::Unsolicited(json!({"jsonrpc": "2.0", "method": method, "params": params})));
        return;
    }
    let targets: Vec<&Relay> = match method.as_str() {
        "notifications/progress" => {
            let token = params.as_ref().and_then(|p| p.get("progressToken")).and_then(Value::as_u64);
            relays.iter().filter(|(id, r)| r.progress && Some(*id) == token).map(|(_, r)| r).collect()
        }
        "notifications/message" => relays.iter().filter(|(_, r)| r.logs).map(|(_, r)| r).collect(),
        _ => return,
    };
    if targets.is_empty() {
        return;
    }
    let notification = json!({"jsonrpc": "2.0", "method": method, "params": params});
    for relay in targets {
        let _ = relay.to.send(notification.clone());
    }
}

/// What a transport saw that the server should act on.
#[derive(Debug)]
pub enum Notice {
    ToolsChanged,
    /// It sent a message over the size limit, which was skipped: a protocol violation that
    /// counts as one failure.
    Oversized,
    /// A notification outside any request (a log line, a resource update), for the sessions.
    Unsolicited(Value),
}

/// What a completed handshake told about the upstream.
#[derive(Debug, Clone)]
pub struct Handshake {
    pub era: Era,
    /// One the hangar knows, or `unknown`.
    pub protocol_version: String,
    /// What the server declared (`initialize`'s or `server/discover`'s `capabilities`); only
    /// their names are read: what the hangar may ask it for.
    pub capabilities: Value,
}

enum Link {
    Stdio(StdioUpstream),
    Http(HttpUpstream),
}

pub struct Upstream {
    era: Mutex<Era>,
    link: Link,
}

impl Upstream {
    /// Answers the upstream's own request relayed as `ask_id` with the client's `response`;
    /// whether it was still waiting.
    pub fn answer_ask(&self, ask_id: &str, response: &Value) -> bool {
        match &self.link {
            Link::Stdio(link) => link.answer_ask(ask_id, response),
            Link::Http(link) => link.answer_ask(ask_id, response),
        }
    }

    /// Before a call whose client can be asked: if the upstream keeps roots and holds another
    /// client's (or none), it is told they changed and its `roots/list` answered by this
    /// client, so what it answers this call was never another client's (`stdio.rs`).
    pub async fn sync_roots(&self, relay: Option<&Relay>) {
        if let (Link::Stdio(link), Some(relay)) = (&self.link, relay) {
            link.sync_roots(relay).await;
        }
    }

    pub fn stdio(link: StdioUpstream) -> Upstream {
        Upstream { era: Mutex::new(Era::Modern), link: Link::Stdio(link) }
    }

    pub fn http(link: HttpUpstream) -> Upstream {
        Upstream { era: Mutex::new(Era::Modern), link: Link::Http(link) }
    }

    fn era(&self) -> Era {
        *self.era.locked()
    }

    fn set_era(&self, era: Era) {
        *self.era.locked() = era;
    }

    /// Whether a closed link means the process is gone or going: a stdio child's stdout closes
    /// when it dies (or it is killed for closing it); an HTTP connection may drop while its
    /// server lives on.
    pub fn closed_means_gone(&self) -> bool {
        matches!(self.link, Link::Stdio(_))
    }

    /// Resolves once a stdio upstream's stdout has closed; never for HTTP (no pipe to break).
    pub async fn wait_closed(&self) {
        match &self.link {
            Link::Stdio(link) => link.wait_closed().await,
            Link::Http(_) => std::future::pending().await,
        }
    }

    /// Asks the upstream to go by closing a stdio child's stdin; false when the transport has
    /// no such polite way (HTTP), so the caller goes straight to SIGTERM.
    pub fn close(&self) -> bool {
        match &self.link {
            Link::Stdio(link) => {
                link.close_stdin();
                true
            }
            Link::Http(_) => false,
        }
    }

    /// Sends a request and waits for its answer, up to `timeout`.
    pub async fn request(&self, method: &str, params: Value, timeout: Duration) -> Result<Value, RequestError> {
        self.request_relayed(method, params, timeout, None).await
    }

    /// Like [`Upstream::request`], relaying the upstream's notifications about it.
    pub async fn request_relayed(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        relay: Option<Relay>,
    ) -> Result<Value, RequestError> {
        self.request_with_headers(method, params, timeout, relay, &[]).await
    }

    /// Like [`Upstream::request_relayed`], with HTTP headers of the request's own (a tool's
    /// SEP-2243 `Mcp-Param-*` headers: name and plain value) for a 2026-07-28 HTTP upstream;
    /// stdio and legacy upstreams have no use for them.
    pub async fn request_with_headers(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        relay: Option<Relay>,
        headers: &[(String, String)],
    ) -> Result<Value, RequestError> {
        let era = self.era();
        let params = with_meta(era, params);
        match &self.link {
            Link::Stdio(link) => link.request(method, params, timeout, relay).await,
            Link::Http(link) => link.request(era, method, params, timeout, relay, headers).await,
        }
    }

    /// Sends a notification, without waiting for anything.
    pub fn notify(&self, method: &str, params: Value) {
        let era = self.era();
        let params = with_meta(era, params);
        match &self.link {
            Link::Stdio(link) => {
                link.notify(method, params);
            }
            Link::Http(link) => link.notify(era, method, params),
        }
    }

    /// Detects the upstream's era and completes its handshake by `deadline`: a `server/discover`
    /// probe with half the time, else the legacy `initialize`. A server that answers
    /// `initialize` with a modern error (it was only slow to answer the probe) is asked again.
    pub async fn handshake(&self, deadline: Instant) -> Result<Handshake, RequestError> {
        let remaining = || deadline.saturating_duration_since(Instant::now());
        let modern = |discovered: Value| Handshake {
            era: Era::Modern,
            protocol_version: MODERN_REVISION.into(),
            capabilities: declared(&discovered),
        };
        self.set_era(Era::Modern);
        match self.request("server/discover", json!({}), remaining() / 2).await {
            Ok(discovered) => return Ok(modern(discovered)),
            Err(refused @ (RequestError::Closed { .. } | RequestError::Unauthorized { .. })) => return Err(refused),
            // Any other error, or silence, means legacy: never key the fallback to one code.
            Err(_) => {}
        }
        self.set_era(Era::Legacy);
        let params = json!({
            "protocolVersion": LATEST_LEGACY_REVISION,
            "capabilities": client_capabilities(),
            "clientInfo": {"name": "hangar", "version": env!("CARGO_PKG_VERSION")},
        });
        let result = match self.request("initialize", params, remaining()).await {
            Ok(result) => result,
            // Only a 2026-07-28 server answers with its error table's codes: proof of a modern one.
            Err(RequestError::Rpc { code, .. }) if PROTOCOL_ERRORS.contains(&code) => {
                self.set_era(Era::Modern);
                let discovered = self.request("server/discover", json!({}), remaining()).await?;
                return Ok(modern(discovered));
            }
            Err(err) => return Err(err),
        };
        // Only a version the hangar knows is kept: what an upstream says never reaches a surface.
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .and_then(|v| LEGACY_REVISIONS.iter().find(|known| **known == v))
            .map_or_else(|| "unknown".to_owned(), |v| (*v).to_owned());
        if let Link::Http(link) = &self.link {
            link.set_legacy_version(&version);
        }
        match &self.link {
            Link::Http(link) => {
                // Awaited: a server registers what depends on the client's capabilities (tools
                // needing sampling...) when told, so the first `tools/list` must come after.
                let params = with_meta(Era::Legacy, json!({}));
                link.notify_sent(Era::Legacy, "notifications/initialized", params).await;
                link.open_standalone_stream();
            }
            Link::Stdio(_) => self.notify("notifications/initialized", json!({})),
        }
        Ok(Handshake { era: Era::Legacy, protocol_version: version, capabilities: declared(&result) })
    }
}

/// Adds the protocol keys every modern request carries in `params._meta`.
/// A modern request carries the protocol keys in `params._meta` (the caller's client
/// capabilities kept when it passed them on); a legacy one carries none of them.
fn with_meta(era: Era, mut params: Value) -> Value {
    let Value::Object(map) = &mut params else { return params };
    match era {
        Era::Modern => {
            if let Value::Object(meta) = map.entry("_meta").or_insert_with(|| json!({})) {
                meta.insert(META_PROTOCOL_VERSION.into(), MODERN_REVISION.into());
                meta.entry(META_CLIENT_CAPABILITIES).or_insert_with(|| json!({}));
                meta.insert(META_CLIENT_INFO.into(), json!({"name": "hangar", "version": env!("CARGO_PKG_VERSION")}));
            }
        }
        Era::Legacy => {
            if let Some(Value::Object(meta)) = map.get_mut("_meta") {
                meta.retain(|key, _| !key.starts_with(META_PREFIX));
                if meta.is_empty() {
                    map.remove("_meta");
                }
            }
        }
    }
    params
}

/// An upstream's JSON-RPC error as a request failure: its text goes to the server's log only;
/// its code, and its `data` for the protocol's own codes, are kept.
/// A legacy upstream answering the era probe with "method not found" is the probe working as
/// designed, so that answer goes to the hangar's debug log (its code only), not the server's log;
/// "method not found" for an optional method is a plain line, not an error.
fn rpc_failure(log: &crate::logs::LogRing, method: &str, error: RpcError) -> RequestError {
    if method == "server/discover" && error.code == METHOD_NOT_FOUND {
        tracing::debug!(
            mcp_server = log.server_id(),
            code = error.code,
            "server/discover not served: a legacy upstream"
        );
    } else if error.code == METHOD_NOT_FOUND && needed_capability(method).is_some() {
        // An optional method it does not serve, though it declared its capability: a plain
        // fact of the server, never an error in its log.
        log.push(crate::logs::Stream::Stderr, format!("[hangar] `{method}` is not served here").as_bytes());
    } else {
        log.push(
            crate::logs::Stream::Error,
            format!("{method}: JSON-RPC error {}: {}", error.code, error.message).as_bytes(),
        );
    }
    let protocol_data = PROTOCOL_ERRORS.contains(&error.code) || error.code == URL_ELICITATION_REQUIRED;
    let (data, other_data) = if protocol_data { (error.data, None) } else { (None, error.data) };
    let upstream = UpstreamWords { message: hangar_core::echo::upstream_text(&error.message), data: other_data };
    RequestError::Rpc { method: method.into(), code: error.code, data, upstream: Some(Box::new(upstream)) }
}

/// A JSON-RPC request (with an id) or notification, serialized from borrowed parts: building a
/// `Value` with `json!` would first copy `params`, the caller's whole arguments.
#[derive(serde::Serialize)]
struct Outgoing<'a> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<u64>,
    method: &'a str,
    params: &'a Value,
}

/// The JSON text of a request (`id: Some`) or notification.
fn message(id: Option<u64>, method: &str, params: &Value) -> Vec<u8> {
    // Serializing a `Value` cannot fail: its keys are strings.
    serde_json::to_vec(&Outgoing { jsonrpc: "2.0", id, method, params }).unwrap_or_default()
}

/// The same, as one line for a stdio pipe.
fn message_line(id: Option<u64>, method: &str, params: &Value) -> Vec<u8> {
    let mut line = message(id, method, params);
    line.push(b'\n');
    line
}

/// Any JSON value as one line for a stdio pipe.
fn encode(message: &Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(message).unwrap_or_default();
    line.push(b'\n');
    line
}

/// The `capabilities` a handshake's answer declares (`{}` when it declares none).
fn declared(answer: &Value) -> Value {
    answer.get("capabilities").filter(|c| c.is_object()).cloned().unwrap_or_else(|| json!({}))
}

/// The capability a server must declare for the hangar to send it `method`, if one is needed:
/// the optional methods of prompts, resources, logging and completions. Tools are every
/// server's business (a server without them has nothing to call, and is asked anyway).
pub fn needed_capability(method: &str) -> Option<&'static str> {
    match method {
        "logging/setLevel" => Some("logging"),
        "completion/complete" => Some("completions"),
        _ if method.starts_with("prompts/") => Some("prompts"),
        _ if method.starts_with("resources/") => Some("resources"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modern_requests_carry_protocol_meta_and_keep_their_own() {
        let params = with_meta(Era::Modern, json!({"name": "add", "_meta": {"progressToken": 7}}));
        assert_eq!(params["_meta"]["io.modelcontextprotocol/protocolVersion"], MODERN_REVISION);
        assert_eq!(params["_meta"]["io.modelcontextprotocol/clientCapabilities"], json!({}));
        assert_eq!(params["_meta"]["progressToken"], 7);
        assert_eq!(with_meta(Era::Legacy, json!({"name": "add"})), json!({"name": "add"}));
        let passed_on = json!({"_meta": {"io.modelcontextprotocol/clientCapabilities": {"sampling": {}}}});
        assert_eq!(
            with_meta(Era::Modern, passed_on)["_meta"]["io.modelcontextprotocol/clientCapabilities"],
            json!({"sampling": {}})
        );
        let stripped =
            with_meta(Era::Legacy, json!({"_meta": {"io.modelcontextprotocol/logLevel": "info", "progressToken": 1}}));
        assert_eq!(stripped, json!({"_meta": {"progressToken": 1}}), "a legacy upstream sees no modern keys");
    }
}
