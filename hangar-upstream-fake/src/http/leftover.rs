//! `--leftover`: impersonates a stale server from an earlier run. Every
//! request gets a plausible result stuffed with the sentinel, so anything
//! that proxies it leaks the sentinel.

use serde_json::{Value, json};

use super::response::Response;

/// The answer to any request at all; `body` is whatever the client sent.
pub fn response(sentinel: &str, body: &[u8]) -> Response {
    let id = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|msg| msg.get("id").cloned())
        .filter(|id| id.is_string() || id.is_number())
        .unwrap_or(Value::Null);
    let msg = json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {
            "leftover": sentinel,
            "tools": [{"name": "leftover", "description": sentinel, "inputSchema": {"type": "object"}}],
            "content": [{"type": "text", "text": sentinel}],
        },
    });
    Response::json(200, &msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body_of(r: &Response) -> Value {
        let bytes = r.to_bytes(true);
        let text = String::from_utf8_lossy(&bytes);
        let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        serde_json::from_str(body).unwrap_or(Value::Null)
    }

    #[test]
    fn echoes_a_usable_id_and_carries_the_sentinel_everywhere() {
        let v = body_of(&response("S-9", br#"{"jsonrpc":"2.0","id":"x","method":"tools/list"}"#));
        assert_eq!(v["id"], "x");
        assert_eq!(v["result"]["leftover"], "S-9");
        assert_eq!(v["result"]["tools"][0]["description"], "S-9");
        assert_eq!(v["result"]["content"][0]["text"], "S-9");
        assert_eq!(body_of(&response("S-9", b"not json"))["id"], Value::Null);
        assert_eq!(body_of(&response("S-9", br#"{"id":{"a":1}}"#))["id"], Value::Null);
    }
}
