//! One upstream's stdio JSON-RPC connection: many concurrent callers over one pipe.
//!
//! A writer task owns stdin (so closing the connection closes the child's stdin), a reader task
//! owns stdout and routes each answer by the id the hangar minted for it
//! ([`hangar_core::jsonrpc::PendingMap`]). Lines that are not protocol messages, answers to ids
//! nobody waits for and over-long lines go to the server's log and break nothing.
//! Protocol `_meta` and era detection are the business of [`super::Upstream`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hangar_core::jsonrpc::{Incoming, PendingMap, RpcError, classify};
use serde_json::{Value, json};

use tokio::io::BufReader;
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot, watch};

use super::{Notice, RequestError, encode};
use crate::logs::{LogRing, Stream};
use hangar_runtime::lines::{Line, read_line, write_batched};

/// The longest line accepted from an upstream's stdout; longer ones are skipped and logged.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

type Waiter = oneshot::Sender<Result<Value, RpcError>>;

pub struct StdioUpstream {
    writer: Mutex<Option<mpsc::UnboundedSender<Vec<u8>>>>,
    pending: Arc<Mutex<PendingMap<Waiter>>>,
    log: Arc<LogRing>,
    /// Becomes true when stdout reaches its end or fails.
    closed: watch::Receiver<bool>,
}

impl StdioUpstream {
    /// Wires the pipes and starts the reader and writer tasks.
    pub fn start(
        stdin: ChildStdin,
        stdout: ChildStdout,
        log: Arc<LogRing>,
        notices: mpsc::UnboundedSender<Notice>,
    ) -> StdioUpstream {
        let (tx, rx) = mpsc::unbounded_channel();
        let (closed_tx, closed) = watch::channel(false);
        let upstream = StdioUpstream {
            writer: Mutex::new(Some(tx.clone())),
            pending: Arc::new(Mutex::new(PendingMap::default())),
            log: log.clone(),
            closed,
        };
        tokio::spawn(async move {
            // A failed write means the child is gone; the reader sees that and ends the connection.
            let _ = write_batched(stdin, rx).await;
        });
        let pending = upstream.pending.clone();
        // Weak: answering the upstream's pings must not keep its stdin open after close_stdin.
        let answers = tx.downgrade();
        drop(tx);
        tokio::spawn(async move {
            read_loop(stdout, &pending, &log, &answers, &notices).await;
            // Nobody will answer the rest: fail them now rather than at their timeouts.
            lock(&pending).drain().for_each(drop);
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

    /// Sends a request and waits for its answer, up to `timeout`. On a modern upstream the
    /// protocol `_meta` keys are added to `params`.
    pub async fn request(&self, method: &str, params: Value, timeout: Duration) -> Result<Value, RequestError> {
        let (tx, rx) = oneshot::channel();
        let id = lock(&self.pending).insert(tx);
        let line = encode(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        if !self.send(line) {
            lock(&self.pending).cancel(id);
            return Err(RequestError::Closed { method: method.into() });
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(Ok(result))) => Ok(result),
            Ok(Ok(Err(error))) => {
                self.log.push(
                    Stream::Error,
                    format!("{method}: JSON-RPC error {}: {}", error.code, error.message).as_bytes(),
                );
                Err(RequestError::Rpc { method: method.into(), code: error.code })
            }
            Ok(Err(_)) => Err(RequestError::Closed { method: method.into() }),
            Err(_) => {
                if lock(&self.pending).cancel(id) {
                    self.notify("notifications/cancelled", json!({"requestId": id, "reason": "timeout"}));
                }
                Err(RequestError::Timeout { method: method.into(), timeout })
            }
        }
    }

    /// Sends a notification; returns false if the pipe is closed.
    pub fn notify(&self, method: &str, params: Value) -> bool {
        self.send(encode(&json!({"jsonrpc": "2.0", "method": method, "params": params})))
    }

    fn send(&self, line: Vec<u8>) -> bool {
        lock(&self.writer).as_ref().is_some_and(|tx| tx.send(line).is_ok())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn read_loop(
    stdout: ChildStdout,
    pending: &Mutex<PendingMap<Waiter>>,
    log: &LogRing,
    writer: &mpsc::WeakUnboundedSender<Vec<u8>>,
    notices: &mpsc::UnboundedSender<Notice>,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut buf = Vec::with_capacity(4096);
    loop {
        match read_line(&mut reader, &mut buf, MAX_LINE_BYTES).await {
            Ok(Line::Complete) if buf.iter().all(u8::is_ascii_whitespace) => {}
            Ok(Line::Complete) => handle_line(&buf, pending, log, writer, notices),
            Ok(Line::TooLong(len)) => log.push(
                Stream::Stdout,
                format!("[hangar] skipped a {len}-byte line on stdout (limit {MAX_LINE_BYTES})").as_bytes(),
            ),
            Ok(Line::Eof) | Err(_) => return,
        }
    }
}

fn handle_line(
    line: &[u8],
    pending: &Mutex<PendingMap<Waiter>>,
    log: &LogRing,
    writer: &mpsc::WeakUnboundedSender<Vec<u8>>,
    notices: &mpsc::UnboundedSender<Notice>,
) {
    let Ok(message) = serde_json::from_slice::<Value>(line) else {
        log.push(Stream::Stdout, line);
        return;
    };
    match classify(message) {
        Incoming::Response { id, outcome } => match lock(pending).take(&id) {
            Some(waiter) => {
                let _ = waiter.send(outcome);
            }
            None => log.push(Stream::Stdout, line),
        },
        Incoming::Request { id, method, .. } => {
            // Answer its own requests: ping with {}, anything else (sampling, roots...) -32601.
            let answer = if method == "ping" {
                json!({"jsonrpc": "2.0", "id": id, "result": {}})
            } else {
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "the hangar does not serve this method to upstreams"}})
            };
            if let Some(writer) = writer.upgrade() {
                let _ = writer.send(encode(&answer));
            }
        }
        Incoming::Notification { method, .. } => {
            if method == "notifications/tools/list_changed" {
                let _ = notices.send(Notice::ToolsChanged);
            }
        }
        Incoming::Invalid(_) => log.push(Stream::Stdout, line),
    }
}
