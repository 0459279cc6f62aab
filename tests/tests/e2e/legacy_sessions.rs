//! Legacy (2025-11-25) sessions are real and shared by every API instance: kept by the
//! supervisor, so a session ended on one instance is unknown (404) on all of them; a session's
//! log level and resource subscriptions are kept, and what an upstream sends outside any request
//! (log lines, resource updates) reaches the session's GET stream. And the old HTTP+SSE
//! transport (2024-11-05): `GET /sse` + `POST /messages?sessionId=`, its answers on the stream
//! whichever instance took the POST; real clients: the TypeScript SDK 1.x's `SSEClientTransport`
//! and the Python `mcp` client.
//!
//! The real-client stories need `scripts/setup-clients` (the venv, Node, server-everything and
//! the TypeScript SDK 1.x in .tools/ts-sdk1).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use hangar_tests::serde_json::{self, Value, json};
use hangar_tests::{Hangar, key_hash, legacy_post, node, poll, python, raw_http, repo_root, server_everything};

const FAKE: &str = r#"
tool_access: {mode: front_door}
mcp_servers:
  math:
    command: ["{fake}", "--tools", "add,echo"]
"#;

pub(crate) fn addr(hangar: &Hangar) -> String {
    hangar.base.trim_start_matches("http://").to_owned()
}

/// One legacy JSON-RPC POST to `/mcp` on `addr`, without a credential: the status, the whole
/// answer (head and body).
pub(crate) fn legacy(addr: &str, session: Option<&str>, id: u64, method: &str, params: Value) -> (u16, String) {
    legacy_post(addr, None, session, id, method, params)
}

fn request(addr: &str, verb: &str, path: &str, session: &str) -> u16 {
    let head =
        format!("{verb} {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\n");
    raw_http(addr, &head, b"").expect("the API answers").0
}

/// `initialize` on `addr`: the session id the answer carries.
pub(crate) fn initialize(addr: &str) -> String {
    let params = json!({"protocolVersion": "2025-11-25", "capabilities": {"roots": {}}, "clientInfo": {"name": "t", "version": "0"}});
    let (status, text) = legacy(addr, None, 1, "initialize", params);
    assert_eq!(status, 200, "{text}");
    let line = text.lines().find(|l| l.to_ascii_lowercase().starts_with("mcp-session-id:")).expect("a session id");
    line.split_once(':').unwrap().1.trim().to_owned()
}

/// A stream opened with `head` (no body) on its own connection, read without blocking for long.
pub(crate) fn open_stream(addr: &str, head: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    stream.write_all(format!("{head}\r\n").as_bytes()).unwrap();
    stream
}

/// Reads `stream` into `seen` until it holds `needle` (bounded).
pub(crate) fn read_until(stream: &mut TcpStream, seen: &mut String, needle: &str, limit: Duration) {
    poll(&format!("`{needle}` on the stream (so far: {seen})"), limit, || {
        let mut chunk = [0u8; 8192];
        if let Ok(n) = stream.read(&mut chunk) {
            seen.push_str(&String::from_utf8_lossy(&chunk[..n]));
        }
        seen.contains(needle).then_some(())
    });
}

