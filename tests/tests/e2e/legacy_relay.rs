//! Requests both ways for legacy (2025-11-25) clients through the front door: an upstream's
//! questions (`input_required`: sampling, elicitation) reach the client as requests on its call's
//! event stream and its answers go back to the upstream; a client's `notifications/cancelled`
//! reaches the upstream as a cancel of that call. Both work whichever API instance the client's
//! follow-up POST reaches: the supervisor routes it.
//!
//! Driven by the TypeScript SDK 1.x (`tests/fixtures/legacy_relay_client.mjs`), the Python `mcp`
//! client (`tests/fixtures/py_client.py ... ask`; both need `scripts/setup-clients`), and by raw
//! HTTP where a second API instance is involved.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use hangar_tests::serde_json::{self, Value, json};
use hangar_tests::{Hangar, node, poll, python, raw_http, repo_root, server_everything, sigkill};

const CONFIG: &str = r#"
tool_access: {mode: front_door}
mcp_servers:
  conformance:
    command: ["{fake}", "--conformance"]
  slow:
    command: ["{fake}", "--tools", "sleep,echo"]
"#;

const LEGACY: &str = "2025-11-25";

/// Runs `program args...` with piped stdin and stdout.
fn spawn_client(program: &std::path::Path, args: &[&str]) -> (Child, BufReader<ChildStdout>) {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|err| panic!("run {}: {err}", program.display()));
    let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    (child, stdout)
}

/// Runs `legacy_relay_client.mjs URL MODE`.
fn ts_client(hangar: &Hangar, mode: &str) -> (Child, BufReader<ChildStdout>) {
    let script = repo_root().join("tests/fixtures/legacy_relay_client.mjs");
    let url = format!("{}/mcp", hangar.base);
    spawn_client(&node(), &[script.to_str().unwrap_or_default(), url.as_str(), mode])
}

/// The client's next line (bounded: a client that hangs is killed, which ends the read).
pub(crate) fn next_line(child: &mut Child, stdout: &mut BufReader<ChildStdout>) -> String {
    let pid = child.id();
    let (done, waiting) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if waiting.recv_timeout(Duration::from_secs(60)) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
            sigkill(pid);
        }
    });
    let mut line = String::new();
    let read = stdout.read_line(&mut line);
    let _ = done.send(());
    if read.is_err() || line.is_empty() {
        let _ = child.kill();
        panic!("the TypeScript client printed nothing more (exit: {:?})", child.wait());
    }
    line
}

fn json_line(child: &mut Child, stdout: &mut BufReader<ChildStdout>) -> Value {
    let line = next_line(child, stdout);
    serde_json::from_str(&line).unwrap_or_else(|err| panic!("{err}: {line}"))
}

fn first_text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

#[test]
fn a_legacy_ts_client_answers_an_upstreams_sampling_and_elicitation() {
    let hangar = Hangar::start(CONFIG);
    let (mut child, mut stdout) = ts_client(&hangar, "ask");
    let sampled = json_line(&mut child, &mut stdout);
    assert_eq!(sampled["tool"], "test_sampling");
    assert_eq!(first_text(&sampled["result"]), "LLM response: sampled: What is 2+2?", "{sampled}");
    let elicited = json_line(&mut child, &mut stdout);
    assert_eq!(elicited["tool"], "test_elicitation");
    let text = first_text(&elicited["result"]);
    assert!(text.starts_with("User response: action=accept") && text.contains("alice@example.com"), "{elicited}");
    assert!(child.wait().expect("the client exits").success());
}

#[test]
fn a_legacy_ts_client_aborting_a_call_cancels_it_upstream() {
    let hangar = Hangar::start(CONFIG);
    hangar.tool_ok("hangar_start", json!({"mcp_server": "slow"}));
    let (mut child, mut stdout) = ts_client(&hangar, "cancel");
    assert_eq!(next_line(&mut child, &mut stdout).trim(), "calling");
    poll("the call to reach the upstream", Duration::from_secs(20), || {
        (hangar.details("slow")["health"]["total_invocations"] == 1).then_some(())
    });
    assert_eq!(hangar.cancellations("slow"), 0);
    child.stdin.as_mut().expect("piped stdin").write_all(b"abort\n").expect("tell the client to abort");
    poll("the upstream to be told the call is cancelled", Duration::from_secs(20), || {
        (hangar.cancellations("slow") == 1).then_some(())
    });
    assert_eq!(json_line(&mut child, &mut stdout)["aborted"], true);
    // The session and the server go on.
    let echo = json_line(&mut child, &mut stdout);
    assert_eq!(echo["echo"]["structuredContent"], json!({"after": true}), "{echo}");
    assert!(child.wait().expect("the client exits").success());
}

