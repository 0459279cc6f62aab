//! JSON-RPC 2.0 message shapes: classifying what came in, building replies.

use serde_json::{Map, Value, json};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

/// What one incoming line turned out to be.
#[derive(Debug)]
pub enum Incoming<'a> {
    Request {
        id: &'a Value,
        method: &'a str,
        params: Option<&'a Value>,
    },
    Notification,
    /// A reply to a request we sent (see `--ping-parent`).
    Response {
        id: &'a Value,
    },
    /// Not a JSON-RPC message; `id` is echoed when it was usable, else null.
    Invalid {
        id: Value,
    },
}

fn usable_id(id: Option<&Value>) -> Value {
    match id {
        Some(id) if id.is_string() || id.is_number() => id.clone(),
        _ => Value::Null,
    }
}

pub fn classify(msg: &Value) -> Incoming<'_> {
    let Some(obj) = msg.as_object() else {
        return Incoming::Invalid { id: Value::Null };
    };
    let id = obj.get("id");
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Incoming::Invalid { id: usable_id(id) };
    }
    if let Some(method) = obj.get("method") {
        let Some(method) = method.as_str() else {
            return Incoming::Invalid { id: usable_id(id) };
        };
        let params = obj.get("params");
        if params.is_some_and(|p| !p.is_object() && !p.is_array()) {
            return Incoming::Invalid { id: usable_id(id) };
        }
        return match id {
            None => Incoming::Notification,
            Some(id) if id.is_string() || id.is_number() => Incoming::Request { id, method, params },
            Some(_) => Incoming::Invalid { id: Value::Null },
        };
    }
    match id {
        Some(id) if obj.contains_key("result") != obj.contains_key("error") => Incoming::Response { id },
        _ => Incoming::Invalid { id: usable_id(id) },
    }
}

pub fn success(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub fn error(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut err = Map::new();
    err.insert("code".into(), code.into());
    err.insert("message".into(), message.into());
    if let Some(data) = data {
        err.insert("data".into(), data);
    }
    json!({"jsonrpc": "2.0", "id": id, "error": err})
}

pub fn request(id: &str, method: &str, params: Option<Value>) -> Value {
    let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
    if let (Some(params), Some(obj)) = (params, msg.as_object_mut()) {
        obj.insert("params".into(), params);
    }
    msg
}

pub fn notification(method: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": method})
}