#[test]
fn a_session_ended_on_one_api_instance_is_unknown_on_every_one() {
    let hangar = Hangar::start(FAKE);
    let other = hangar.extra_api(&[]);
    let (first, second) = (addr(&hangar), other.addr.clone());

    let session = initialize(&first);
    let (status, text) = legacy(&second, Some(&session), 2, "tools/list", json!({}));
    assert_eq!(status, 200, "the other instance knows the session: {text}");
    assert!(text.contains("\"add\""), "{text}");
    let add = json!({"name": "add", "arguments": {"a": 1, "b": 2}});
    let (status, text) = legacy(&second, Some(&session), 7, "tools/call", add.clone());
    assert!(status == 200 && text.contains("\"result\""), "a call in the live session: {text}");

    assert_eq!(request(&second, "DELETE", "/mcp", &session), 200, "ended on the other instance");
    let (status, text) = legacy(&first, Some(&session), 3, "tools/list", json!({}));
    assert_eq!(status, 404, "a terminated session is unknown here too: {text}");
    assert!(text.contains("-32001"), "{text}");
    // A call of an upstream's tool has its session checked by the call itself: the same 404.
    let (status, text) = legacy(&second, Some(&session), 5, "tools/call", add.clone());
    assert_eq!(status, 404, "a call in a terminated session is refused: {text}");
    assert!(text.contains("-32001") && !text.contains("\"result\""), "{text}");
    assert_eq!(request(&first, "GET", "/mcp", &session), 404, "its stream is gone too");
    assert_eq!(request(&first, "DELETE", "/mcp", &session), 404, "and it cannot end twice");

    // An id in the right shape that nobody minted is no session either.
    let forged = format!("hgr1-2025-11-25-{}", "0".repeat(32));
    assert_eq!(legacy(&first, Some(&forged), 4, "tools/list", json!({})).0, 404);
    let (status, text) = legacy(&first, Some(&forged), 6, "tools/call", add.clone());
    assert_eq!(status, 404, "{text}");

    // Neither refused call was made: the audit trail holds the call before and one after them
    // (recorded in order, so once the last is there, any between would be too).
    let (status, text) = legacy(&first, Some(&initialize(&first)), 8, "tools/call", add);
    assert!(status == 200 && text.contains("\"result\""), "a call in a new session: {text}");
    let calls = poll("both calls' audit entries", Duration::from_secs(10), || {
        let page = hangar.get("/api/audit?limit=1000").body;
        let calls = page["entries"].as_array()?.iter().filter(|e| e["method"] == "tools/call").count();
        (calls >= 2).then_some(calls)
    });
    assert_eq!(calls, 2, "a call in an unknown session reached no upstream");
}

#[test]
fn a_session_is_its_opener_s_and_another_identity_cannot_use_or_end_it() {
    let hangar = Hangar::start(&format!(
        "auth:\n  api_keys:\n    - {{name: alice, hash: \"{}\"}}\n    - {{name: bob, hash: \"{}\"}}\n{}",
        key_hash("alice-key"),
        key_hash("bob-key"),
        FAKE.trim_start(),
    ));
    let here = addr(&hangar);
    let params =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}});
    let (status, text) = legacy_post(&here, Some("alice-key"), None, 1, "initialize", params);
    assert_eq!(status, 200, "{text}");
    let line = text.lines().find(|l| l.to_ascii_lowercase().starts_with("mcp-session-id:")).expect("a session id");
    let session = line.split_once(':').unwrap().1.trim().to_owned();

    let (status, text) = legacy_post(&here, Some("bob-key"), Some(&session), 2, "tools/list", json!({}));
    assert_eq!(status, 404, "bob is not told alice's session exists: {text}");
    let (status, text) = legacy_post(&here, Some("alice-key"), Some(&session), 3, "tools/list", json!({}));
    assert_eq!(status, 200, "alice still uses it: {text}");

    // A call of an upstream's tool, whose session the call itself checks: bob's is refused as
    // if the session did not exist, alice's is answered.
    let add = json!({"name": "add", "arguments": {"a": 2, "b": 3}});
    let (status, text) = legacy_post(&here, Some("bob-key"), Some(&session), 4, "tools/call", add.clone());
    assert_eq!(status, 404, "bob cannot call in alice's session: {text}");
    assert!(text.contains("-32001") && !text.contains("\"result\""), "{text}");
    let (status, text) = legacy_post(&here, Some("alice-key"), Some(&session), 5, "tools/call", add);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("\"result\"") && text.contains('5'), "alice's call is answered: {text}");
}

