//! An over-long line on an upstream's stdout is one fault on one line: it is skipped unread,
//! logged without its content, counted once, and the calls in flight around it get their own
//! answers. Only the request it answered (when it was an answer) fails.

use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, SENTINEL, poll};

const IN_FLIGHT: usize = 5;
const JUNK_BYTES: u64 = 5 * 1024 * 1024;

fn counts(hangar: &Hangar) -> (Value, Option<f64>, Option<f64>) {
    let health = hangar.details("long")["health"].clone();
    let skipped = hangar.metric("hangar_upstream_messages_skipped_total{mcp_server=\"long\"}");
    let call_errors = hangar.metric("hangar_tool_call_errors_total{mcp_server=\"long\"}");
    (json!([health["total_failures"], health["consecutive_failures"]]), skipped, call_errors)
}

/// Runs `IN_FLIGHT` sleep calls on threads, waits until all are in flight, runs `during`, and
/// returns what each sleep call answered.
fn with_sleeps_in_flight(hangar: &Hangar, during: impl FnOnce()) -> Vec<Option<String>> {
    let before = hangar.details("long")["health"]["total_invocations"].as_u64().unwrap();
    std::thread::scope(|scope| {
        let sleeps: Vec<_> = (0..IN_FLIGHT).map(|_| scope.spawn(|| sleep_call(hangar))).collect();
        poll("every sleep call in flight", Duration::from_secs(10), || {
            let now = hangar.details("long")["health"]["total_invocations"].as_u64().unwrap();
            (now == before + IN_FLIGHT as u64).then_some(())
        });
        during();
        sleeps.into_iter().map(|s| s.join().unwrap()).collect()
    })
}

/// A 3 s `sleep` call: the text it answered, or `None` if it failed.
fn sleep_call(hangar: &Hangar) -> Option<String> {
    let calls = json!([{"mcp_server": "long", "tool": "sleep", "arguments": {"ms": 3000}}]);
    let batch = hangar.tool_ok("hangar_call", json!({"calls": calls}));
    batch["results"][0]["result"]["content"][0]["text"].as_str().map(str::to_owned)
}

#[test]
fn a_5_mib_junk_line_is_skipped_counted_once_and_every_call_in_flight_gets_its_answer() {
    let hangar = Hangar::start(
        r#"
mcp_servers:
  long:
    command: ["{fake}", "--tools", "sleep,junk_line,huge,add"]
    max_consecutive_failures: 3
"#,
    );
    hangar.tool_ok("hangar_start", json!({"mcp_server": "long"}));
    let pid = hangar.details("long")["meta"]["pid"].clone();
    assert_eq!(counts(&hangar), (json!([0, 0]), Some(0.0), Some(0.0)));

    // A junk line that answers nothing, printed while five calls wait.
    let answers = with_sleeps_in_flight(&hangar, || {
        let junk = hangar.call("long", "junk_line", json!({"bytes": JUNK_BYTES}));
        assert_eq!(junk.as_ref().map(|_| ()), Some(()), "the call that printed it gets its answer too");
    });
    for answer in &answers {
        assert_eq!(answer.as_deref(), Some("slept 3000 ms"), "each call in flight gets its own answer");
    }
    let details = hangar.details("long");
    assert_eq!((&details["state"], &details["meta"]["pid"]), (&json!("ready"), &pid), "not restarted");
    assert_eq!(counts(&hangar), (json!([1, 1]), Some(1.0), Some(0.0)), "one fault, one failure; no call failed");

    // An over-long answer to one call fails that call at once, and only that one.
    let answers = with_sleeps_in_flight(&hangar, || {
        let (error_type, error) = hangar.call_error("long", "huge", json!({"bytes": JUNK_BYTES}));
        assert_eq!(error_type, "upstream_error");
        assert!(error.contains("over the limit") && error.contains("skipped it unread"), "{error}");
    });
    for answer in &answers {
        assert_eq!(answer.as_deref(), Some("slept 3000 ms"), "the calls around it are answered");
    }
    assert_eq!(hangar.details("long")["meta"]["pid"], pid);
    assert_eq!(counts(&hangar), (json!([2, 2]), Some(2.0), Some(1.0)), "the failed call is counted once");
    assert_eq!(hangar.call("long", "add", json!({"a": 2, "b": 3})), Some(json!({"result": 5})));

    // The log says what was skipped and why, with none of the junk.
    let logs = hangar.get("/api/mcp_servers/long/logs?lines=1000");
    let skipped: Vec<&str> = logs.body["logs"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["content"].as_str())
        .filter(|c| c.starts_with("[hangar] skipped a"))
        .collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(skipped[0].contains(&format!("skipped a {JUNK_BYTES}-byte line on stdout")), "{skipped:?}");
    assert!(skipped[0].contains("answered no request in flight"), "{skipped:?}");
    assert!(skipped[1].contains("which failed"), "{skipped:?}");
    assert!(!logs.text.contains(SENTINEL), "the junk itself is not logged");
    assert!(!hangar.log().contains(SENTINEL), "nor in the hangar's own log");
}

/// Over HTTP each answer is its own response: one over the size limit (a JSON body, or an event
/// of an event stream) fails its own request only, is skipped as it streams by, and counts once.
#[test]
fn an_over_long_http_answer_fails_only_its_request_and_counts_once() {
    let (json_port, sse_port) = (hangar_tests::free_port(), hangar_tests::free_port());
    let hangar = Hangar::start(&format!(
        r#"
mcp_servers:
  plain:
    mode: http
    command: ["{{fake}}", "--http", "127.0.0.1:{json_port}", "--tools", "huge,add"]
    endpoint: http://127.0.0.1:{json_port}/mcp
  events:
    mode: http
    command: ["{{fake}}", "--http", "127.0.0.1:{sse_port}", "--sse", "--tools", "huge,add"]
    endpoint: http://127.0.0.1:{sse_port}/mcp
"#
    ));
    for id in ["plain", "events"] {
        hangar.tool_ok("hangar_start", json!({"mcp_server": id}));
        let pid = hangar.details(id)["meta"]["pid"].clone();
        let (error_type, error) = hangar.call_error(id, "huge", json!({"bytes": 17_000_000}));
        assert_eq!(error_type, "upstream_error", "{id}");
        assert!(error.contains("over the limit") && error.contains("skipped it unread"), "{id}: {error}");
        assert_eq!(hangar.call(id, "add", json!({"a": 1, "b": 2})), Some(json!({"result": 3})), "{id}");
        let details = hangar.details(id);
        assert_eq!((&details["state"], &details["meta"]["pid"]), (&json!("ready"), &pid), "{id}");
        assert_eq!(details["health"]["total_failures"], 1, "{id}: one fault, one failure");
        let skipped = hangar.metric(&format!("hangar_upstream_messages_skipped_total{{mcp_server=\"{id}\"}}"));
        assert_eq!(skipped, Some(1.0), "{id}");
        let logs = hangar.get(&format!("/api/mcp_servers/{id}/logs?lines=100"));
        assert!(logs.text.contains("[hangar] skipped unread"), "{id}: {}", logs.text);
        assert!(!logs.text.contains("xxxxxxxxxxxxxxxx"), "{id}: none of the answer is logged");
    }
}
