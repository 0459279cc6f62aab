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
    assert!(contents.iter().any(|c| c.contains("skipped a")), "the over-long line is recorded as skipped");
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