#[test]
fn the_old_sse_transport_answers_on_the_stream_whichever_instance_took_the_post() {
    let hangar = Hangar::start(FAKE);
    let other = hangar.extra_api(&[]);
    let (first, second) = (addr(&hangar), other.addr.clone());

    let mut stream =
        open_stream(&first, &format!("GET /sse HTTP/1.1\r\nHost: {first}\r\nAccept: text/event-stream\r\n"));
    let mut seen = String::new();
    read_until(&mut stream, &mut seen, "event: endpoint", Duration::from_secs(10));
    read_until(&mut stream, &mut seen, "\n\n", Duration::from_secs(10));
    let endpoint =
        seen.split("data: ").nth(1).and_then(|rest| rest.lines().next()).expect("an endpoint").trim().to_owned();
    assert!(endpoint.starts_with("/messages?sessionId=hgr1-"), "{endpoint}");

    let post = |addr: &str, body: Value| {
        let head = format!("POST {endpoint} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n");
        raw_http(addr, &head, body.to_string().as_bytes()).expect("the API answers")
    };
    let init = json!({"jsonrpc": "2.0", "id": 7, "method": "initialize",
        "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    assert_eq!(post(&second, init).0, 202, "accepted by the instance that does not hold the stream");
    read_until(&mut stream, &mut seen, r#""protocolVersion":"2024-11-05""#, Duration::from_secs(10));
    assert_eq!(post(&second, json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).0, 202);
    let call = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 2, "b": 40}}});
    assert_eq!(post(&second, call).0, 202);
    read_until(&mut stream, &mut seen, r#""id":8"#, Duration::from_secs(20));
    assert!(seen.contains(r#""result":42"#) || seen.contains("42"), "{seen}");

    // The client goes: its session ends with its stream, on every instance.
    drop(stream);
    poll("the session to end with its stream", Duration::from_secs(10), || {
        (post(&second, json!({"jsonrpc": "2.0", "id": 9, "method": "ping"})).0 == 404).then_some(())
    });
    let (status, _) = raw_http(
        &first,
        &format!("POST /messages HTTP/1.1\r\nHost: {first}\r\nContent-Type: application/json\r\n"),
        b"{}",
    )
    .unwrap();
    assert_eq!(status, 400, "no sessionId");
}

#[test]
fn the_typescript_sdk_connects_over_the_old_sse_transport() {
    let hangar = Hangar::start(FAKE);
    let sse = format!("{}/sse", hangar.base);
    let seen = run_client(&hangar, node(), "ts_sse_client.mjs", &[&sse, "add", r#"{"a": 2, "b": 3}"#]);
    let tools: Vec<&str> = seen["tools"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(tools.contains(&"add") && tools.contains(&"hangar_call"), "{seen}");
    assert_eq!(seen["result"]["structuredContent"], json!({"result": 5}), "{seen}");
}

/// server-everything behind the front door, for what it sends outside any request.
fn everything() -> Hangar {
    Hangar::start(&format!(
        r#"
tool_access: {{mode: front_door}}
mcp_servers:
  everything:
    command: ["{node}", "{everything}", "stdio"]
    handshake_timeout_s: 30
"#,
        node = node().display(),
        everything = server_everything().display(),
    ))
}

#[test]
fn the_python_client_hears_log_lines_sent_outside_any_request_at_its_level() {
    let hangar = everything();
    let seen = run_client(&hangar, python(), "py_logging_client.py", &[&format!("{}/mcp", hangar.base), "debug"]);
    assert_eq!(seen["protocol_version"], "2025-11-25", "{seen}");
    let after = seen["after"].as_array().unwrap();
    let simulated = after.iter().any(|line| line["data"].as_str().unwrap_or_default().contains("message"));
    assert!(simulated, "a simulated log line arrived after the call, on the GET stream: {seen}");
}

#[test]
fn a_subscribed_resource_s_updates_reach_the_session_s_stream() {
    let hangar = everything();
    let here = addr(&hangar);
    let session = initialize(&here);
    let uri = "demo://resource/static/document/features.md";
    let (status, text) = legacy(&here, Some(&session), 2, "resources/subscribe", json!({"uri": uri}));
    assert_eq!(status, 200, "{text}");
    assert!(!text.contains("\"error\""), "{text}");

    let head =
        format!("GET /mcp HTTP/1.1\r\nHost: {here}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\n");
    let mut stream = open_stream(&here, &head);
    let mut seen = String::new();
    read_until(&mut stream, &mut seen, "200 OK", Duration::from_secs(10));
    let (status, text) =
        legacy(&here, Some(&session), 3, "tools/call", json!({"name": "toggle-subscriber-updates", "arguments": {}}));
    assert_eq!(status, 200, "{text}");
    read_until(&mut stream, &mut seen, "notifications/resources/updated", Duration::from_secs(20));
    assert!(seen.contains(uri), "{seen}");

    let (status, text) = legacy(&here, Some(&session), 4, "resources/unsubscribe", json!({"uri": uri}));
    assert_eq!(status, 200, "{text}");
    assert!(!text.contains("\"error\""), "{text}");
}

#[test]
fn the_python_client_s_subscription_reaches_a_2026_07_28_upstream_as_a_listen_and_its_updates_come_back() {
    // The conformance fake (a 2026-07-28 upstream, which knows no `resources/subscribe`) behind
    // the front door, every name qualified: the client's URI is not the upstream's.
    let hangar = Hangar::start(crate::stable_names::ONE_CONFORMANCE);
    let url = format!("{}/mcp", hangar.base);
    let args = [url.as_str(), "conf__test://watched-resource", "conf__touch_resource", "test://watched-resource"];
    let seen = run_client(&hangar, python(), "py_subscribe_client.py", &args);
    // The update names the resource as the client wrote it, not as the upstream knows it.
    assert_eq!(seen["updated"], json!(["conf__test://watched-resource"]), "{seen}");
    let touches = seen["touches"].as_array().unwrap();
    assert_eq!(touches.last().unwrap(), "1 listen(s) told", "one upstream listen holds the URI: {seen}");
    let after = seen["after_unsubscribe"].as_array().unwrap();
    assert_eq!(after.last().unwrap(), "0 listen(s) told", "unsubscribing cancels the upstream listen: {seen}");
    assert_eq!(seen["late"], json!([]), "{seen}");
}

#[test]
fn the_typescript_sdk_hears_progress_and_log_lines_during_a_call_over_the_old_sse_transport() {
    let hangar = Hangar::start(
        r#"
tool_access: {mode: front_door}
mcp_servers:
  fixtures:
    command: ["{fake}", "--conformance"]
"#,
    );
    let sse = format!("{}/sse", hangar.base);
    let tools = ["test_tool_with_progress", "test_tool_with_logging"];
    let seen = run_client(&hangar, node(), "ts_sse_progress.mjs", &[&sse, "debug", tools[0], tools[1]]);
    let (progress, logging) = (&seen["calls"][0], &seen["calls"][1]);
    let reported: Vec<i64> =
        progress["progress"].as_array().unwrap().iter().filter_map(|p| p["progress"].as_i64()).collect();
    // Reports come in order; the last may lose the race with the answer (the client drops a
    // report for a call it has done with), so only the first is certain.
    assert!(reported.starts_with(&[0]) && reported.is_sorted(), "progress during the call, in order: {seen}");
    assert!(progress["result"]["isError"] != json!(true), "{seen}");
    assert_eq!(logging["logs"].as_array().map(Vec::len), Some(3), "the call's three log lines: {seen}");
    assert!(logging["result"]["content"].is_array(), "{seen}");
}

#[test]
fn an_http_upstream_s_log_lines_outside_any_request_reach_the_python_client_s_stream() {
    // server-everything over streamable HTTP (a legacy upstream): its simulated log lines go on
    // its standalone GET stream, which the hangar now reads.
    let hangar = Hangar::start(&hangar_tests::everything_over_http(hangar_tests::free_port()));
    let seen = run_client(&hangar, python(), "py_logging_client.py", &[&format!("{}/mcp", hangar.base), "debug"]);
    let after = seen["after"].as_array().unwrap();
    assert!(!after.is_empty(), "a simulated log line arrived after the call, on the GET stream: {seen}");
}

/// Runs the client `script` (tests/fixtures) with `program` and `args`; its last line of output,
/// as JSON. A failed run fails the test with its output and the hangar's log.
fn run_client(hangar: &Hangar, program: std::path::PathBuf, script: &str, args: &[&str]) -> Value {
    let output = Command::new(program)
        .arg(repo_root().join("tests/fixtures").join(script))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|err| panic!("run {script}: {err}"));
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{script} failed:\n{stderr}\n{stdout}\nhangar log:\n{}", hangar.log());
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("one JSON line")
}
