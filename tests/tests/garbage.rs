//! An upstream that prints garbage, floods stderr or answers ids nobody asked about does not take
//! the hangar down, and what it printed reaches only its logs endpoint.

use hangar_tests::{Hangar, SENTINEL, serde_json::json};

#[test]
fn garbage_on_stdout_is_logged_and_breaks_nothing() {
    let hangar = Hangar::start(
        r#"
mcp_servers:
  noisy:
    command: ["{fake}", "--tools", "add,echo", "--garbage-stdout", "--garbage-line-bytes", "6000000", "--ping-parent"]
  calm:
    command: ["{fake}", "--tools", "add"]
"#,
    );
    hangar.tool_ok("hangar_start", json!({"mcp_server": "noisy"}));
    let calls: Vec<_> =
        (0..20).map(|i| json!({"mcp_server": "noisy", "tool": "add", "arguments": {"a": i, "b": 1}})).collect();
    let batch = hangar.tool_ok("hangar_call", json!({"calls": calls, "max_concurrency": 8}));
    assert_eq!(batch["succeeded"], 20, "{batch}");
    for (i, result) in batch["results"].as_array().unwrap().iter().enumerate() {
        assert_eq!(result["index"], i);
        assert_eq!(result["result"]["structuredContent"]["result"], i + 1, "answers reach their own callers");
    }
    assert_eq!(hangar.details("noisy")["state"], "ready");
    hangar.tool_ok(
        "hangar_call",
        json!({"calls": [{"mcp_server": "calm", "tool": "add", "arguments": {"a": 1, "b": 1}}]}),
    );

    // Read every surface, then check none repeated the garbage.
    hangar.get("/api/mcp_servers");
    hangar.details("noisy");
    hangar.get("/api/mcp_servers/noisy/tools");
    hangar.tool_ok("hangar_status", json!({}));
    hangar.tool_ok("hangar_list", json!({}));
    hangar.assert_no_body_contains(SENTINEL);

    let logs = hangar.get("/api/mcp_servers/noisy/logs?lines=1000");
    assert_eq!(logs.status, 200);
    let lines = logs.body["logs"].as_array().unwrap();
    assert_eq!(logs.body["count"], lines.len());
    assert_eq!(logs.body["mcp_server_id"], "noisy");
    let contents: Vec<&str> = lines.iter().map(|l| l["content"].as_str().unwrap()).collect();
    assert!(contents.iter().any(|c| c.contains("this is not json")), "non-JSON stdout is logged");
    assert!(contents.iter().any(|c| c.contains("987654321")), "an answer to an unknown id is logged");
    assert!(contents.iter().any(|c| c.contains("refused a")), "the over-long line is recorded as refused");
    assert!(lines.iter().all(|l| l["recorded_at"].as_str().is_some_and(|t| t.ends_with('Z'))));
    // The fake logs the hangar's answers to its own ping and sampling requests.
    assert!(contents.iter().any(|c| c.contains("fake-ping-1")), "{contents:?}");
}

#[test]
fn a_stderr_flood_never_stalls_the_server_and_the_log_stays_bounded() {
    let hangar = Hangar::start(
        r#"
mcp_servers:
  flood:
    command: ["{fake}", "--tools", "add", "--flood-stderr", "30000000"]
"#,
    );
    hangar.tool_ok("hangar_start", json!({"mcp_server": "flood"}));
    for i in 0..50 {
        let batch = hangar.tool_ok(
            "hangar_call",
            json!({"calls": [{"mcp_server": "flood", "tool": "add", "arguments": {"a": i, "b": 0}}]}),
        );
        assert_eq!(batch["results"][0]["result"]["structuredContent"]["result"], i);
    }
    let logs = hangar.get("/api/mcp_servers/flood/logs?lines=1000");
    let count = logs.body["count"].as_u64().unwrap();
    assert!(count <= 1000, "the ring holds at most 1000 lines, got {count}");
    assert!(count > 0);
    hangar.get("/api/mcp_servers");
    let bodies = hangar.bodies();
    let leaks = bodies.iter().filter(|b| b.contains(SENTINEL) && !b.contains("\"logs\"")).count();
    assert_eq!(leaks, 0);
}

#[test]
fn a_ten_megabyte_answer_is_refused_cleanly_and_counts_against_the_server() {
    let hangar = Hangar::start(
        r#"
recovery: {initial_backoff_s: 0.2}
mcp_servers:
  bloated:
    command: ["{fake}", "--tools", "huge,add"]
    max_consecutive_failures: 1
"#,
    );
    hangar.tool_ok("hangar_start", json!({"mcp_server": "bloated"}));
    let (error_type, error) = hangar.call_error("bloated", "huge", json!({"bytes": 10_000_000}));
    assert_eq!(error_type, "upstream_error");
    assert!(error.contains("over the limit"), "{error}");
    let logs = hangar.get("/api/mcp_servers/bloated/logs?lines=100");
    assert!(
        logs.text.contains("refused a 1000") && logs.text.contains("-byte line on stdout"),
        "logged: {}",
        logs.text
    );
    // Marked failed: degraded, then restarted by recovery; and the hangar is fine.
    hangar_tests::poll("bloated to be restarted", std::time::Duration::from_secs(15), || {
        let details = hangar.details("bloated");
        (details["meta"]["restarts"] == 1 && details["state"] == "ready").then_some(())
    });
    assert_eq!(hangar.call("bloated", "add", json!({"a": 1, "b": 1})), Some(json!({"result": 2})));
}