/// Sends a legacy POST of `body` in `session` to `addr` on a connection of its own, unread.
pub(crate) fn open_post(addr: &str, session: &str, accept: &str, body: &Value) -> TcpStream {
    let body = body.to_string();
    let mut stream = TcpStream::connect(addr).expect("connect to the API");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("a read timeout");
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: {accept}\r\n\
         MCP-Protocol-Version: {LEGACY}\r\nMcp-Session-Id: {session}\r\nConnection: close\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send the request");
    stream
}

/// A legacy POST of `body` in `session` to `addr` (another API instance): its status.
fn post_to(addr: &str, session: &str, body: &Value) -> u16 {
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {LEGACY}\r\nMcp-Session-Id: {session}\r\n"
    );
    raw_http(addr, &head, body.to_string().as_bytes()).expect("POST to the other API").0
}

/// The next JSON-RPC message on an event stream.
pub(crate) fn next_event(reader: &mut BufReader<TcpStream>) -> Value {
    loop {
        let mut line = String::new();
        let read = reader.read_line(&mut line).expect("read the event stream");
        assert!(read > 0, "the event stream ended");
        if let Some(data) = line.trim_end().strip_prefix("data: ") {
            return serde_json::from_str(data).unwrap_or_else(|err| panic!("{err}: {data}"));
        }
    }
}

#[test]
fn a_cancel_posted_to_another_api_instance_reaches_the_upstream() {
    let hangar = Hangar::start(CONFIG);
    hangar.tool_ok("hangar_start", json!({"mcp_server": "slow"}));
    let session = hangar.legacy_session();
    let own = hangar.base.trim_start_matches("http://").to_owned();
    // Answered as plain JSON: the client does not take event streams.
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"ms": 60000}}});
    let stream = open_post(&own, &session, "application/json", &call);
    poll("the call to reach the upstream", Duration::from_secs(20), || {
        (hangar.details("slow")["health"]["total_invocations"] == 1).then_some(())
    });
    let other = hangar.extra_api(&[]);
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 7, "reason": "test"}});
    // Another session's cancel of the same id is no cancel of this call.
    let stranger = hangar.legacy_session();
    assert_eq!(post_to(&other.addr, &stranger, &cancel), 202);
    assert_eq!(post_to(&other.addr, &session, &cancel), 202);
    poll("the upstream to be told the call is cancelled", Duration::from_secs(20), || {
        (hangar.cancellations("slow") == 1).then_some(())
    });
    // The call's own POST is answered (the client has stopped waiting, but nothing hangs).
    let mut answer = String::new();
    let _ = BufReader::new(stream).read_line(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(hangar.cancellations("slow"), 1, "one cancel, of the one call");
}

#[test]
fn a_client_answer_posted_to_another_api_instance_completes_the_call() {
    let hangar = Hangar::start(CONFIG);
    let session = hangar.legacy_session();
    let own = hangar.base.trim_start_matches("http://").to_owned();
    let call = json!({"jsonrpc": "2.0", "id": "call-1", "method": "tools/call",
        "params": {"name": "test_elicitation", "arguments": {"message": "Who are you?"}}});
    let stream = open_post(&own, &session, "application/json, text/event-stream", &call);
    let mut events = BufReader::new(stream);
    let question = next_event(&mut events);
    assert_eq!(question["method"], "elicitation/create", "{question}");
    assert_eq!(question["params"]["message"], "Who are you?");
    let other = hangar.extra_api(&[]);
    let answer = json!({"jsonrpc": "2.0", "id": question["id"],
        "result": {"action": "accept", "content": {"username": "bob", "email": "bob@example.com"}}});
    assert_eq!(post_to(&other.addr, &session, &answer), 202);
    let done = next_event(&mut events);
    assert_eq!(done["id"], "call-1", "{done}");
    let text = first_text(&done["result"]);
    assert!(text.starts_with("User response: action=accept") && text.contains("bob@example.com"), "{done}");
}

fn everything_behind_the_front_door() -> Hangar {
    let config = format!(
        r#"
tool_access: {{mode: front_door}}
mcp_servers:
  everything:
    command: ["{node}", "{everything}", "stdio"]
"#,
        node = node().display(),
        everything = server_everything().display()
    );
    Hangar::start(&config)
}

