//! One upstream's stdio JSON-RPC connection: many concurrent callers over one pipe.
//!
//! A writer task owns stdin (so closing the connection closes the child's stdin), a reader task
//! owns stdout and routes each answer by the id the hangar minted for it
//! ([`hangar_core::jsonrpc::PendingMap`]). Lines that are not protocol messages, answers to ids
//! nobody waits for and over-long lines go to the server's log and break nothing. A request
//! whose caller gives up (timeout, or its future dropped) is cancelled upstream with
//! `notifications/cancelled`. Protocol `_meta` and era detection are [`super::Upstream`]'s.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hangar_core::jsonrpc::{Message, PendingMap, RpcError, classify_value};
use hangar_core::mcp::CLIENT_REQUESTS;
use hangar_core::sync::Unpoisoned;
use serde_json::{Value, json};
use tokio::io::BufReader;
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot, watch};

use super::{Notice, Relay, RequestError, encode, message_line};
use crate::logs::{LogRing, Stream};
use hangar_runtime::lines::{Line, read_line, write_unbuffered};

/// The longest line accepted from an upstream's stdout; longer ones are skipped and logged.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

type Waiter = oneshot::Sender<Result<Value, RpcError>>;

/// Marks, inside the reader, "your answer was over the size limit" (never a real JSON-RPC code:
/// those fit in i32).
const OVERSIZED: i64 = i64::MIN;

/// What the reader needs to route what it reads.
struct Routes {
    pending: Mutex<PendingMap<Waiter>>,
    /// The upstream's own requests relayed to a call's client, by the id they were relayed
    /// with: the upstream's id for each.
    asks: Mutex<HashMap<String, Value>>,
    next_ask: AtomicU64,
    /// Relayed requests, by the id the upstream saw (which is also their progress token).
    relays: Mutex<Vec<(u64, Relay)>>,
    /// Whose roots the upstream last got (`sync_roots`).
    roots: Mutex<Roots>,
    /// Bumped each time a client's answer to a relayed `roots/list` is passed to the upstream.
    roots_answered: watch::Sender<u64>,
    log: Arc<LogRing>,
    notices: mpsc::UnboundedSender<Notice>,
}

/// What the upstream knows of roots: whether it ever asked for them, and whose it got.
#[derive(Default)]
struct Roots {
    asked: bool,
    /// The client whose answer it got last (`None`: the hangar's empty answer, or nobody's).
    given_to: Option<Arc<str>>,
    /// Relayed `roots/list` requests still waiting for their client's answer.
    waiting: Vec<String>,
}

/// How long a call waits for its client's roots after telling the upstream they changed; past
/// it the call goes on (the upstream may not ask at all).
const ROOTS_SYNC_WITHIN: Duration = Duration::from_secs(5);
/// The relay id a roots sync borrows, outside the ids the pending map hands out.
const ROOTS_SYNC_ID: u64 = u64::MAX;

pub struct StdioUpstream {
    writer: Mutex<Option<mpsc::UnboundedSender<Vec<u8>>>>,
    routes: Arc<Routes>,
    /// Becomes true when stdout reaches its end or fails.
    closed: watch::Receiver<bool>,
}

impl StdioUpstream {
    /// Answers the upstream's request relayed as `ask_id` with the client's response message
    /// (`result` or `error`); whether it was still waiting.
    pub fn answer_ask(&self, ask_id: &str, response: &Value) -> bool {
        let Some(id) = lock(&self.routes.asks).remove(ask_id) else { return false };
        let answer = super::ask_answer(id, response);
        let writer = lock(&self.writer).clone();
        let sent = writer.is_some_and(|writer| writer.send(encode(&answer)).is_ok());
        let roots = {
            let mut roots = lock(&self.routes.roots);
            let before = roots.waiting.len();
            roots.waiting.retain(|waiting| waiting != ask_id);
            roots.waiting.len() != before
        };
        if roots {
            self.routes.roots_answered.send_modify(|n| *n += 1);
        }
        sent
    }

