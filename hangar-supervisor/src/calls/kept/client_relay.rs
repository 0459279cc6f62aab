//! Requests both ways for legacy sessions, kept here so every API instance sees them: a client's
//! cancel of its own call by the request id it gave it, and a client's answer to a
//! server-to-client request, whichever API instance each reaches. Keyed by the caller's
//! identity too: only the one who made a call may cancel it or answer for it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hangar_core::ipc::{ErrorKind, IpcError, Outcome};
use hangar_core::sync::Unpoisoned;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    identity: String,
    session: String,
    request_id: String,
}

impl Key {
    fn new(identity: &str, session: &str, request_id: &str) -> Key {
        Key { identity: identity.to_owned(), session: session.to_owned(), request_id: request_id.to_owned() }
    }
}

/// One registration; the ticket tells a later one under a reused key from this one.
struct Entry<T> {
    ticket: u64,
    sender: oneshot::Sender<T>,
}

/// Registrations under keys, each removed by its own guard (and only its own) when its waiter
/// ends, however it ends. Several may share a key (the calls of one `hangar_call`).
struct Registry<T> {
    entries: Mutex<HashMap<Key, Vec<Entry<T>>>>,
    tickets: AtomicU64,
}

impl<T> Default for Registry<T> {
    fn default() -> Self {
        Registry { entries: Mutex::default(), tickets: AtomicU64::new(0) }
    }
}

impl<T: Clone> Registry<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Vec<Entry<T>>>> {
        self.entries.locked()
    }

    /// Registers `key` beside any earlier registration under it; the receiver hears what
    /// [`Registry::take`] sends.
    fn register(&self, key: Key) -> (Registered<'_, T>, oneshot::Receiver<T>) {
        let (sender, receiver) = oneshot::channel();
        let ticket = self.tickets.fetch_add(1, Ordering::Relaxed);
        self.lock().entry(key.clone()).or_default().push(Entry { ticket, sender });
        (Registered { registry: self, key, ticket }, receiver)
    }

    /// Hands `value` to every registration under `key`; whether one took it.
    fn take(&self, key: &Key, value: T) -> bool {
        let entries = self.lock().remove(key).unwrap_or_default();
        // Every one is sent to (no short cut): each call under the key stops.
        entries.into_iter().map(|entry| entry.sender.send(value.clone()).is_ok()).filter(|sent| *sent).count() > 0
    }
}

struct Registered<'a, T: Clone> {
    registry: &'a Registry<T>,
    key: Key,
    ticket: u64,
}

impl<T: Clone> Drop for Registered<'_, T> {
    fn drop(&mut self) {
        let mut entries = self.registry.lock();
        if let Some(list) = entries.get_mut(&self.key) {
            list.retain(|entry| entry.ticket != self.ticket);
            if list.is_empty() {
                entries.remove(&self.key);
            }
        }
    }
}

#[derive(Default)]
pub struct ClientRelay {
    calls: Registry<()>,
    answers: Registry<Value>,
}

impl ClientRelay {
    /// Runs `call` until it ends or its client cancels it by `request_id` in `session`.
    pub async fn cancellable(
        &self,
        identity: &str,
        session: &str,
        request_id: &Value,
        call: impl Future<Output = Outcome>,
    ) -> Outcome {
        let (_registered, cancelled) = self.calls.register(Key::new(identity, session, &request_id.to_string()));
        tokio::select! {
            outcome = call => outcome,
            // Dropping `call` drops its upstream request, which tells the upstream.
            Ok(()) = cancelled => Outcome::Err(IpcError::new(ErrorKind::Cancelled, "the client cancelled the request")),
        }
    }

    /// Cancels the caller's call `request_id` in `session`; whether it was running.
    pub fn cancel(&self, identity: &str, session: &str, request_id: &Value) -> bool {
        let found = self.calls.take(&Key::new(identity, session, &request_id.to_string()), ());
        if found {
            tracing::debug!("a legacy client cancelled its call");
        }
        found
    }

