//! Sorting one decoded `/mcp` body into a request, a notification or a client's response.

use serde_json::{Map, Value};

use super::errors::RpcError;
use super::id::{Id, Incoming};

#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request {
        id: Id,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// A client's answer to a server request. We send none, so there is nothing to route it to.
    Response,
}

/// An invalid message, with the id to echo (null when none could be read).
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid {
    pub id: Id,
    pub error: RpcError,
}

/// Classifies one body. A batch (array) is invalid here: neither era accepts batches.
pub fn parse(incoming: Incoming) -> Result<Message, Invalid> {
    let Incoming { body, id, .. } = incoming;
    let mut map = match body {
        Value::Object(map) => map,
        Value::Array(_) => return Err(invalid(Id::null(), "Invalid Request: batches are not supported")),
        _ => return Err(invalid(Id::null(), "Invalid Request: not a JSON-RPC message object")),
    };
    let echo = id.clone().filter(Id::is_string_or_number).unwrap_or_else(Id::null);
    if map.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid(echo, "Invalid Request: \"jsonrpc\" must be \"2.0\""));
    }
    let params = map.remove("params").filter(|p| !p.is_null());
    match map.remove("method") {
        Some(Value::String(method)) => match id {
            None => Ok(Message::Notification { method, params }),
            Some(id) if id.is_string_or_number() => Ok(Message::Request { id, method, params }),
            Some(_) => Err(invalid(Id::null(), "Invalid Request: \"id\" must be a string or a number")),
        },
        Some(_) => Err(invalid(echo, "Invalid Request: \"method\" must be a string")),
        None if id.is_some() && is_response(&map) => Ok(Message::Response),
        None => Err(invalid(echo, "Invalid Request: no \"method\"")),
    }
}

fn is_response(map: &Map<String, Value>) -> bool {
    map.contains_key("result") || map.contains_key("error")
}

fn invalid(id: Id, message: &str) -> Invalid {
    Invalid { id, error: RpcError::invalid_request(message) }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_requests_notifications_and_responses() {
        let request = parse(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}).into()).unwrap();
        assert_eq!(request, Message::Request { id: json!(3).into(), method: "tools/list".into(), params: None });
        let note =
            parse(json!({"jsonrpc": "2.0", "method": "notifications/initialized", "params": null}).into()).unwrap();
        assert_eq!(note, Message::Notification { method: "notifications/initialized".into(), params: None });
        assert_eq!(parse(json!({"jsonrpc": "2.0", "id": "a", "result": {}}).into()).unwrap(), Message::Response);
    }

    #[test]
    fn invalid_messages_echo_a_readable_id() {
        let err = parse(json!({"jsonrpc": "1.0", "id": 9, "method": "x"}).into()).unwrap_err();
        assert_eq!((err.id, err.error.code), (json!(9).into(), -32600));
        let err = parse(json!({"jsonrpc": "2.0", "id": {"no": 1}, "method": "x"}).into()).unwrap_err();
        assert_eq!(err.id, Id::null());
        assert_eq!(parse(json!([1]).into()).unwrap_err().error.code, -32600);
        assert_eq!(parse(json!({"jsonrpc": "2.0", "id": 1, "method": 5}).into()).unwrap_err().id, json!(1).into());
    }
}