    /// Roots are the client's, never another's: an upstream that asked for roots before, and
    /// last got another client's (or the hangar's empty answer), is sent
    /// `notifications/roots/list_changed` before this call, and the `roots/list` it then sends
    /// is relayed to this call's client; the call waits for that answer (up to
    /// [`ROOTS_SYNC_WITHIN`]), so a server that caches roots (server-everything does) answers
    /// the call with its own client's. With several calls that can be asked in flight, the
    /// upstream's request names none of them and the hangar answers it with no roots.
    pub async fn sync_roots(&self, relay: &Relay) {
        let Some(asker) = relay.asker.clone().filter(|_| relay.asks) else { return };
        {
            let roots = lock(&self.routes.roots);
            if !roots.asked || roots.given_to.as_deref() == Some(&*asker) {
                return;
            }
        }
        let mut answered = self.routes.roots_answered.subscribe();
        let seen = *answered.borrow_and_update();
        // What the upstream logs meanwhile is about this client's roots: its call's.
        let borrowed = Relay { progress: false, ..relay.clone() };
        lock(&self.routes.relays).push((ROOTS_SYNC_ID, borrowed));
        if self.notify("notifications/roots/list_changed", json!({})) {
            let _ = tokio::time::timeout(ROOTS_SYNC_WITHIN, answered.wait_for(|n| *n > seen)).await;
        }
        lock(&self.routes.relays).retain(|(id, relay)| *id != ROOTS_SYNC_ID || relay.asker.as_deref() != Some(&*asker));
    }

    /// Wires the pipes and starts the reader and writer tasks.
    pub fn start(
        stdin: ChildStdin,
        stdout: ChildStdout,
        log: Arc<LogRing>,
        notices: mpsc::UnboundedSender<Notice>,
    ) -> StdioUpstream {
        let (tx, rx) = mpsc::unbounded_channel();
        let (closed_tx, closed) = watch::channel(false);
        let routes = Arc::new(Routes {
            pending: Mutex::default(),
            asks: Mutex::default(),
            next_ask: AtomicU64::new(1),
            relays: Mutex::default(),
            roots: Mutex::default(),
            roots_answered: watch::channel(0).0,
            log,
            notices,
        });
        let upstream = StdioUpstream { writer: Mutex::new(Some(tx.clone())), routes: routes.clone(), closed };
        tokio::spawn(async move {
            // A failed write means the child is gone; the reader sees that and ends the connection.
            let _ = write_unbuffered(stdin, rx).await;
        });
        // Weak: answering the upstream's pings must not keep its stdin open after close_stdin.
        let answers = tx.downgrade();
        drop(tx);
        tokio::spawn(async move {
            read_loop(stdout, &routes, &answers).await;
            // Nobody will answer the rest: fail them now rather than at their timeouts.
            lock(&routes.pending).drain().for_each(drop);
            let _ = closed_tx.send(true);
        });
        upstream
    }

    /// Resolves once the upstream's stdout has closed.
    pub async fn wait_closed(&self) {
        let mut closed = self.closed.clone();
        let _ = closed.wait_for(|c| *c).await;
    }

    /// Closes the child's stdin, the polite way to ask an MCP server to exit.
    pub fn close_stdin(&self) {
        lock(&self.writer).take();
    }

    /// Sends a request and waits for its answer, up to `timeout`. With a `relay`, the upstream
    /// gets a progress token and its notifications about the request go to the relay.
    pub async fn request(
        &self,
        method: &str,
        mut params: Value,
        timeout: Duration,
        relay: Option<Relay>,
    ) -> Result<Value, RequestError> {
        let (tx, rx) = oneshot::channel();
        let id = lock(&self.routes.pending).insert(tx);
        let mut in_flight = InFlight { upstream: self, id, answered: false };
        if let Some(relay) = relay {
            if relay.progress
                && let Value::Object(map) = &mut params
                && let Value::Object(meta) = map.entry("_meta").or_insert_with(|| json!({}))
            {
                meta.insert("progressToken".into(), json!(id));
            }
            lock(&self.routes.relays).push((id, relay));
        }
        let line = message_line(Some(id), method, &params);
        if !self.send(line) {
            in_flight.answered = true;
            lock(&self.routes.pending).cancel(id);
            return Err(RequestError::Closed { method: method.into() });
        }
        let outcome = tokio::time::timeout(timeout, rx).await;
        in_flight.answered = outcome.is_ok();
        match outcome {
            Ok(Ok(Ok(result))) => Ok(result),
            Ok(Ok(Err(error))) if error.code == OVERSIZED => {
                let bytes = error.data.as_ref().and_then(Value::as_u64).unwrap_or_default();
                Err(RequestError::Oversized { method: method.into(), bytes })
            }
            Ok(Ok(Err(error))) => Err(super::rpc_failure(&self.routes.log, method, error)),
            Ok(Err(_)) => Err(RequestError::Closed { method: method.into() }),
            // InFlight's drop cancels it upstream.
            Err(_) => Err(RequestError::Timeout { method: method.into(), timeout }),
        }
    }

