//! What each HTTP request gets. POST /mcp goes through the same
//! `handler::handle` as stdio, so the answers are identical.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

use super::leftover;
use super::request::{Head, Reject};
use super::response::Response;
use crate::conformance::{self, peer::CollectingPeer};
use crate::handler::{self, State};
use crate::log::log;
use crate::protocol::{self, Incoming};

pub const MCP_PATH: &str = "/mcp";

pub struct App {
    pub state: Arc<State>,
    pub sse: bool,
    /// What ends each SSE line: `\n`, `\r\n` or `\r`.
    pub sse_line_end: &'static str,
    pub leftover: bool,
    /// With --conformance, requests go to its fixtures instead.
    pub conformance: Option<Arc<conformance::Server>>,
    /// With --require-auth-file or --record-headers: what is checked and recorded first.
    pub witness: super::Witness,
    sessions: AtomicU64,
}

pub enum Reply {
    Send {
        resp: Response,
        /// Marks a `tools/call` answer, for crash-after and garbage.
        is_call: bool,
    },
    /// Never answer (hang faults): the connection stays open until the
    /// client gives up.
    Hold,
    /// An event stream that stays open (a held `subscriptions/listen`): `head`, then each
    /// message from `events` as it comes, until the sender or the client goes.
    Stream { head: Response, events: std::sync::mpsc::Receiver<Value> },
}

fn send(resp: Response) -> Reply {
    Reply::Send { resp, is_call: false }
}

impl App {
    pub fn new(state: Arc<State>, sse: bool, leftover: bool) -> Self {
        Self {
            state,
            sse,
            sse_line_end: "\n",
            leftover,
            conformance: None,
            witness: super::Witness::default(),
            sessions: AtomicU64::new(0),
        }
    }

    pub fn route(&self, head: &Head, body: &[u8]) -> Reply {
        if self.leftover {
            return send(leftover::response(&self.state.sentinel, body));
        }
        if head.path != MCP_PATH {
            return send(Response::empty(404));
        }
        if let Some(refused) = self.witness.check(head) {
            return send(refused);
        }
        match head.method.as_str() {
            "POST" => self.post(head, body),
            // Legacy clients end their session with DELETE; we keep no sessions.
            "DELETE" => send(Response::empty(200)),
            _ => send(Response::empty(405).header("Allow", "POST")),
        }
    }

    /// The answer to a request we refuse to read further; the connection
    /// closes after it.
    pub fn rejected(&self, reject: &Reject) -> Response {
        log(&format!("refusing an HTTP request ({}): {}", reject.status, reject.why));
        if self.leftover {
            return leftover::response(&self.state.sentinel, b"");
        }
        Response::empty(reject.status)
    }

    fn post(&self, head: &Head, body: &[u8]) -> Reply {
        let mut msg: Value = match serde_json::from_slice(body) {
            Ok(msg) => msg,
            Err(e) => {
                // Like stdio: while hanging, not even parse errors are answered.
                if self.state.silenced() {
                    return Reply::Hold;
                }
                let err = protocol::error(&Value::Null, protocol::PARSE_ERROR, &format!("parse error: {e}"), None);
                return send(Response::json(400, &err));
            }
        };
        if let Some(server) = &self.conformance {
            show_param_headers(head, &mut msg);
            return self.post_conformance(server, &msg);
        }
        show_trace_header(head, &mut msg);
        let method = msg.get("method").and_then(Value::as_str);
        let (is_call, is_init) = (method == Some("tools/call"), method == Some("initialize"));
        let wants_answer = !matches!(protocol::classify(&msg), Incoming::Notification | Incoming::Response { .. });
        let Some(reply) = handler::handle(&self.state, &msg) else {
            return if wants_answer { Reply::Hold } else { send(Response::empty(202)) };
        };
        let mut resp = if self.sse { Response::sse(&reply, self.sse_line_end) } else { Response::json(200, &reply) };
        if is_init && reply.get("result").is_some() {
            let n = self.sessions.fetch_add(1, Ordering::Relaxed) + 1;
            resp = resp.header("Mcp-Session-Id", format!("fake-{n}"));
        }
        Reply::Send { resp, is_call }
    }

    /// A conformance request: the notifications it sent while it ran go out
    /// as events ahead of its answer (an event stream), as streamable HTTP
    /// has them; without any, a plain JSON answer.
    fn post_conformance(&self, server: &conformance::Server, msg: &Value) -> Reply {
        let (sink, events) = std::sync::mpsc::channel();
        if server.hold_listen(msg, sink) {
            return Reply::Stream { head: Response::sse_events(&[], self.sse_line_end), events };
        }
        let peer = CollectingPeer::default();
        let Some(reply) = server.handle(msg, &peer) else {
            return send(Response::empty(202));
        };
        let mut events = peer.take();
        let resp = if events.is_empty() && !self.sse {
            Response::json(200, &reply)
        } else {
            events.push(reply);
            Response::sse_events(&events, self.sse_line_end)
        };
        let is_call = msg.get("method").and_then(Value::as_str) == Some("tools/call");
        Reply::Send { resp, is_call }
    }
}

/// For the conformance `test_custom_headers` over HTTP: the request's `Mcp-Param-*` headers join
/// its `_meta`, so the tool can report what a client (or gateway) sent.
fn show_param_headers(head: &Head, msg: &mut Value) {
    if msg.pointer("/params/name").and_then(Value::as_str) != Some(conformance::custom_headers::TOOL) {
        return;
    }
    let seen: serde_json::Map<String, Value> = head
        .headers
        .iter()
        .filter_map(|(name, value)| Some((name.strip_prefix("mcp-param-")?.to_owned(), Value::String(value.clone()))))
        .collect();
    if let Some(params) = msg.get_mut("params").and_then(Value::as_object_mut) {
        let meta = params.entry("_meta").or_insert_with(|| Value::Object(Default::default()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(conformance::custom_headers::HEADERS_SEEN.into(), Value::Object(seen));
        }
    }
}

/// For `echo_meta` over HTTP: the request's `traceparent` header joins the `_meta` it echoes, as
/// `http_traceparent`, so a test sees what the header said too.
fn show_trace_header(head: &Head, msg: &mut Value) {
    let is_echo_meta = msg.pointer("/params/name").and_then(Value::as_str) == Some(crate::tools::ECHO_META);
    if let (true, Some(traceparent)) = (is_echo_meta, head.header("traceparent"))
        && let Some(params) = msg.get_mut("params").and_then(Value::as_object_mut)
    {
        let meta = params.entry("_meta").or_insert_with(|| Value::Object(Default::default()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("http_traceparent".into(), Value::String(traceparent.to_owned()));
        }
    }
}
