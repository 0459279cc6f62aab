//! The way back to the client while a request is being handled: the
//! notifications that belong to it (logging, progress), and, on the legacy
//! wire, requests of our own (sampling, elicitation, roots) whose answers the
//! tool waits for.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use hangar_core::sync::Unpoisoned;
use serde_json::Value;

use crate::output::Output;
use crate::protocol;

/// How long a tool waits for the client's answer to one of our requests; a
/// client that never answers must not pin a thread forever.
const ASK_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, PartialEq)]
pub enum AskError {
    /// This transport has no channel for requests of ours (plain HTTP).
    Unsupported,
    /// The client answered with a JSON-RPC error; the whole error object.
    Refused(Value),
    /// No answer in time, or the connection closed first.
    NoAnswer,
}

pub trait Peer: Sync {
    /// Sends a notification tied to the request being handled.
    fn notify(&self, msg: Value);
    /// Sends a request to the client and waits for its result.
    fn ask(&self, method: &str, params: Value) -> Result<Value, AskError>;
}

/// The stdio peer: notifications go straight to stdout; our requests get
/// ids of our own, and the stdin reader hands their answers back here.
pub struct StdioPeer {
    out: Arc<Output>,
    pending: Mutex<HashMap<String, Sender<Value>>>,
    next_id: AtomicU64,
    closed: AtomicBool,
}

impl StdioPeer {
    pub fn new(out: Arc<Output>) -> Self {
        Self { out, pending: Mutex::new(HashMap::new()), next_id: AtomicU64::new(1), closed: AtomicBool::new(false) }
    }

    fn pending(&self) -> MutexGuard<'_, HashMap<String, Sender<Value>>> {
        // A panicked asker must not wedge every later one.
        self.pending.locked()
    }

    /// Routes a response from the client to the request of ours it answers;
    /// false when no such request is waiting.
    pub fn deliver(&self, id: &Value, msg: Value) -> bool {
        let Some(id) = id.as_str() else { return false };
        match self.pending().remove(id) {
            Some(tx) => tx.send(msg).is_ok(),
            None => false,
        }
    }

    /// Stdin is gone: no answer can arrive any more, so wake every waiter.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.pending().clear();
    }
}

impl Peer for StdioPeer {
    fn notify(&self, msg: Value) {
        self.out.send(&msg);
    }

    fn ask(&self, method: &str, params: Value) -> Result<Value, AskError> {
        let id = format!("conformance-{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = mpsc::channel();
        {
            let mut pending = self.pending();
            // Checked under the lock, so a close racing with us cannot
            // leave this request waiting out its whole timeout.
            if self.closed.load(Ordering::SeqCst) {
                return Err(AskError::NoAnswer);
            }
            pending.insert(id.clone(), tx);
        }
        self.out.send(&protocol::request(&id, method, Some(params)));
        let answer = rx.recv_timeout(ASK_TIMEOUT);
        self.pending().remove(&id);
        match answer {
            Ok(msg) => match (msg.get("result"), msg.get("error")) {
                (Some(result), None) => Ok(result.clone()),
                (_, Some(error)) => Err(AskError::Refused(error.clone())),
                (None, None) => Err(AskError::NoAnswer),
            },
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => Err(AskError::NoAnswer),
        }
    }
}

/// The HTTP peer: one request, one response, so notifications are collected
/// and written as events ahead of the answer, and asking is impossible.
#[derive(Default)]
pub struct CollectingPeer {
    notes: Mutex<Vec<Value>>,
}

impl CollectingPeer {
    pub fn take(&self) -> Vec<Value> {
        std::mem::take(&mut *self.notes.locked())
    }
}

impl Peer for CollectingPeer {
    fn notify(&self, msg: Value) {
        self.notes.locked().push(msg);
    }

    fn ask(&self, _method: &str, _params: Value) -> Result<Value, AskError> {
        Err(AskError::Unsupported)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn collecting_peer_keeps_notifications_in_order_and_cannot_ask() {
        let peer = CollectingPeer::default();
        peer.notify(json!({"n": 1}));
        peer.notify(json!({"n": 2}));
        assert_eq!(peer.take(), vec![json!({"n": 1}), json!({"n": 2})]);
        assert!(peer.take().is_empty());
        assert_eq!(peer.ask("roots/list", json!({})), Err(AskError::Unsupported));
    }

    #[test]
    fn closed_stdio_peer_answers_no_answer_at_once() {
        let peer = StdioPeer::new(Arc::new(Output::new(crate::output::Faults::default())));
        peer.close();
        assert_eq!(peer.ask("roots/list", json!({})), Err(AskError::NoAnswer));
        assert!(!peer.deliver(&json!("conformance-1"), json!({})));
    }
}
