//! Shared resources are bounded per identity, so one identity cannot crowd out another: a flood
//! of legacy `initialize`s (or `GET /sse`s) from one key evicts that key's own sessions, never
//! another's, and past `tool_access.sessions.max_per_identity` it is refused (429, the limit's
//! key path named); one key that fills its `tasks.max_per_identity` is refused its next call
//! that may become a task (before it runs) while another still gets tasks, and its own finished
//! tasks give way to its next.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, key_hash, legacy_post, poll, raw_http};

use crate::legacy_sessions::addr;
use crate::tasks::{ALICE, BOB, mcp};

/// Two keys, the front door, and a fake with a slow tool; `extra` adds top-level keys.
fn hangar(sessions: &str, extra: &str) -> Hangar {
    Hangar::start(&format!(
        "tool_access: {{mode: front_door, sessions: {sessions}}}\n{extra}\nauth:\n  api_keys:\n    - {{name: alice, hash: \"{}\"}}\n    - {{name: bob, hash: \"{}\"}}\n\
         mcp_servers:\n  slow:\n    command: [\"{{fake}}\", \"--tools\", \"sleep,echo\"]\n",
        key_hash(ALICE),
        key_hash(BOB),
    ))
}

/// A legacy JSON-RPC POST to `/mcp` as `key`: the status and the whole answer (head and body).
fn legacy(addr: &str, key: &str, session: Option<&str>, method: &str, params: Value) -> (u16, String) {
    legacy_post(addr, Some(key), session, 1, method, params)
}

/// `initialize` as `key`: the status, and the session id (or the whole answer when refused).
fn initialize(addr: &str, key: &str) -> (u16, String) {
    let params =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}});
    let (status, text) = legacy(addr, key, None, "initialize", params);
    let session = text.lines().find(|l| l.to_ascii_lowercase().starts_with("mcp-session-id:"));
    match session {
        Some(line) if status == 200 => (status, line.split_once(':').unwrap().1.trim().to_owned()),
        _ => (status, text),
    }
}

/// `GET /sse` as `key`: the held stream and its session id, or the refusal's status and answer.
fn open_sse(addr: &str, key: &str) -> Result<(TcpStream, String), (u16, String)> {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let head = format!(
        "GET /sse HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nAuthorization: Bearer {key}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut seen = String::new();
    let found = poll("the /sse answer", Duration::from_secs(10), || {
        let mut chunk = [0u8; 8192];
        if let Ok(n) = stream.read(&mut chunk) {
            seen.push_str(&String::from_utf8_lossy(&chunk[..n]));
        }
        if let Some(at) = seen.find("sessionId=") {
            let id: String = seen[at + 10..].chars().take_while(|c| !c.is_whitespace()).collect();
            return Some(Ok(id));
        }
        let status = seen.split_whitespace().nth(1).and_then(|s| s.parse::<u16>().ok());
        match status {
            Some(status) if status != 200 && seen.contains("\r\n\r\n{") && seen.ends_with('}') => {
                Some(Err((status, seen.clone())))
            }
            _ => None,
        }
    });
    found.map(|id| (stream, id))
}

/// A `ping` POSTed to an `/sse` session as `key`: the status (202 once accepted).
fn sse_ping(addr: &str, key: &str, session: &str) -> u16 {
    let head = format!(
        "POST /messages?sessionId={session} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Authorization: Bearer {key}\r\n"
    );
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "ping"});
    raw_http(addr, &head, body.to_string().as_bytes()).expect("the API answers").0
}

#[test]
fn one_identity_s_flood_of_sessions_evicts_its_own_never_another_s() {
    let hangar = hangar("{max_sessions: 12}", "");
    let here = addr(&hangar);
    let (status, bob) = initialize(&here, BOB);
    assert_eq!(status, 200, "{bob}");
    let (_bob_stream, bob_sse) = open_sse(&here, BOB).expect("bob's /sse session");
    // Alice opens far more than the hangar keeps, legacy and /sse alike.
    let mut alice_streams = Vec::new();
    for n in 0..30 {
        if n % 10 == 0 {
            alice_streams.push(open_sse(&here, ALICE).expect("alice's /sse session"));
        }
        let (status, text) = initialize(&here, ALICE);
        assert_eq!(status, 200, "alice's initialize {n}: {text}");
    }
    let (status, text) = legacy(&here, BOB, Some(&bob), "ping", json!({}));
    assert_eq!(status, 200, "bob's legacy session survived alice's flood and works: {text}");
    assert_eq!(sse_ping(&here, BOB, &bob_sse), 202, "bob's /sse session survived alice's flood and works");
    let (status, text) =
        legacy(&here, BOB, Some(&bob), "tools/call", json!({"name": "echo", "arguments": {"text": "hi"}}));
    assert!(status == 200 && text.contains("hi"), "{status} {text}");
}

