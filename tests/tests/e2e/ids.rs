//! Every JSON-RPC id comes back exactly as the client wrote it: numbers no `f64` or `u64` can
//! hold, exponents, `-0`, long strings; in answers and errors, in both eras, as JSON and as an
//! event stream. The ids are compared as raw bytes of the answer, never through a parsed value.

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, MODERN, Response};

const CONFIG: &str = r#"
tool_access: {mode: front_door}
mcp_servers:
  up:
    command: ["{fake}", "--tools", "echo"]
  conformance:
    command: ["{fake}", "--conformance"]
"#;

/// Ids as a client may write them; each must come back byte for byte.
fn ids() -> Vec<String> {
    let mut ids: Vec<String> = [
        "18446744073709551616",
        "1e2",
        "-0",
        "1.0",
        "1E+2",
        "-123456789012345678901234567890",
        "0.10000000000000000000000001",
        r#""a\u00e9""#,
        "7",
    ]
    .map(String::from)
    .to_vec();
    ids.push(format!("\"{}\"", "x".repeat(10_000)));
    ids
}

fn modern(hangar: &Hangar, id: &str, method: &str, params: Value, name: Option<&str>, sse: bool) -> Response {
    let mut params = params;
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(MODERN);
    params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#);
    let accept = if sse { "application/json, text/event-stream" } else { "application/json" };
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", accept),
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", method),
    ];
    if let Some(name) = name {
        headers.push(("Mcp-Name", name));
    }
    hangar.post_raw("/mcp", &headers, body.as_bytes())
}

fn legacy(hangar: &Hangar, id: &str, method: &str, params: &str, session: Option<&str>) -> Response {
    let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#);
    let mut headers = vec![("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
    if let Some(session) = session {
        headers.push(("Mcp-Session-Id", session));
    }
    hangar.post_raw("/mcp", &headers, body.as_bytes())
}

#[track_caller]
fn assert_echoes(what: &str, response: &Response, id: &str) {
    let needle = format!("\"id\":{id}");
    let shown = &response.text[..response.text.len().min(400)];
    assert!(
        response.text.contains(&needle),
        "{what}: the id `{}` is not echoed as sent: {shown}",
        &id[..id.len().min(40)]
    );
}

#[test]
fn ids_come_back_byte_for_byte_in_every_era_and_answer() {
    let hangar = Hangar::start(CONFIG);
    hangar.tool_ok("hangar_start", json!({"mcp_server": "up"}));
    for id in ids() {
        // 2026-07-28: a result, a hangar tool's result, a relayed upstream call, an error.
        let list = modern(&hangar, &id, "tools/list", json!({}), None, false);
        assert_eq!(list.status, 200, "{}", list.text);
        assert_echoes("modern tools/list", &list, &id);

        let health = modern(&hangar, &id, "tools/call", json!({"name": "hangar_health"}), Some("hangar_health"), false);
        assert_eq!(health.status, 200, "{}", health.text);
        assert_echoes("modern tools/call hangar_health", &health, &id);

        let echo = json!({"name": "echo", "arguments": {"said": "hi"}});
        let relayed = modern(&hangar, &id, "tools/call", echo.clone(), Some("echo"), false);
        assert_eq!(relayed.status, 200, "{}", relayed.text);
        assert!(relayed.text.contains("\"said\":\"hi\""), "{}", relayed.text);
        assert_echoes("modern front-door tools/call (JSON)", &relayed, &id);

        // Asking for progress makes the answer an event stream.
        let mut streamed = echo.clone();
        streamed["_meta"]["progressToken"] = json!("p-1");
        let sse = modern(&hangar, &id, "tools/call", streamed, Some("echo"), true);
        assert_eq!(sse.header("content-type"), Some("text/event-stream"), "{}", sse.text);
        assert!(sse.text.contains("\"said\":\"hi\""), "{}", sse.text);
        assert_echoes("modern front-door tools/call (SSE)", &sse, &id);

        let unknown = modern(&hangar, &id, "no/such/method", json!({}), None, false);
        assert_eq!(unknown.status, 404, "{}", unknown.text);
        assert!(unknown.text.contains("-32601"), "{}", unknown.text);
        assert_echoes("modern unknown method", &unknown, &id);

        let bad_meta = hangar.post_raw(
            "/mcp",
            &[("Content-Type", "application/json"), ("MCP-Protocol-Version", MODERN), ("Mcp-Method", "tools/list")],
            format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"{MODERN}"}}}}}}"#).as_bytes(),
        );
        assert_eq!(bad_meta.status, 400, "{}", bad_meta.text);
        assert_echoes("modern invalid params", &bad_meta, &id);

        // Legacy: initialize, then requests in the session.
        let init = legacy(
            &hangar,
            &id,
            "initialize",
            r#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}"#,
            None,
        );
        assert_eq!(init.status, 200, "{}", init.text);
        assert_echoes("legacy initialize", &init, &id);
        let session = init.header("mcp-session-id").expect("a session id").to_owned();

        let list = legacy(&hangar, &id, "tools/list", "{}", Some(&session));
        assert_eq!(list.status, 200, "{}", list.text);
        assert_echoes("legacy tools/list", &list, &id);

        let relayed = legacy(
            &hangar,
            &id,
            "tools/call",
            r#"{"name":"echo","arguments":{"said":"hi"},"_meta":{"progressToken":1}}"#,
            Some(&session),
        );
        assert_eq!(relayed.header("content-type"), Some("text/event-stream"), "{}", relayed.text);
        assert_echoes("legacy front-door tools/call (SSE)", &relayed, &id);

        let unknown = legacy(&hangar, &id, "no/such/method", "{}", Some(&session));
        assert!(unknown.text.contains("-32601"), "{}", unknown.text);
        assert_echoes("legacy unknown method", &unknown, &id);

        let no_session = legacy(&hangar, &id, "tools/list", "{}", None);
        assert_eq!(no_session.status, 400, "{}", no_session.text);
        assert_echoes("legacy request without a session", &no_session, &id);
    }
}