#[test]
fn a_legacy_upstreams_own_requests_reach_a_legacy_client_or_get_a_clear_error() {
    let hangar = everything_behind_the_front_door();
    let listed = hangar.mcp("tools/list", json!({}));
    let tools: Vec<&str> = listed.body["result"]["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str()).filter(|n| !n.starts_with("hangar_")).collect())
        .unwrap_or_default();
    // The tools server-everything registers only for a client with sampling, elicitation (URL
    // mode too), roots.
    for conditional in
        ["trigger-sampling-request", "trigger-elicitation-request", "trigger-url-elicitation", "get-roots-list"]
    {
        assert!(tools.contains(&conditional), "{conditional} is listed: {tools:?}");
    }
    assert_eq!(tools.len(), 17, "{tools:?}");
    // A legacy client is asked on its call's event stream, whether or not it asked for progress.
    a_ts_client_is_asked_for_sampling_mid_call(&hangar);
    // A modern client that did not declare sampling is not asked: the server hears a clear
    // error, which its tool reports.
    let asked = hangar.mcp("tools/call", json!({"name": "trigger-sampling-request", "arguments": {"prompt": "hi"}}));
    let text = asked.body.to_string();
    assert!(text.contains("no client was asked `sampling/createMessage`"), "{text}");
    // One that did is answered `input_required` (the call held at the supervisor); its retry
    // carries the answer to the upstream and gets the same call's result.
    let sampling = json!({"io.modelcontextprotocol/clientCapabilities": {"sampling": {}}});
    let call = json!({"name": "trigger-sampling-request", "arguments": {"prompt": "hi"}});
    let asked = hangar.mcp_with("tools/call", call.clone(), sampling.clone(), &[]);
    let result = &asked.body["result"];
    assert_eq!(result["resultType"], "input_required", "{}", asked.body);
    let (key, question) = result["inputRequests"].as_object().and_then(|q| q.iter().next()).expect("a question");
    assert_eq!(question["method"], "sampling/createMessage", "{question}");
    let state = result["requestState"].clone();
    let answer = json!({"role": "assistant", "content": {"type": "text", "text": "sampled: hi"}, "model": "m"});
    let mut retry = call.clone();
    retry["inputResponses"] = json!({key.as_str(): answer});
    retry["requestState"] = state.clone();
    // A made-up state names no held call.
    let forged = {
        let mut forged = retry.clone();
        forged["requestState"] = json!("hangar-held-0000000000000000");
        hangar.mcp_with("tools/call", forged, sampling.clone(), &[])
    };
    assert_eq!(forged.body["error"]["code"], -32602, "{}", forged.body);
    let done = hangar.mcp_with("tools/call", retry.clone(), sampling.clone(), &[]);
    let text = first_text(&done.body["result"]);
    assert!(text.starts_with("LLM sampling result") && text.contains("sampled: hi"), "{}", done.body);
    // The state is spent.
    let again = hangar.mcp_with("tools/call", retry, sampling, &[]);
    assert_eq!(again.body["error"]["code"], -32602, "{}", again.body);
}

/// The TypeScript client (mode `everything`) calls server-everything's sampling tool, plain and
/// with progress, is asked on the call's event stream, and the tool returns what it sampled.
fn a_ts_client_is_asked_for_sampling_mid_call(hangar: &Hangar) {
    let (mut child, mut stdout) = ts_client(hangar, "everything");
    for _ in ["plain", "with progress"] {
        let sampled = json_line(&mut child, &mut stdout);
        let text = first_text(&sampled["result"]);
        assert!(text.starts_with("LLM sampling result") && text.contains("sampled: Resource"), "{sampled}");
    }
    assert!(child.wait().expect("the client exits").success());
}

#[test]
fn the_python_client_answers_a_legacy_upstreams_own_sampling_request_at_2026_07_28() {
    let hangar = everything_behind_the_front_door();
    let seen = py_asked_client_mode(&hangar, "2026-07-28", "ask-everything");
    assert_eq!(seen["protocol_version"], "2026-07-28", "{seen}");
    let text = seen["sampling"][0].as_str().unwrap_or_default();
    assert!(
        text.starts_with("LLM sampling result") && text.contains("sampled: ") && text.contains("What is 2+2?"),
        "{seen}"
    );
}

/// Runs `py_client.py URL MODE ask` (bounded) and parses the one JSON line it prints.
fn py_asked_client(hangar: &Hangar, mode: &str) -> Value {
    py_asked_client_mode(hangar, mode, "ask")
}

/// Runs `py_client.py URL MODE RUN` (bounded) and parses the one JSON line it prints.
fn py_asked_client_mode(hangar: &Hangar, mode: &str, run: &str) -> Value {
    let script = repo_root().join("tests/fixtures/py_client.py");
    let url = format!("{}/mcp", hangar.base);
    let (mut child, mut stdout) =
        spawn_client(&python(), &[script.to_str().unwrap_or_default(), url.as_str(), mode, run]);
    let line = next_line(&mut child, &mut stdout);
    assert!(child.wait().expect("the client exits").success(), "{line}");
    serde_json::from_str(&line).unwrap_or_else(|err| panic!("{err}: {line}"))
}

#[test]
fn the_python_client_answers_an_upstreams_questions_in_either_era() {
    let hangar = Hangar::start(CONFIG);
    for (mode, version) in [("legacy", LEGACY), ("2026-07-28", "2026-07-28")] {
        let seen = py_asked_client(&hangar, mode);
        assert_eq!(seen["protocol_version"], version, "{seen}");
        assert_eq!(seen["sampling"], json!(["LLM response: sampled: What is 2+2?"]), "{mode}: {seen}");
        let elicited = seen["elicitation"][0].as_str().unwrap_or_default();
        assert!(
            elicited.starts_with("User response: action=accept") && elicited.contains("carol@example.com"),
            "{seen}"
        );
    }
}

#[test]
fn a_legacy_client_dropping_its_plain_call_cancels_it_upstream() {
    let hangar = Hangar::start(CONFIG);
    hangar.tool_ok("hangar_start", json!({"mcp_server": "slow"}));
    let session = hangar.legacy_session();
    let own = hangar.base.trim_start_matches("http://").to_owned();
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"ms": 60000}}});
    let stream = open_post(&own, &session, "application/json, text/event-stream", &call);
    poll("the call to reach the upstream", Duration::from_secs(20), || {
        (hangar.details("slow")["health"]["total_invocations"] == 1).then_some(())
    });
    drop(stream);
    poll("the upstream to be told the call is cancelled", Duration::from_secs(20), || {
        (hangar.cancellations("slow") == 1).then_some(())
    });
}

