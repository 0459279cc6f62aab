//! URL-mode elicitation through the hangar (issue 32 §3): the hangar declares `elicitation:
//! {form, url}` to its upstreams, so a server registers what needs URL mode; a client that
//! declared `elicitation.url` is asked (the request path) and hears an upstream's -32042 with its
//! elicitations (the error path); and the upstream's later `notifications/elicitation/complete`
//! reaches the one legacy session whose call it was, no other.
//!
//! The real parts: server-everything's `trigger-url-elicitation` (registered only for a client
//! that declares URL mode) and the TypeScript SDK 1.x client
//! (`tests/fixtures/ts_url_elicitation_client.mjs`); the completion story uses the fake's
//! `rpc_error` (a -32042 answer, then a completion notification), over two raw legacy sessions.

use std::net::TcpStream;
use std::time::Duration;

use hangar_tests::{Hangar, node, node_json, server_everything};
use serde_json::{Value, json};

use crate::legacy_sessions::{open_stream, read_until};

#[test]
fn a_url_elicitation_reaches_a_client_that_declared_url_mode_by_both_paths() {
    let yaml = format!(
        "tool_access: {{mode: front_door}}\nmcp_servers:\n  everything:\n    command: [\"{}\", \"{}\"]\n",
        node().display(),
        server_everything().display()
    );
    let hangar = Hangar::start(&yaml);
    let url = format!("{}/mcp", hangar.base);
    let seen = node_json(&hangar, "ts_url_elicitation_client.mjs", &[&url, "trigger-url-elicitation"]);
    assert_eq!(seen["listed"], true, "the server registered its URL-mode tool for the hangar: {seen}");
    let asked = &seen["asked"];
    assert_eq!(
        (asked["mode"].clone(), asked["url"].clone()),
        (json!("url"), json!("https://example.com/connect")),
        "the client was asked by URL: {seen}"
    );
    assert!(seen["result"].as_str().unwrap_or_default().contains("completed the URL elicitation"), "{seen}");
    let required = &seen["required"];
    assert_eq!(required[0]["mode"], "url", "the -32042 came with its elicitations: {seen}");
    assert_eq!(required[0]["url"], "https://modelcontextprotocol.io", "{seen}");
}

const FAKE: &str = r#"
tool_access: {mode: front_door}
mcp_servers:
  math:
    command: ["{fake}", "--tools", "add,rpc_error"]
"#;

/// A legacy session that declared URL-mode elicitation, and its open event stream.
struct Session {
    id: String,
    stream: TcpStream,
    seen: String,
}

impl Session {
    fn open(hangar: &Hangar) -> Session {
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"url": {}}},
            "clientInfo": {"name": "hangar-tests", "version": "0"},
        }});
        let headers = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
        let answer = hangar.post_raw("/mcp", &headers, body.to_string().as_bytes());
        let id = answer.header("mcp-session-id").expect("a session id").to_owned();
        let addr = hangar.base.trim_start_matches("http://").to_owned();
        let head =
            format!("GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {id}\r\n");
        let stream = open_stream(&addr, &head);
        let mut session = Session { id, stream, seen: String::new() };
        session.read_until("200 OK");
        session
    }

    /// Calls the fake's `rpc_error` in this session: a -32042 naming `elicitation_id`, then the
    /// upstream's completion of `completes`. The client's error.
    fn required(&self, hangar: &Hangar, elicitation_id: &str, completes: &str) -> Value {
        let elicitation = json!({"mode": "url", "url": "https://example.com/auth", "message": "sign in", "elicitationId": elicitation_id});
        let arguments = json!({
            "code": -32042,
            "message": "sign in first",
            "data": {"elicitations": [elicitation]},
            "then_notify": {"method": "notifications/elicitation/complete", "params": {"elicitationId": completes}},
        });
        let answer = hangar.legacy(&self.id, "tools/call", json!({"name": "rpc_error", "arguments": arguments}));
        let text = answer.text.lines().find_map(|line| line.strip_prefix("data: ")).unwrap_or(&answer.text).to_owned();
        let answer: Value = serde_json::from_str(&text).expect("a JSON-RPC answer");
        answer["error"].clone()
    }

    fn read_until(&mut self, needle: &str) {
        read_until(&mut self.stream, &mut self.seen, needle, Duration::from_secs(10));
    }
}

#[test]
fn an_upstreams_elicitation_completes_for_the_one_session_it_was_sent_to() {
    let hangar = Hangar::start(FAKE);
    let (mut alice, mut bob) = (Session::open(&hangar), Session::open(&hangar));

    let error = alice.required(&hangar, "alice-1", "alice-1");
    assert_eq!(error["code"], -32042, "{error}");
    assert_eq!(error["data"]["elicitations"][0]["elicitationId"], "alice-1", "its data reaches the client: {error}");
    alice.read_until("\"elicitationId\":\"alice-1\"");

    // Bob's call: the upstream completes bob's, and one it never sent (alice's again, now done).
    let error = bob.required(&hangar, "bob-1", "bob-1");
    assert_eq!(error["code"], -32042, "{error}");
    bob.read_until("\"elicitationId\":\"bob-1\"");
    bob.required(&hangar, "bob-2", "alice-1");
    let error = bob.required(&hangar, "bob-3", "bob-3");
    assert_eq!(error["code"], -32042, "{error}");
    bob.read_until("\"elicitationId\":\"bob-3\"");
    alice.read_until("alice-1");

    assert!(!bob.seen.contains("alice-1"), "bob heard alice's elicitation: {}", bob.seen);
    assert!(!alice.seen.contains("bob-"), "alice heard bob's: {}", alice.seen);
    assert_eq!(alice.seen.matches("notifications/elicitation/complete").count(), 1, "{}", alice.seen);
}
