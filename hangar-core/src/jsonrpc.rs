//! JSON-RPC id remapping, so many callers share one upstream pipe.
//!
//! Callers' ids may collide (every client starts at 1); the upstream sees only ids the hangar
//! mints, and an answer is routed back by that id alone. An answer to an id nobody is waiting
//! for is reported, never delivered to the wrong caller.

use std::collections::HashMap;

use serde_json::Value;

/// Requests in flight on one pipe, keyed by the id the upstream sees.
#[derive(Debug)]
pub struct PendingMap<T> {
    next_id: u64,
    waiting: HashMap<u64, T>,
}

impl<T> Default for PendingMap<T> {
    fn default() -> Self {
        PendingMap { next_id: 1, waiting: HashMap::new() }
    }
}

impl<T> PendingMap<T> {
    /// Registers a waiter and returns the fresh id to send upstream.
    pub fn insert(&mut self, waiter: T) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.waiting.insert(id, waiter);
        id
    }

    /// The waiter for an upstream answer's id, if one is waiting.
    pub fn take(&mut self, upstream_id: &Value) -> Option<T> {
        upstream_id.as_u64().and_then(|id| self.waiting.remove(&id))
    }

    /// Forgets a waiter that gave up (timed out or was cancelled); returns whether it was there.
    pub fn cancel(&mut self, upstream_id: u64) -> bool {
        self.waiting.remove(&upstream_id).is_some()
    }

    /// Every waiter, for failing them all when the pipe breaks.
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.waiting.drain().map(|(_, waiter)| waiter)
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

/// What a line from an upstream turned out to be.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    /// An answer (result or error) to one of our requests.
    Response {
        id: Value,
        outcome: Result<Value, RpcError>,
    },
    /// A request the upstream sends us (e.g. `ping`).
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// Valid JSON that is not JSON-RPC 2.0.
    Invalid(&'static str),
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

/// Sorts a parsed message. Takes it by value so results move out without copies.
pub fn classify(message: Value) -> Incoming {
    let Value::Object(mut map) = message else {
        return Incoming::Invalid("not a JSON object");
    };
    if map.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Incoming::Invalid("no \"jsonrpc\": \"2.0\"");
    }
    let params = map.remove("params");
    if let Some(method) = map.remove("method") {
        let Value::String(method) = method else {
            return Incoming::Invalid("method is not a string");
        };
        return match map.remove("id") {
            Some(id) if !id.is_null() => Incoming::Request { id, method, params },
            _ => Incoming::Notification { method, params },
        };
    }
    let Some(id) = map.remove("id") else {
        return Incoming::Invalid("neither a method nor an id");
    };
    if let Some(result) = map.remove("result") {
        return Incoming::Response { id, outcome: Ok(result) };
    }
    match map.remove("error") {
        Some(Value::Object(mut error)) => {
            let code = error.get("code").and_then(Value::as_i64).unwrap_or(-32603);
            let message = match error.remove("message") {
                Some(Value::String(s)) => s,
                _ => String::new(),
            };
            Incoming::Response { id, outcome: Err(RpcError { code, message, data: error.remove("data") }) }
        }
        _ => Incoming::Invalid("a response with neither result nor error"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn colliding_caller_ids_get_distinct_upstream_ids_and_route_back() {
        let mut pending = PendingMap::default();
        // Two clients both numbered their request 1.
        let a = pending.insert(("client-a", json!(1)));
        let b = pending.insert(("client-b", json!(1)));
        assert_ne!(a, b);
        assert_eq!(pending.take(&json!(b)), Some(("client-b", json!(1))));
        assert_eq!(pending.take(&json!(a)), Some(("client-a", json!(1))));
        assert!(pending.is_empty());
    }

    #[test]
    fn unknown_duplicate_and_foreign_ids_reach_nobody() {
        let mut pending = PendingMap::default();
        let id = pending.insert("waiter");
        assert_eq!(pending.take(&json!(987_654_321)), None);
        assert_eq!(pending.take(&json!("1")), None, "a string id is not one we minted");
        assert_eq!(pending.take(&json!(id)), Some("waiter"));
        assert_eq!(pending.take(&json!(id)), None, "a second answer to the same id is dropped");
    }

    #[test]
    fn cancelled_waiters_are_forgotten_and_drain_fails_the_rest() {
        let mut pending = PendingMap::default();
        let a = pending.insert(1);
        pending.insert(2);
        assert!(pending.cancel(a));
        assert!(!pending.cancel(a));
        assert_eq!(pending.drain().collect::<Vec<_>>(), [2]);
        assert_eq!(pending.len(), 0);
    }

    #[test]
    fn classifies_every_kind_of_line() {
        assert!(matches!(
            classify(json!({"jsonrpc": "2.0", "id": 3, "result": {}})),
            Incoming::Response { outcome: Ok(_), .. }
        ));
        match classify(json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "nope"}})) {
            Incoming::Response { outcome: Err(e), .. } => assert_eq!((e.code, e.message.as_str()), (-32601, "nope")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(classify(json!({"jsonrpc": "2.0", "id": "p", "method": "ping"})), Incoming::Request { .. }));
        assert!(matches!(
            classify(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})),
            Incoming::Notification { .. }
        ));
        for bad in [
            json!([1]),
            json!({"id": 1, "result": 1}),
            json!({"jsonrpc": "2.0"}),
            json!({"jsonrpc": "2.0", "id": 1}),
            json!({"jsonrpc": "2.0", "method": 5}),
        ] {
            assert!(matches!(classify(bad), Incoming::Invalid(_)));
        }
    }
}