    /// Waits for the client's answer to request `request_id` in `session`; `registered` hears
    /// `{}` once the wait is in place, so the request may go out.
    pub async fn await_answer(
        &self,
        identity: &str,
        session: &str,
        request_id: &str,
        registered: Option<mpsc::UnboundedSender<Value>>,
    ) -> Result<Value, IpcError> {
        let (_registered, answer) = self.answers.register(Key::new(identity, session, request_id));
        if let Some(registered) = registered {
            let _ = registered.send(json!({}));
        }
        answer.await.map_err(|_| IpcError::new(ErrorKind::Cancelled, "another wait took the client's answer"))
    }

    /// Hands the client's answer to whoever waits for it; whether someone did.
    pub fn deliver(&self, identity: &str, session: &str, request_id: &str, response: Value) -> bool {
        self.answers.take(&Key::new(identity, session, request_id), response)
    }
}

/// A question to a client that found no answer within `limit` (the upstream that asked gets
/// this, as a JSON-RPC error, and its call goes on).
pub(crate) fn client_answer_late(limit: Duration) -> IpcError {
    IpcError::new(
        ErrorKind::Timeout,
        format!("the client did not answer within {} s (tool_access.client_answer_timeout_s)", limit.as_secs_f64()),
    )
}

#[cfg(test)]
mod tests {
    use hangar_core::ipc::Reply;

    use super::*;

    #[tokio::test]
    async fn only_the_same_identity_and_session_cancel_a_call() {
        let relay = ClientRelay::default();
        let id = json!(1);
        let call = relay.cancellable("alice", "s1", &id, std::future::pending());
        tokio::pin!(call);
        tokio::select! { _ = &mut call => panic!("ended early"), () = tokio::task::yield_now() => {} }
        assert!(!relay.cancel("bob", "s1", &id), "another identity");
        assert!(!relay.cancel("alice", "s2", &id), "another session");
        assert!(!relay.cancel("alice", "s1", &json!("1")), "another id (a string is not the number)");
        assert!(relay.cancel("alice", "s1", &id));
        assert!(matches!(call.await, Outcome::Err(e) if e.kind == ErrorKind::Cancelled));
        assert!(relay.calls.lock().is_empty());
        let done = relay.cancellable("alice", "s1", &id, async { Outcome::Ok(Reply::Pong) }).await;
        assert!(matches!(done, Outcome::Ok(Reply::Pong)));
        assert!(!relay.cancel("alice", "s1", &id), "a finished call leaves nothing behind");
    }

    #[tokio::test]
    async fn one_cancel_stops_every_call_under_its_id() {
        let relay = ClientRelay::default();
        let id = json!(7);
        let first = relay.cancellable("alice", "s1", &id, std::future::pending());
        let second = relay.cancellable("alice", "s1", &id, std::future::pending());
        tokio::pin!(first, second);
        tokio::select! { _ = &mut first => panic!("ended early"), () = tokio::task::yield_now() => {} }
        tokio::select! { _ = &mut second => panic!("ended early"), () = tokio::task::yield_now() => {} }
        assert!(relay.cancel("alice", "s1", &id));
        assert!(matches!(first.await, Outcome::Err(e) if e.kind == ErrorKind::Cancelled));
        assert!(matches!(second.await, Outcome::Err(e) if e.kind == ErrorKind::Cancelled));
        assert!(relay.calls.lock().is_empty());
    }

    #[tokio::test]
    async fn an_answer_reaches_its_waiter_only() {
        let relay = ClientRelay::default();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let wait = relay.await_answer("alice", "s1", "q-1", Some(tx));
        tokio::pin!(wait);
        tokio::select! { _ = &mut wait => panic!("ended early"), Some(_) = rx.recv() => {} }
        assert!(!relay.deliver("bob", "s1", "q-1", json!({"result": {}})));
        assert!(relay.deliver("alice", "s1", "q-1", json!({"result": {"ok": true}})));
        assert_eq!(wait.await.unwrap(), json!({"result": {"ok": true}}));
        assert!(!relay.deliver("alice", "s1", "q-1", json!({})), "answered once");
        assert!(relay.answers.lock().is_empty());
    }
}