    /// Sends a notification; returns false if the pipe is closed.
    pub fn notify(&self, method: &str, params: Value) -> bool {
        self.send(message_line(None, method, &params))
    }

    fn send(&self, line: Vec<u8>) -> bool {
        lock(&self.writer).as_ref().is_some_and(|tx| tx.send(line).is_ok())
    }
}

/// A request on the pipe. Dropped unanswered (timed out, or its caller gone), it is forgotten
/// and cancelled upstream, so the upstream stops working for nobody.
struct InFlight<'a> {
    upstream: &'a StdioUpstream,
    id: u64,
    answered: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let routes = &self.upstream.routes;
        lock(&routes.relays).retain(|(id, _)| *id != self.id);
        if !self.answered && lock(&routes.pending).cancel(self.id) {
            self.upstream
                .notify("notifications/cancelled", json!({"requestId": self.id, "reason": "cancelled by the caller"}));
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.locked()
}

async fn read_loop(stdout: ChildStdout, routes: &Routes, answers: &mpsc::WeakUnboundedSender<Vec<u8>>) {
    // Buffers are per upstream and zeroed up front (so resident): 64 KiB here and for stderr
    // cost 128 KiB of RSS per running upstream; 4 KiB here and 1 KiB for stderr cost 5 (a
    // thousand upstreams: 5 MiB). A longer line is gathered in `buf` as it comes, a read at a
    // time.
    let mut reader = BufReader::with_capacity(4 * 1024, stdout);
    let mut buf = Vec::new();
    loop {
        match read_line(&mut reader, &mut buf, MAX_LINE_BYTES).await {
            Ok(Line::Complete) if buf.iter().all(u8::is_ascii_whitespace) => {}
            Ok(Line::Complete) => handle_line(&buf, routes, answers),
            Ok(Line::TooLong(len)) => skip_long_line(len, &buf, routes),
            Ok(Line::Eof) | Err(_) => return,
        }
    }
}

/// An over-long line is skipped, not fatal: the answers that follow it still reach their
/// callers. If its head shows it was the answer to a request in flight, that one request fails
/// at once (its answer will never come whole); nothing else does. It counts once against the
/// server ([`Notice::Oversized`]), and the log says what happened without any of its content.
fn skip_long_line(len: usize, head: &[u8], routes: &Routes) {
    let waiter = answered_id(head).and_then(|id| Some((id, lock(&routes.pending).take(&json!(id))?)));
    let what = match waiter {
        Some((id, waiter)) => {
            let oversized = RpcError { code: OVERSIZED, message: String::new(), data: Some(json!(len)) };
            let _ = waiter.send(Err(oversized));
            format!("it was the answer to request {id}, which failed; other requests go on")
        }
        None => "it answered no request in flight; every request goes on".to_owned(),
    };
    tracing::warn!(len, limit = MAX_LINE_BYTES, "an upstream printed a line on stdout over the size limit; skipped");
    routes.log.push(
        Stream::Stdout,
        format!("[hangar] skipped a {len}-byte line on stdout (limit {MAX_LINE_BYTES} bytes) unread: {what}")
            .as_bytes(),
    );
    let _ = routes.notices.send(Notice::Oversized);
}

