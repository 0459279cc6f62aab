//! One upstream's streamable-HTTP connection: each request a POST to its endpoint.
//!
//! Answers come as one JSON body or as an SSE stream scoped to the request (notifications, then
//! the response). The modern wire (2026-07-28) needs the `MCP-Protocol-Version`, `Mcp-Method` and
//! `Mcp-Name` headers; the legacy wire needs the session id the server minted at `initialize`.
//! Whatever the upstream says beyond the JSON-RPC answer (error texts, odd bodies) goes to the
//! server's log only.
//!
//! A server with `auth.oauth` gets `Authorization: Bearer` on every request, the token from its
//! [`SharedToken`]; when the upstream answers 401 `invalid_token`, that token is dropped and the
//! request sent once more with a new one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use hangar_core::challenge::Challenge;
use hangar_core::jsonrpc::{Message, classify_value};
use hangar_core::mcp::{
    CLIENT_REQUESTS, HEADER_METHOD, HEADER_NAME, HEADER_PROTOCOL_VERSION, HEADER_SESSION_ID, MODERN_REVISION,
};
use hangar_core::sync::Unpoisoned;
use hangar_core::trace::{TRACEPARENT, TRACESTATE, TraceContext};
use hangar_core::upstream_auth::{OAuthPer, UpstreamOAuth};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, WWW_AUTHENTICATE};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::sse::{SseEvent, SseReader};
use super::{Era, Notice, Relay, RequestError};
use crate::credentials::bearer::Bearer;
use crate::credentials::discovery::challenge_param;
use crate::credentials::shared_token::SharedToken;
use crate::logs::{LogRing, Stream};
use crate::vault::Vault;

/// The largest answer read from an upstream; a bigger one is refused, not buffered.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// The most of a 401 or 403 answer's body the server's log keeps.
const MAX_LOGGED_REFUSAL: usize = 4096;

pub struct HttpUpstream {
    client: reqwest::Client,
    endpoint: String,
    next_id: AtomicU64,
    /// The legacy session id and negotiated version, once `initialize` has answered.
    session: Arc<Mutex<Option<HeaderValue>>>,
    legacy_version: Mutex<Option<String>>,
    log: Arc<LogRing>,
    notices: mpsc::UnboundedSender<Notice>,
    /// The legacy session's standalone GET stream, read while the link lives.
    standalone: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The upstream's own requests relayed to a call's client, by the id they were relayed
    /// with: the upstream's id for each.
    asks: Mutex<HashMap<String, Value>>,
    next_ask: AtomicU64,
    /// Where the access token every request carries comes from, for a server with
    /// `auth.oauth` or `auth.token_exchange`.
    bearer: Option<Bearer>,
}

impl Drop for HttpUpstream {
    fn drop(&mut self) {
        if let Some(stream) = self.standalone.locked().take() {
            stream.abort();
        }
    }
}