#[test]
fn unreadable_messages_answer_a_null_id() {
    let hangar = Hangar::start(CONFIG);
    let headers = [("Content-Type", "application/json")];
    let parse_error = hangar.post_raw("/mcp", &headers, br#"{"jsonrpc":"2.0","id":1e2,"#);
    assert_eq!(parse_error.status, 400);
    assert!(parse_error.text.contains("\"id\":null") && parse_error.text.contains("-32700"), "{}", parse_error.text);
    // An id that is neither a string nor a number is not echoed.
    let object_id = hangar.post_raw("/mcp", &headers, br#"{"jsonrpc":"2.0","id":{"a":1e2},"method":"ping"}"#);
    assert!(object_id.text.contains("\"id\":null") && object_id.text.contains("-32600"), "{}", object_id.text);
    // Batches are not served, in either era.
    let batch = hangar.post_raw("/mcp", &headers, br#"[{"jsonrpc":"2.0","id":1e2,"method":"ping"}]"#);
    assert!(batch.text.contains("\"id\":null") && batch.text.contains("-32600"), "{}", batch.text);
}

/// A progress token is the client's id for its progress notifications: each one carries it back
/// as written.
#[test]
fn progress_tokens_come_back_byte_for_byte() {
    let hangar = Hangar::start(CONFIG);
    hangar.tool_ok("hangar_start", json!({"mcp_server": "conformance"}));
    for token in ["1e2", "18446744073709551616", "-0", r#""p\u00e9""#, "7"] {
        let params = format!(
            r#"{{"name":"test_tool_with_progress","_meta":{{"progressToken":{token},"io.modelcontextprotocol/protocolVersion":"{MODERN}","io.modelcontextprotocol/clientCapabilities":{{}}}}}}"#
        );
        let body = format!(r#"{{"jsonrpc":"2.0","id":1e2,"method":"tools/call","params":{params}}}"#);
        let headers = [
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", MODERN),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "test_tool_with_progress"),
        ];
        let sse = hangar.post_raw("/mcp", &headers, body.as_bytes());
        assert_eq!(sse.header("content-type"), Some("text/event-stream"), "{}", sse.text);
        let echoed = sse.text.matches(&format!("\"progressToken\":{token}")).count();
        assert_eq!(echoed, 3, "token {token}: three progress notifications carry it as sent: {}", sse.text);
        assert_echoes("the call's answer", &sse, "1e2");
    }
}
