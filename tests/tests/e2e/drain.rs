//! A pod's stop: SIGTERM to the supervisor drains before it stops anything. `/health/ready` turns
//! 503 at once, a new request is refused 503 with `Retry-After`, the call already in flight gets
//! its answer, a task running at SIGTERM can still be collected with `tasks/get`, then the
//! upstreams are stopped and the supervisor exits 0 with none left.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread::JoinHandle;
use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, alive, poll, read_pid};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const CONFIG: &str = r#"
tool_access: {mode: front_door}
shutdown: {grace_s: 30}
mcp_servers:
  slow:
    command: ["{fake}", "--tools", "sleep,echo", "--pid-file", "{dir}/slow.pid"]
"#;

/// The call's sleep: long enough to be surely in flight when the SIGTERM lands.
const SLOW_MS: u64 = 3000;

/// A 2026-07-28 `tools/call` of `sleep` on a connection of its own, read to its end on a thread:
/// the whole HTTP response.
fn slow_call(hangar: &Hangar) -> JoinHandle<String> {
    let addr = hangar.base.trim_start_matches("http://").to_owned();
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "sleep", "arguments": {"ms": SLOW_MS},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}},
    }})
    .to_string();
    std::thread::spawn(move || {
        let mut stream = TcpStream::connect(&addr).expect("connect to the API");
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: sleep\r\nConnection: close\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("send the call");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("read the answer");
        response
    })
}

#[test]
fn sigterm_drains_a_call_in_flight_refuses_new_requests_and_exits_zero() {
    let mut hangar = Hangar::start(CONFIG);
    hangar.tool_ok("hangar_start", json!({"mcp_server": "slow"}));
    let upstream = read_pid(&hangar.path("slow.pid"));
    let call = slow_call(&hangar);
    poll("the slow call to reach the upstream", Duration::from_secs(10), || {
        (hangar.metric("hangar_tool_calls_total{mcp_server=\"slow\"}")? >= 1.0).then_some(())
    });

    kill(Pid::from_raw(hangar.pid() as i32), Signal::SIGTERM).expect("SIGTERM the supervisor");
    let ready = poll("/health/ready to turn 503", Duration::from_secs(10), || {
        let ready = hangar.get("/health/ready");
        (ready.status == 503).then_some(ready)
    });
    assert_eq!(ready.body["status"], "not_ready");
    assert!(ready.body["reason"].as_str().is_some_and(|r| r.contains("draining")), "{}", ready.text);
    assert_eq!(hangar.get("/health/live").status, 200, "a draining hangar is alive");

    let refused = hangar.mcp("tools/list", json!({}));
    assert_eq!(refused.status, 503, "{}", refused.text);
    assert_eq!(refused.header("retry-after"), Some("1"));
    assert_eq!(refused.body["error"]["code"], "ShuttingDown", "{}", refused.text);
    assert_eq!(hangar.get("/api/mcp_servers").status, 503, "REST reads are refused too");
    assert!(alive(upstream), "nothing is stopped while a call is in flight");

    let answer = call.join().expect("the call's thread");
    assert!(answer.starts_with("HTTP/1.1 200"), "the call in flight was answered: {answer}");
    let (_, body) = answer.split_once("\r\n\r\n").expect("a body");
    let result: Value = body
        .lines()
        .filter_map(|line| line.strip_prefix("data: ").or(Some(line)))
        .find_map(|line| hangar_tests::serde_json::from_str::<Value>(line).ok())
        .unwrap_or_else(|| panic!("no JSON in the answer: {answer}"));
    assert!(result["result"]["content"].is_array(), "a tool result, not an error: {result}");
    assert_ne!(result["result"]["isError"], true, "{result}");

    let status = hangar.terminate();
    assert_eq!(status.code(), Some(0), "log:\n{}", hangar.log());
    assert!(!alive(upstream), "the upstream was stopped after the drain");
    assert!(!hangar.socket.exists(), "the control socket is removed");
    let log = hangar.log();
    let drained = log.find("draining").expect("the drain is logged");
    let stopped = log.rfind("supervisor stopped").expect("the stop is logged");
    assert!(drained < stopped);
}

#[test]
fn a_task_running_at_sigterm_finishes_before_the_upstreams_stop() {
    let mut hangar = Hangar::start(CONFIG);
    let takes_tasks =
        json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}});
    let created =
        hangar.mcp_with("tools/call", json!({"name": "sleep", "arguments": {"ms": SLOW_MS}}), takes_tasks, &[]);
    assert!(created.body["result"]["taskId"].is_string(), "a task: {}", created.text);

    // Its client is answered already: only the supervisor knows the call is still running.
    let status = hangar.terminate();
    assert_eq!(status.code(), Some(0), "log:\n{}", hangar.log());
    let entries = crate::journal_audit::entries(&hangar.path("state/journal.sqlite"));
    let sleeps: Vec<&Value> = entries.iter().filter(|e| e["kind"] == "audit" && e["tool"] == "sleep").collect();
    assert!(!sleeps.is_empty(), "the task's call is audited: {entries:?}");
    for entry in &sleeps {
        assert_eq!(entry["outcome"], "ok", "nothing was cut short: {entry}");
    }
    // The upstream's sleep ran to its end (a lower bound, whatever the machine's speed).
    assert!(
        sleeps.iter().any(|e| e["duration_ms"].as_f64().is_some_and(|ms| ms >= SLOW_MS as f64)),
        "the task's call completed: {sleeps:?}"
    );
    assert!(!hangar.log().contains("calls still running after the grace period"), "{}", hangar.log());
}

#[test]
fn a_task_running_at_sigterm_can_still_be_collected_with_tasks_get() {
    let mut hangar = Hangar::start(CONFIG);
    hangar.tool_ok("hangar_start", json!({"mcp_server": "slow"}));
    let upstream = read_pid(&hangar.path("slow.pid"));
    let takes_tasks =
        json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}});
    let created =
        hangar.mcp_with("tools/call", json!({"name": "sleep", "arguments": {"ms": SLOW_MS}}), takes_tasks.clone(), &[]);
    let task_id = created.body["result"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {}", created.text));
    let task_id = task_id.to_owned();

    kill(Pid::from_raw(hangar.pid() as i32), Signal::SIGTERM).expect("SIGTERM the supervisor");
    poll("/health/ready to turn 503", Duration::from_secs(10), || {
        (hangar.get("/health/ready").status == 503).then_some(())
    });
    // The API's own requests are all answered by now; only the task's call runs, in the supervisor.
    let done = poll("the task to complete, polled during the drain", Duration::from_secs(20), || {
        let got =
            hangar.mcp_with("tasks/get", json!({"taskId": task_id}), takes_tasks.clone(), &[("Mcp-Name", &task_id)]);
        assert_eq!(got.status, 200, "tasks/get is answered while draining: {}", got.text);
        (got.body["result"]["status"] == "completed").then_some(got)
    });
    assert_eq!(done.body["result"]["result"]["content"][0]["text"], format!("slept {SLOW_MS} ms"), "{}", done.text);
    assert!(alive(upstream), "the upstream still runs while results can be collected");
    assert_eq!(hangar.mcp("tools/list", json!({})).status, 503, "new work is still refused");

    let status = hangar.terminate();
    assert_eq!(status.code(), Some(0), "log:\n{}", hangar.log());
    assert!(!alive(upstream), "the upstream was stopped after the drain");
}
