//! JSON-RPC 2.0 as MCP uses it: error codes and objects, sorting a message into a request, a
//! notification or a response (one classifier for what a client sends the API and what an
//! upstream sends the supervisor), and id remapping, so many callers share one upstream pipe.
//!
//! Callers' ids may collide (every client starts at 1); the upstream sees only ids the hangar
//! mints, and an answer is routed back by that id alone. An answer to an id nobody is waiting
//! for is reported, never delivered to the wrong caller.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use crate::echo::bounded;

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

/// The body is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON, but not a valid JSON-RPC message.
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
/// The method's params are wrong (MCP also says so for an unknown tool or resource).
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError { code, message: message.into(), data: None }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// The parser's complaint is quoted bounded: it may quote the client's input.
    pub fn parse_error(detail: impl std::fmt::Display) -> Self {
        RpcError::new(PARSE_ERROR, format!("Parse error: {}", bounded(&detail.to_string())))
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        RpcError::new(INVALID_REQUEST, message)
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        RpcError::new(INVALID_PARAMS, message)
    }

    pub fn method_not_found(method: &str) -> Self {
        RpcError::new(METHOD_NOT_FOUND, format!("Method not found: {}", bounded(method)))
    }

    pub fn internal(message: impl Into<String>) -> Self {
        RpcError::new(INTERNAL_ERROR, message)
    }

    /// The `error` member of a response.
    pub fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let (Some(data), Value::Object(map)) = (&self.data, &mut error) {
            map.insert("data".into(), data.clone());
        }
        error
    }

    /// An error object as a peer sent it; a missing code reads as an internal error.
    fn from_object(mut error: Map<String, Value>) -> Self {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(INTERNAL_ERROR);
        let message = match error.remove("message") {
            Some(Value::String(message)) => message,
            _ => String::new(),
        };
        RpcError { code, message, data: error.remove("data") }
    }
}

/// What an id must tell the classifier. The supervisor reads ids as `Value`s; the API keeps
/// them as the raw text the client wrote, so it can echo them byte for byte.
pub trait MessageId {
    /// MCP's rule: a request's id is a string or a number (never null).
    fn is_string_or_number(&self) -> bool;
}

impl MessageId for Value {
    fn is_string_or_number(&self) -> bool {
        self.is_string() || self.is_number()
    }
}

/// One JSON-RPC message, sorted.
#[derive(Debug, Clone, PartialEq)]
pub enum Message<I = Value> {
    Request {
        id: I,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// An answer (result or error) to a request of ours.
    Response {
        id: I,
        outcome: Result<Value, RpcError>,
    },
}

/// A message that is not valid JSON-RPC, with the id an answer should echo (when a string or a
/// number could be read) and the error that says why.
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid<I = Value> {
    pub id: Option<I>,
    pub error: RpcError,
}

/// Sorts one parsed message whose id is still inside it.
pub fn classify_value(mut message: Value) -> Result<Message, Invalid> {
    let id = message.as_object_mut().and_then(|map| map.remove("id"));
    classify(message, id)
}

/// Sorts one parsed message whose `id` was read apart (and is absent from `body`). Takes the
/// body by value so params and results move out without copies. A batch (an array) is invalid:
/// MCP has none.
pub fn classify<I: MessageId>(body: Value, id: Option<I>) -> Result<Message<I>, Invalid<I>> {
    let mut map = match body {
        Value::Object(map) => map,
        Value::Array(_) => return Err(invalid(None, "batches are not supported")),
        _ => return Err(invalid(None, "not a JSON-RPC message object")),
    };
    let (echo, id) = match id {
        Some(id) if id.is_string_or_number() => (true, Some(id)),
        id => (false, id),
    };
    let fail = |id: Option<I>, why: &str| Err(invalid(id.filter(|_| echo), why));
    if map.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return fail(id, "\"jsonrpc\" must be \"2.0\"");
    }
    let params = map.remove("params").filter(|p| !p.is_null());
    match map.remove("method") {
        Some(Value::String(method)) => match id {
            None => Ok(Message::Notification { method, params }),
            Some(id) if echo => Ok(Message::Request { id, method, params }),
            Some(_) => fail(None, "\"id\" must be a string or a number"),
        },
        Some(_) => fail(id, "\"method\" must be a string"),
        None => match (id, map.remove("result"), map.remove("error")) {
            (Some(id), Some(result), _) => Ok(Message::Response { id, outcome: Ok(result) }),
            (Some(id), None, Some(error)) => {
                let error = match error {
                    Value::Object(error) => RpcError::from_object(error),
                    _ => RpcError::internal(String::new()),
                };
                Ok(Message::Response { id, outcome: Err(error) })
            }
            (id, _, _) => fail(id, "no \"method\""),
        },
    }
}

fn invalid<I>(id: Option<I>, why: &str) -> Invalid<I> {
    Invalid { id, error: RpcError::invalid_request(format!("Invalid Request: {why}")) }
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
            classify_value(json!({"jsonrpc": "2.0", "id": 3, "result": {}})),
            Ok(Message::Response { outcome: Ok(_), .. })
        ));
        match classify_value(json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "nope"}})) {
            Ok(Message::Response { outcome: Err(e), .. }) => assert_eq!((e.code, e.message.as_str()), (-32601, "nope")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            classify_value(json!({"jsonrpc": "2.0", "id": "p", "method": "ping"})),
            Ok(Message::Request { .. })
        ));
        assert!(matches!(
            classify_value(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})),
            Ok(Message::Notification { .. })
        ));
        for bad in [
            json!([1]),
            json!({"id": 1, "result": 1}),
            json!({"jsonrpc": "2.0"}),
            json!({"jsonrpc": "2.0", "id": 1}),
            json!({"jsonrpc": "2.0", "method": 5}),
            json!({"jsonrpc": "2.0", "id": null, "method": "ping"}),
        ] {
            assert!(classify_value(bad).is_err());
        }
    }

    #[test]
    fn sorts_requests_notifications_and_responses() {
        let request = classify_value(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
        assert_eq!(request, Ok(Message::Request { id: json!(3), method: "tools/list".into(), params: None }));
        let note = classify_value(json!({"jsonrpc": "2.0", "method": "notifications/initialized", "params": null}));
        assert_eq!(note, Ok(Message::Notification { method: "notifications/initialized".into(), params: None }));
        let answer = classify_value(json!({"jsonrpc": "2.0", "id": "a", "error": "odd"}));
        assert!(matches!(answer, Ok(Message::Response { outcome: Err(RpcError { code: INTERNAL_ERROR, .. }), .. })));
    }

    #[test]
    fn invalid_messages_echo_a_readable_id() {
        let err = classify_value(json!({"jsonrpc": "1.0", "id": 9, "method": "x"})).unwrap_err();
        assert_eq!((err.id, err.error.code), (Some(json!(9)), INVALID_REQUEST));
        let err = classify_value(json!({"jsonrpc": "2.0", "id": {"no": 1}, "method": "x"})).unwrap_err();
        assert_eq!(err.id, None);
        let err = classify_value(json!({"jsonrpc": "1.0", "id": [9], "method": "x"})).unwrap_err();
        assert_eq!(err.id, None, "only a string or a number is echoed");
        let err = classify_value(json!([1])).unwrap_err();
        assert_eq!(
            (err.error.code, err.error.message.as_str()),
            (-32600, "Invalid Request: batches are not supported")
        );
        assert_eq!(classify_value(json!({"jsonrpc": "2.0", "id": 1, "method": 5})).unwrap_err().id, Some(json!(1)));
    }
}