impl HttpUpstream {
    /// A connection to `endpoint` sending `headers` (the server's `auth.headers`, credentials
    /// read) with every request, marked sensitive so no debug output of the client shows them;
    /// with `oauth`, its requests carry that configuration's token, kept in `vault` if given.
    pub fn new(
        endpoint: &str,
        headers: &[(&str, &str)],
        oauth: Option<&UpstreamOAuth>,
        vault: Option<Arc<Vault>>,
        log: Arc<LogRing>,
        notices: mpsc::UnboundedSender<Notice>,
    ) -> Result<Self, String> {
        let mut default_headers = HeaderMap::new();
        for (name, value) in headers {
            // The config checked both when it was loaded; the message names the header only.
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("`{name}` cannot be an HTTP header name"))?;
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| format!("the credential of header `{name}` cannot be an HTTP header value"))?;
            value.set_sensitive(true);
            default_headers.insert(name, value);
        }
        let client = reqwest::Client::builder()
            .default_headers(default_headers)
            .connect_timeout(Duration::from_secs(5))
            // Never follow a redirect to somewhere the config did not name.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|err| format!("cannot set up an HTTP client: {err}"))?;
        // A `per: user` server's connections get their caller's bearer (`with_bearer`).
        let shared = oauth.filter(|oauth| oauth.per == OAuthPer::Shared);
        let bearer = shared.and_then(|oauth| Some((oauth, oauth.registered()?))).map(|(oauth, registered)| {
            let store = vault.map(|vault| (vault, log.server_id().to_owned()));
            Bearer::Shared(Arc::new(SharedToken::new(client.clone(), endpoint, oauth, registered, store)))
        });
        Ok(HttpUpstream {
            endpoint: endpoint.to_owned(),
            next_id: AtomicU64::new(1),
            session: Arc::default(),
            legacy_version: Mutex::default(),
            log,
            notices,
            standalone: Mutex::default(),
            asks: Mutex::default(),
            next_ask: AtomicU64::new(1),
            bearer,
            client,
        })
    }

    /// This connection's requests carry `bearer`'s token (one caller's own).
    pub fn with_bearer(mut self, bearer: Bearer) -> Self {
        self.bearer = Some(bearer);
        self
    }

    /// Answers the upstream's request relayed as `ask_id` with the client's response message
    /// (`result` or `error`), POSTed as a client would; whether it was still waiting.
    pub fn answer_ask(&self, ask_id: &str, response: &Value) -> bool {
        let Some(id) = self.asks.locked().remove(ask_id) else { return false };
        let answer = super::ask_answer(id, response);
        let post = self.post(Era::Legacy, "", &Value::Null, serde_json::to_vec(&answer).unwrap_or_default());
        tokio::spawn(async move {
            let _ = post.timeout(Duration::from_secs(10)).send().await;
        });
        true
    }

    /// Relays the upstream's own request for the client (sampling, elicitation, roots), sent
    /// on the answer stream of a call, to that call's client if it can be asked; whether it did.
    fn relay_ask(&self, id: &Value, method: &str, params: Option<Value>, relays: &[(u64, Relay)]) -> bool {
        if !CLIENT_REQUESTS.iter().any(|(known, _)| *known == method) {
            return false;
        }
        let Some((_, asker)) = relays.iter().find(|(_, relay)| relay.asks) else { return false };
        let ask_id = format!("upstream-ask-{}", self.next_ask.fetch_add(1, Ordering::Relaxed));
        let mut asks = self.asks.locked();
        let mut ask = json!({"jsonrpc": "2.0", "id": ask_id, "method": method, "mcp_server": self.log.server_id()});
        // Absent stays absent (`roots/list` has no params): never `"params": null`.
        if let Some(params) = params {
            ask["params"] = params;
        }
        if asker.to.send(ask).is_err() {
            return false;
        }
        asks.insert(ask_id, id.clone());
        true
    }

    pub(super) fn set_legacy_version(&self, version: &str) {
        *self.legacy_version.locked() = Some(version.to_owned());
    }

    pub(super) async fn request(
        &self,
        era: Era,
        method: &str,
        mut params: Value,
        timeout: Duration,
        relay: Option<Relay>,
        headers: &[(String, String)],
    ) -> Result<Value, RequestError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if relay.as_ref().is_some_and(|r| r.progress)
            && let Value::Object(map) = &mut params
            && let Value::Object(meta) = map.entry("_meta").or_insert_with(|| json!({}))
        {
            meta.insert("progressToken".into(), json!(id));
        }
        let relays: Vec<(u64, Relay)> = relay.into_iter().map(|r| (id, r)).collect();
        let exchange = async {
            let mut retried = false;
            let response = loop {
                let token = match &self.bearer {
                    Some(bearer) => Some(bearer.get().await.map_err(|err| self.no_token(method, &err))?),
                    None => None,
                };
                let body = super::message(Some(id), method, &params);
                let mut request = self.post_as(era, method, &params, body, token.as_deref());
                if era == Era::Modern {
                    for (name, value) in headers {
                        request = request.header(name.as_str(), header_value(value));
                    }
                }
                let response = request.send().await.map_err(|err| self.transport_error(method, timeout, &err))?;
                // The upstream refused the token: a new one, once.
                if let (Some(bearer), Some(token)) = (&self.bearer, &token)
                    && !retried
                    && refuses_token(&response)
                {
                    bearer.refused(token);
                    retried = true;
                    continue;
                }
                break response;
            };
            if let Some(session) = response.headers().get(HEADER_SESSION_ID) {
                *self.session.locked() = Some(session.clone());
            }
            self.read_answer(method, id, response, &relays).await
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(answer) => answer,
            Err(_) => Err(RequestError::Timeout { method: method.into(), timeout }),
        }
    }

    /// Sends a notification in the background; its answer (202) is of no interest.
    pub(super) fn notify(&self, era: Era, method: &str, params: Value) {
        let request = self.post(era, method, &params, super::message(None, method, &params));
        tokio::spawn(async move {
            let _ = request.timeout(Duration::from_secs(10)).send().await;
        });
    }

    /// Sends a notification and waits (bounded) for its answer, so the server has taken it in.
    pub(super) async fn notify_sent(&self, era: Era, method: &str, params: Value) {
        let request = self.post(era, method, &params, super::message(None, method, &params));
        let _ = request.timeout(Duration::from_secs(10)).send().await;
    }

    /// A POST with the token held now, if any (for what does not wait for one).
    fn post(&self, era: Era, method: &str, params: &Value, body: Vec<u8>) -> reqwest::RequestBuilder {
        let token = self.bearer.as_ref().and_then(|bearer| bearer.current());
        self.post_as(era, method, params, body, token.as_deref())
    }

    /// A POST of `body`, with `token` as its bearer token if given.
    fn post_as(
        &self,
        era: Era,
        method: &str,
        params: &Value,
        body: Vec<u8>,
        token: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let mut request = self
            .client
            .post(&self.endpoint)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .body(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        // The trace context the request carries in `_meta` goes in the W3C headers too, for
        // HTTP servers and proxies that read only those.
        if let Some(trace) = params.get("_meta").and_then(Value::as_object).and_then(TraceContext::from_meta) {
            request = request.header(TRACEPARENT, trace.traceparent());
            if let Some(state) = trace.tracestate {
                request = request.header(TRACESTATE, state);
            }
        }
        match era {
            Era::Modern => {
                request = request.header(HEADER_PROTOCOL_VERSION, MODERN_REVISION).header(HEADER_METHOD, method);
                let name = match method {
                    "tools/call" | "prompts/get" => params.get("name"),
                    "resources/read" => params.get("uri"),
                    _ => None,
                };
                if let Some(name) = name.and_then(Value::as_str) {
                    request = request.header(HEADER_NAME, header_value(name));
                }
            }
            Era::Legacy => {
                if let Some(version) = self.legacy_version.locked().as_deref() {
                    request = request.header(HEADER_PROTOCOL_VERSION, version);
                }
                if let Some(session) = self.session.locked().clone() {
                    request = request.header(HEADER_SESSION_ID, session);
                }
            }
        }
        request
    }

    /// No token could be had for `method`: why goes to the server's log (never a secret), and
    /// the request fails as the upstream would have refused it, 401.
    fn no_token(&self, method: &str, err: &crate::credentials::shared_token::TokenError) -> RequestError {
        use crate::credentials::shared_token::TokenError;
        let missing = match err {
            TokenError::NotConnected => Some(super::CallerTokenMissing::NotConnected),
            TokenError::NoSubject => Some(super::CallerTokenMissing::NoSubject),
            _ => None,
        };
        if let Some(why) = missing {
            return RequestError::NoCallerToken { method: method.into(), why };
        }
        tracing::warn!(server = %self.log.server_id(), "no access token for an upstream: {err}");
        self.log.push(Stream::Stdout, format!("[hangar] no access token for `{method}`: {err}").as_bytes());
        // A caller's exchange failed: theirs to hear, not a refusal by the upstream (never asked).
        if matches!(self.bearer, Some(Bearer::Exchange { .. })) {
            let why = super::CallerTokenMissing::ExchangeFailed;
            return RequestError::NoCallerToken { method: method.into(), why };
        }
        RequestError::Status { method: method.into(), status: 401 }
    }

    fn transport_error(&self, method: &str, timeout: Duration, err: &reqwest::Error) -> RequestError {
        if err.is_timeout() {
            RequestError::Timeout { method: method.into(), timeout }
        } else {
            // Refused, reset, unreachable: nothing is serving the endpoint any more.
            RequestError::Closed { method: method.into() }
        }
    }

    async fn read_answer(
        &self,
        method: &str,
        id: u64,
        mut response: reqwest::Response,
        relays: &[(u64, Relay)],
    ) -> Result<Value, RequestError> {
        let status = response.status().as_u16();
        if status == 401 || status == 403 {
            // The challenge's parsed parameters only; the rest of what it said goes to the log.
            let challenge = response
                .headers()
                .get(WWW_AUTHENTICATE)
                .and_then(|value| value.to_str().ok())
                .and_then(Challenge::parse);
            if let Ok(body) = response.bytes().await
                && !body.is_empty()
            {
                self.log.push(Stream::Stdout, &body[..body.len().min(MAX_LOGGED_REFUSAL)]);
            }
            return Err(RequestError::Unauthorized { method: method.into(), status, challenge });
        }
        let is_sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if is_sse {
            return self.read_event_stream(method, id, &mut response, relays).await;
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|_| RequestError::Closed { method: method.into() })? {
            if body.len() + chunk.len() > MAX_BODY_BYTES {
                // Only this request's answer: it fails alone, counted once, and is not read on.
                let bytes = (body.len() + chunk.len()) as u64;
                self.skipped(&format!("`{method}`: an answer over {MAX_BODY_BYTES} bytes; the request failed"));
                return Err(RequestError::Oversized { method: method.into(), bytes });
            }
            body.extend_from_slice(&chunk);
        }
        match serde_json::from_slice::<Value>(&body) {
            Ok(message) => match self.answer(method, id, message, relays) {
                Some(answer) => answer,
                None => Err(RequestError::Status { method: method.into(), status }),
            },
            Err(_) => {
                if !body.is_empty() {
                    self.log.push(Stream::Stdout, &body);
                }
                Err(RequestError::Status { method: method.into(), status })
            }
        }
    }

    /// Reads SSE events until the response to `id`; notifications on the way are acted on. An
    /// event over the size limit is skipped as it streams by (never buffered whole), and the
    /// events after it are still read.
    async fn read_event_stream(
        &self,
        method: &str,
        id: u64,
        response: &mut reqwest::Response,
        relays: &[(u64, Relay)],
    ) -> Result<Value, RequestError> {
        let mut reader = SseReader::new(MAX_BODY_BYTES);
        let mut last_skipped: Option<usize> = None;
        loop {
            let Some(chunk) = response.chunk().await.map_err(|_| RequestError::Closed { method: method.into() })?
            else {
                return Err(match last_skipped.or(reader.skipping()) {
                    // The answer was most likely the event that was skipped.
                    Some(bytes) => RequestError::Oversized { method: method.into(), bytes: bytes as u64 },
                    None => RequestError::Closed { method: method.into() },
                });
            };
            for event in reader.feed(&chunk) {
                match event {
                    SseEvent::Data(data) => {
                        if let Ok(message) = serde_json::from_str(&String::from_utf8_lossy(&data))
                            && let Some(answer) = self.answer(method, id, message, relays)
                        {
                            return answer;
                        }
                    }
                    SseEvent::Skipped { bytes } => {
                        last_skipped = Some(bytes);
                        self.skipped(&format!("`{method}`: an event over {MAX_BODY_BYTES} bytes in the answer stream"));
                    }
                }
            }
        }
    }

    /// Logs (without its content) a message over the size limit that was skipped, and counts
    /// it once against the server.
    fn skipped(&self, what: &str) {
        tracing::warn!(limit = MAX_BODY_BYTES, "an upstream sent a message over the size limit; skipped");
        self.log.push(Stream::Stdout, format!("[hangar] skipped unread: {what}").as_bytes());
        let _ = self.notices.send(Notice::Oversized);
    }

    /// Opens the legacy session's standalone GET stream, where the server sends what belongs to
    /// no request (log lines, resource updates, list changes): read while the link lives, its
    /// notifications acted on as any other. A server that offers none (405) is left alone.
    pub(super) fn open_standalone_stream(&self) {
        let mut request = self.client.get(&self.endpoint).header(ACCEPT, "text/event-stream");
        if let Some(token) = self.bearer.as_ref().and_then(|bearer| bearer.current()) {
            request = request.bearer_auth(token);
        }
        if let Some(version) = self.legacy_version.locked().as_deref() {
            request = request.header(HEADER_PROTOCOL_VERSION, version);
        }
        if let Some(session) = self.session.locked().clone() {
            request = request.header(HEADER_SESSION_ID, session);
        }
        let (notices, log) = (self.notices.clone(), self.log.clone());
        let stream = tokio::spawn(async move {
            let Ok(mut response) = request.send().await else { return };
            let is_sse = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("text/event-stream"));
            if !response.status().is_success() || !is_sse {
                return;
            }
            let mut reader = SseReader::new(MAX_BODY_BYTES);
            while let Ok(Some(chunk)) = response.chunk().await {
                for event in reader.feed(&chunk) {
                    let SseEvent::Data(data) = event else {
                        log.push(Stream::Stdout, b"[hangar] skipped unread: an oversized event on the GET stream");
                        let _ = notices.send(Notice::Oversized);
                        continue;
                    };
                    if let Ok(Message::Notification { method, params }) = serde_json::from_slice::<Value>(&data)
                        .map_err(|_| ())
                        .and_then(|v| classify_value(v).map_err(|_| ()))
                    {
                        if method == "notifications/tools/list_changed" {
                            let _ = notices.send(Notice::ToolsChanged);
                        }
                        super::relay_notification(&[], method, params, &notices);
                    }
                }
            }
        });
        if let Some(previous) = self.standalone.locked().replace(stream) {
            previous.abort();
        }
    }

    /// The answer to `id` if `message` is it; acts on notifications and logs anything else.
    fn answer(
        &self,
        method: &str,
        id: u64,
        message: Value,
        relays: &[(u64, Relay)],
    ) -> Option<Result<Value, RequestError>> {
        match classify_value(message) {
            Ok(Message::Response { id: answered, outcome }) if answered.as_u64() == Some(id) => Some(match outcome {
                Ok(result) => Ok(result),
                Err(error) => Err(super::rpc_failure(&self.log, method, error)),
            }),
            Ok(Message::Notification { method, params }) => {
                if method == "notifications/tools/list_changed" {
                    let _ = self.notices.send(Notice::ToolsChanged);
                }
                super::relay_notification(relays, method, params, &self.notices);
                None
            }
            // Its own request in the answer stream (a legacy server's sampling...): answered by
            // a POST of its own, as a client would.
            Ok(Message::Request { id, method, params }) => {
                if self.relay_ask(&id, &method, params, relays) {
                    return None;
                }
                let answer = super::answer_upstream_request(&id, &method);
                let post =
                    self.post(Era::Legacy, &method, &Value::Null, serde_json::to_vec(&answer).unwrap_or_default());
                tokio::spawn(async move {
                    let _ = post.timeout(Duration::from_secs(10)).send().await;
                });
                None
            }
            _ => {
                self.log.push(
                    Stream::Stdout,
                    format!("[hangar] `{method}`: an unexpected message in the answer").as_bytes(),
                );
                None
            }
        }
    }
}