#[test]
fn past_its_own_cap_an_identity_is_refused_sessions_clearly_and_others_are_not() {
    let hangar = hangar("{max_sessions: 100, max_per_identity: 3}", "");
    let here = addr(&hangar);
    let mut alice = Vec::new();
    for _ in 0..3 {
        let (status, session) = initialize(&here, ALICE);
        assert_eq!(status, 200, "{session}");
        alice.push(session);
    }
    let (status, refused) = initialize(&here, ALICE);
    assert_eq!(status, 429, "{refused}");
    assert!(refused.contains("tool_access.sessions.max_per_identity"), "the limit is named: {refused}");
    assert!(refused.contains("concurrency_limited"), "{refused}");
    let (status, refused) = open_sse(&here, ALICE).map(|_| (200, String::new())).unwrap_or_else(|e| e);
    assert_eq!(status, 429, "/sse is bounded alike: {refused}");
    // Everyone else is untouched, and alice's own sessions still work.
    let (status, bob) = initialize(&here, BOB);
    assert_eq!(status, 200, "{bob}");
    for session in &alice {
        assert_eq!(legacy(&here, ALICE, Some(session), "ping", json!({})).0, 200);
    }
    // Ending one of hers makes room for another.
    let head = format!(
        "DELETE /mcp HTTP/1.1\r\nHost: {here}\r\nAuthorization: Bearer {ALICE}\r\nMcp-Session-Id: {}\r\n",
        alice[0]
    );
    assert_eq!(raw_http(&here, &head, b"").unwrap().0, 200);
    assert_eq!(initialize(&here, ALICE).0, 200);
}

/// A slow call as `key` from a client that takes tasks: the HTTP status and JSON-RPC answer.
fn slow_task(base: &str, key: &str, ms: u64) -> (u16, Value) {
    mcp(base, key, "tools/call", json!({"name": "sleep", "arguments": {"ms": ms}}), true)
}

#[test]
fn one_identity_cannot_fill_the_task_book_and_its_finished_tasks_give_way() {
    let hangar = hangar("{}", "tasks: {max_per_identity: 2}");
    let base = hangar.base.clone();
    let task_id = |answer: &Value| answer["result"]["taskId"].as_str().map(str::to_owned);
    let mut alice = Vec::new();
    for _ in 0..2 {
        let (status, answer) = slow_task(&base, ALICE, 4000);
        assert_eq!(status, 200, "{answer}");
        alice.push(task_id(&answer).unwrap_or_else(|| panic!("a task: {answer}")));
    }
    // Her third is refused, clearly, while her two work.
    let (status, refused) = slow_task(&base, ALICE, 4000);
    let text = refused.to_string();
    assert!(task_id(&refused).is_none(), "no third task for alice: {refused}");
    assert!(text.contains("tasks.max_per_identity") && text.contains("too many tasks"), "{status} {refused}");
    // Bob still gets tasks.
    let (status, answer) = slow_task(&base, BOB, 1500);
    assert_eq!(status, 200, "{answer}");
    assert!(task_id(&answer).is_some(), "bob gets a task while alice holds her quota: {answer}");
    // Once hers finish, they give way to her next.
    for id in &alice {
        poll("alice's task to finish", Duration::from_secs(20), || {
            let (_, got) = mcp(&base, ALICE, "tasks/get", json!({"taskId": id}), true);
            (got["result"]["status"] == "completed").then_some(())
        });
    }
    let (status, answer) = slow_task(&base, ALICE, 1500);
    assert_eq!(status, 200, "{answer}");
    assert!(task_id(&answer).is_some(), "her finished tasks gave way: {answer}");
}