/// A question without params (`roots/list`) reaches the client as a request it answers (no
/// `"params": null`, which the TypeScript SDK drops as invalid, leaving the call waiting).
#[test]
fn a_legacy_upstreams_question_without_params_is_answered_by_a_legacy_client() {
    let config = format!(
        r#"
tool_access: {{mode: front_door}}
mcp_servers:
  roots:
    command: ["{node}", "{server}"]
"#,
        node = node().display(),
        server = repo_root().join("tests/fixtures/ts_roots_server.mjs").display()
    );
    let hangar = Hangar::start(&config);
    let (mut child, mut stdout) = ts_client(&hangar, "roots");
    let asked = json_line(&mut child, &mut stdout);
    assert_eq!(first_text(&asked["result"]), "roots: file:///tmp/project", "{asked}");
    assert!(child.wait().expect("the client exits").success());
}

/// A legacy session's `hangar_call` is cancelled like a front-door call: every call of the
/// batch, whether answered as plain JSON or as an event stream (a progress token), by a cancel
/// POSTed to another API instance.
#[test]
fn a_cancel_of_a_hangar_call_posted_to_another_api_instance_reaches_the_upstream() {
    let hangar = Hangar::start(CONFIG);
    hangar.tool_ok("hangar_start", json!({"mcp_server": "slow"}));
    let session = hangar.legacy_session();
    let own = hangar.base.trim_start_matches("http://").to_owned();
    let other = hangar.extra_api(&[]);
    let sleep = json!({"mcp_server": "slow", "tool": "sleep", "arguments": {"ms": 60000}});
    // Once the upstream has `calls` calls in all, the cancel of `id` (POSTed to the other
    // instance) reaches it for each still running: the cancels add up to the calls.
    let cancelled_elsewhere = |id: u64, calls: usize| {
        poll("the calls to reach the upstream", Duration::from_secs(20), || {
            (hangar.details("slow")["health"]["total_invocations"] == calls).then_some(())
        });
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "test"}});
        assert_eq!(post_to(&other.addr, &session, &cancel), 202);
        poll("the upstream to be told the calls are cancelled", Duration::from_secs(20), || {
            (hangar.cancellations("slow") == calls).then_some(())
        });
    };
    // Two calls in one batch, answered as plain JSON.
    let batch = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "hangar_call", "arguments": {"calls": [sleep, sleep]}}});
    let plain = open_post(&own, &session, "application/json", &batch);
    cancelled_elsewhere(9, 2);
    let mut answer = String::new();
    let _ = BufReader::new(plain).read_line(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // One call, answered as an event stream (the client asked to hear of progress).
    let watched = json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
        "params": {"name": "hangar_call", "arguments": {"calls": [sleep]}, "_meta": {"progressToken": "p"}}});
    let _stream = open_post(&own, &session, "application/json, text/event-stream", &watched);
    cancelled_elsewhere(10, 3);
}