/// A header value for `Mcp-Name` or `Mcp-Param-*`: as is when it is plain ASCII, else
/// base64-wrapped (as is a value that looks wrapped already, so it is not read as such).
fn header_value(name: &str) -> HeaderValue {
    let looks_wrapped = name.starts_with("=?base64?") && name.ends_with("?=");
    let plain = name.bytes().all(|b| (0x20..0x7f).contains(&b)) && name.trim() == name && !looks_wrapped;
    let text = if plain {
        name.to_owned()
    } else {
        format!("=?base64?{}?=", base64::engine::general_purpose::STANDARD.encode(name))
    };
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Whether an answer is the upstream refusing the token it was sent: 401 with an
/// `invalid_token` challenge (RFC 6750 §3.1).
fn refuses_token(response: &reqwest::Response) -> bool {
    response.status() == reqwest::StatusCode::UNAUTHORIZED
        && response
            .headers()
            .get_all(reqwest::header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .any(|challenge| challenge_param(challenge, "error").as_deref() == Some("invalid_token"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_base64_wrapped_only_when_they_must_be() {
        assert_eq!(header_value("add"), "add");
        assert_eq!(header_value("héllo"), "=?base64?aMOpbGxv?=");
        assert_eq!(header_value(" padded"), "=?base64?IHBhZGRlZA==?=");
        assert_eq!(header_value("=?base64?SGk=?="), "=?base64?PT9iYXNlNjQ/U0drPT89?=", "a literal that looks wrapped");
    }
}