/// The id of the JSON-RPC answer whose first bytes are `head`: its top-level `"id"` when that is
/// a number and the head shows no top-level `"method"` (which would make it the upstream's own
/// request, whose ids are not ours).
fn answered_id(head: &[u8]) -> Option<u64> {
    if head.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return None;
    }
    let (mut depth, mut at, mut id, mut is_request) = (0usize, 0, None, false);
    while let Some(&byte) = head.get(at) {
        at += 1;
        match byte {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1)?,
            b'"' => {
                let start = at;
                while head.get(at).is_some_and(|b| *b != b'"') {
                    at += if head[at] == b'\\' { 2 } else { 1 };
                }
                // A string the head cuts short ends the scan: nothing after it is known.
                let Some(text) = head.get(start..at).filter(|_| at < head.len()) else { break };
                at += 1;
                let rest = trim_start(&head[at..]);
                let Some(value) = rest.strip_prefix(b":").map(trim_start) else { continue };
                match (depth, text) {
                    (1, b"method") => is_request = true,
                    (1, b"id") => {
                        let digits = value.iter().take_while(|b| b.is_ascii_digit()).count();
                        // The number must end inside the head, or it may have been cut short.
                        let ends = value.get(digits).is_some_and(|b| b",}".contains(b) || b.is_ascii_whitespace());
                        id = (digits > 0 && ends)
                            .then(|| std::str::from_utf8(&value[..digits]).ok()?.parse().ok())
                            .flatten();
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    id.filter(|_| !is_request)
}

fn trim_start(bytes: &[u8]) -> &[u8] {
    let skip = bytes.iter().take_while(|b| b.is_ascii_whitespace()).count();
    &bytes[skip..]
}

/// Relays the upstream's own request for the client (sampling, elicitation, roots) to the one
/// call in flight whose client can be asked; whether it did. With none, or several (a stdio
/// request names no call, so which client asked is unknown), the hangar answers it itself.
fn relay_ask(routes: &Routes, id: &Value, method: &str, params: Option<Value>) -> bool {
    if !CLIENT_REQUESTS.iter().any(|(known, _)| *known == method) {
        return false;
    }
    let relays = lock(&routes.relays);
    let mut askers = relays.iter().filter(|(_, relay)| relay.asks);
    let roots = method == "roots/list";
    if roots {
        lock(&routes.roots).asked = true;
    }
    let (Some((_, asker)), None) = (askers.next(), askers.next()) else {
        if roots {
            // The hangar answers it: with no roots, which are nobody's.
            lock(&routes.roots).given_to = None;
        }
        return false;
    };
    let ask_id = format!("upstream-ask-{}", routes.next_ask.fetch_add(1, Ordering::Relaxed));
    lock(&routes.asks).insert(ask_id.clone(), id.clone());
    if roots {
        let mut roots = lock(&routes.roots);
        roots.given_to = asker.asker.clone();
        roots.waiting.push(ask_id.clone());
    }
    let mut ask = json!({"jsonrpc": "2.0", "id": ask_id, "method": method, "mcp_server": routes.log.server_id()});
    // Absent stays absent (`roots/list` has no params): never `"params": null`.
    if let Some(params) = params {
        ask["params"] = params;
    }
    if asker.to.send(ask).is_err() {
        lock(&routes.asks).remove(&ask_id);
        return false;
    }
    true
}

fn handle_line(line: &[u8], routes: &Routes, answers: &mpsc::WeakUnboundedSender<Vec<u8>>) {
    let Ok(message) = serde_json::from_slice::<Value>(line) else {
        routes.log.push(Stream::Stdout, line);
        return;
    };
    match classify_value(message) {
        Ok(Message::Response { id, outcome }) => match lock(&routes.pending).take(&id) {
            Some(waiter) => {
                let _ = waiter.send(outcome);
            }
            None => routes.log.push(Stream::Stdout, line),
        },
        Ok(Message::Request { id, method, params }) => {
            if relay_ask(routes, &id, &method, params) {
                return;
            }
            let answer = super::answer_upstream_request(&id, &method);
            if let Some(writer) = answers.upgrade() {
                let _ = writer.send(encode(&answer));
            }
        }
        Ok(Message::Notification { method, params }) => {
            if method == "notifications/tools/list_changed" {
                let _ = routes.notices.send(Notice::ToolsChanged);
            }
            super::relay_notification(&lock(&routes.relays), method, params, &routes.notices);
        }
        Err(_) => routes.log.push(Stream::Stdout, line),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_id_of_an_answer_from_its_head() {
        assert_eq!(answered_id(br#"{"id":17,"jsonrpc":"2.0","result":{"content":[{"text":"xxxx"#), Some(17));
        assert_eq!(answered_id(br#" { "jsonrpc" : "2.0", "id" : 5 , "result": "#), Some(5));
        assert_eq!(
            answered_id(br#"{"jsonrpc":"2.0","result":{"id":3,"text":"x"#),
            None,
            "a nested id is not the answer's"
        );
        assert_eq!(answered_id(br#"{"jsonrpc":"2.0","result":{"id":3},"id":4}"#), Some(4));
        assert_eq!(answered_id(br#"{"jsonrpc":"2.0","result":{"text":"\"id\":9, x"#), None, "ids inside strings");
        assert_eq!(answered_id(br#"{"id":12"#), None, "a number at the end of the head may be cut short");
        assert_eq!(
            answered_id(br#"{"id":2,"method":"sampling/createMessage","params":{"#),
            None,
            "the upstream's own request"
        );
        assert_eq!(answered_id(br#"{"id":"abc","result":"#), None);
        assert_eq!(answered_id(b"xxxxxxxxxxxxxxxx"), None);
        assert_eq!(answered_id(b""), None);
        assert_eq!(answered_id(br#"[{"id":1}]"#), None);
    }
}