/// A legacy HTTP upstream's own request, sent on the event stream answering the POST of a call,
/// belongs to that call: its client is asked, and its answer is POSTed back to the upstream.
#[test]
fn a_legacy_http_upstreams_own_request_reaches_the_legacy_client_of_its_call() {
    // server-everything over streamable HTTP (a legacy upstream), on loopback only.
    let hangar = Hangar::start(&hangar_tests::everything_over_http(hangar_tests::free_port()));
    // Listed once the server has started and answered its tools.
    hangar.tool_ok("hangar_start", json!({"mcp_server": "everything"}));
    poll("the sampling tool to be listed", Duration::from_secs(30), || {
        let listed = hangar.mcp("tools/list", json!({})).body.to_string();
        listed.contains("trigger-sampling-request").then_some(())
    });
    a_ts_client_is_asked_for_sampling_mid_call(&hangar);
}

/// A legacy session's `hangar_call` declares the session's client capabilities to its calls'
/// upstreams, and a legacy upstream's own request during it reaches the client on the call's
/// event stream: the TypeScript client's sampling handler is asked, and the batch's result
/// carries what it answered.
#[test]
fn a_legacy_ts_clients_hangar_call_is_asked_an_upstreams_sampling_request() {
    let hangar = everything_behind_the_front_door();
    let (mut child, mut stdout) = ts_client(&hangar, "batch");
    let line = json_line(&mut child, &mut stdout);
    assert_eq!(line["sampled"], 1, "the sampling handler was asked once: {line}");
    let report = &line["result"]["structuredContent"];
    assert_eq!(report["success"], true, "{line}");
    let text = line["result"].to_string();
    assert!(text.contains("LLM sampling result") && text.contains("sampled: Resource"), "{line}");
    assert!(!text.contains("no client was asked"), "{line}");
    assert!(child.wait().expect("the client exits").success());
}

/// A legacy client is asked only what it declared at `initialize`: the TypeScript client
/// declares sampling only, and server-everything's elicitation request during its call gets
/// the clear error a 2026-07-28 client's undeclared capability gets (the tool's result says
/// so); the client is never sent it.
#[test]
fn a_legacy_client_is_not_asked_what_it_did_not_declare() {
    let hangar = everything_behind_the_front_door();
    let (mut child, mut stdout) = ts_client(&hangar, "undeclared");
    let line = json_line(&mut child, &mut stdout);
    assert_eq!(line["asked"], 0, "the client was sent no request it has no handler for: {line}");
    let text = line["result"].to_string();
    assert!(
        text.contains("no client was asked `elicitation/create`: the calling client did not declare `elicitation`"),
        "{line}"
    );
    assert!(child.wait().expect("the client exits").success());
}

/// A 2026-07-28 upstream's `input_required` during a legacy session's `hangar_call` is asked of
/// the client as a server-to-client request on the call's event stream (the conformance fake's
/// `test_sampling`, which asks once): the TypeScript client's sampling handler runs exactly once,
/// and the batch's result carries the upstream's final answer, built from what it sampled.
#[test]
fn a_legacy_ts_clients_hangar_call_answers_a_modern_upstreams_input_required() {
    let hangar = Hangar::start(CONFIG);
    let (mut child, mut stdout) = ts_client(&hangar, "batch-modern");
    let line = json_line(&mut child, &mut stdout);
    assert_eq!(line["sampled"], 1, "the sampling handler was asked once: {line}");
    assert_eq!(line["asked"], 0, "no request the client has no handler for: {line}");
    let report = &line["result"]["structuredContent"];
    assert_eq!(report["success"], true, "{line}");
    let text = line["result"].to_string();
    assert!(text.contains("LLM response: sampled: batched modern"), "{line}");
    assert!(!text.contains("input_required") && !text.contains("inputRequests"), "{line}");
    assert!(child.wait().expect("the client exits").success());
}
