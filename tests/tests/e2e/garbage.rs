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
    assert!(
        contents.iter().any(|c| c.starts_with("[hangar] skipped a 6000000-byte line on stdout")),
        "the over-long line is recorded as skipped"
    );
    assert!(lines.iter().all(|l| l["recorded_at"].as_str().is_some_and(|t| t.ends_with('Z'))));
    // The fake logs the hangar's answers to its own ping and sampling requests.
    assert!(contents.iter().any(|c| c.contains("fake-ping-1")), "{contents:?}");
}

/// Bytes the flooding fake writes to stderr: a million 100-byte lines.
const FLOOD_BYTES: u64 = 100_000_000;
/// How much the supervisor's peak resident memory may exceed what it had before the flood. The
/// flood is 100 MB; the ring keeps 1000 lines of at most 4 KiB, so a hangar that holds on to
/// what it drains would blow far past this.
const RSS_GROWTH_LIMIT_KIB: u64 = 32 * 1024;

#[test]
fn a_100_mb_stderr_flood_stalls_nothing_and_the_hangar_does_not_grow() {
    use hangar_tests::{poll, proc_status_kib};
    use std::time::Duration;

    let hangar = Hangar::start(&format!(
        r#"
mcp_servers:
  flood:
    command: ["{{fake}}", "--tools", "add", "--flood-stderr", "{FLOOD_BYTES}"]
  calm:
    command: ["{{fake}}", "--tools", "add"]
"#
    ));
    // The baseline is a hangar already serving: a running server and a call through every layer.
    hangar.tool_ok("hangar_start", json!({"mcp_server": "calm"}));
    assert_eq!(hangar.call("calm", "add", json!({"a": 1, "b": 1})), Some(json!({"result": 2})));
    let pid = hangar.pid();
    let rss_before = proc_status_kib(pid, "VmRSS").unwrap();

    // The fake floods from the moment it starts. Calls to both servers go on until the log
    // shows the flood's last line (sequence number 999999, the millionth 100-byte line).
    hangar.tool_ok("hangar_start", json!({"mcp_server": "flood"}));
    let last_line = format!("flood {:010}", FLOOD_BYTES / 100 - 1);
    let mut rounds_during_flood = 0;
    let mut i = 0;
    let logs = poll("the flood's last line in the log", Duration::from_secs(300), || {
        i += 1;
        assert_eq!(hangar.call("flood", "add", json!({"a": i, "b": 0})), Some(json!({"result": i})));
        assert_eq!(hangar.call("calm", "add", json!({"a": i, "b": 1})), Some(json!({"result": i + 1})));
        let logs = hangar.get("/api/mcp_servers/flood/logs?lines=1000");
        assert_eq!(logs.status, 200, "{}", logs.text);
        if logs.text.contains(&last_line) {
            return Some(logs);
        }
        rounds_during_flood += 1;
        None
    });
    let rss_after = proc_status_kib(pid, "VmRSS").unwrap();
    let peak = proc_status_kib(pid, "VmHWM").unwrap();
    eprintln!(
        "supervisor memory with a {FLOOD_BYTES}-byte stderr flood: VmRSS before {rss_before} KiB, \
         VmHWM after {peak} KiB (growth {} KiB), VmRSS after {rss_after} KiB; \
         {rounds_during_flood} rounds of calls answered while the flood ran",
        peak.saturating_sub(rss_before)
    );
    assert!(rounds_during_flood > 0, "no call was answered while the flood ran: it stalled them");
    assert!(
        peak.saturating_sub(rss_before) < RSS_GROWTH_LIMIT_KIB,
        "the supervisor grew with the flood: VmRSS {rss_before} KiB before, VmHWM {peak} KiB after"
    );

    // The ring kept its last 1000 lines, no more: the oldest flood line it still holds is from
    // the flood's very end.
    let lines = logs.body["logs"].as_array().unwrap();
    assert_eq!((logs.body["count"].as_u64(), lines.len()), (Some(1000), 1000), "a full ring, and no more");
    let oldest = lines
        .iter()
        .filter_map(|l| l["content"].as_str()?.split("flood ").nth(1)?.get(..10)?.parse::<u64>().ok())
        .min()
        .unwrap();
    assert!(oldest >= FLOOD_BYTES / 100 - 1000, "the ring dropped older lines; its oldest is {oldest}");
    assert_eq!(hangar.details("flood")["state"], "ready");

    // Every read surface but the flooding server's own logs is free of what it printed.
    hangar.get("/api/mcp_servers");
    hangar.details("calm");
    hangar.get("/api/mcp_servers/calm/logs?lines=1000");
    hangar.tool_ok("hangar_status", json!({}));
    hangar.tool_ok("hangar_list", json!({}));
    hangar.metrics();
    let own_logs = |body: &str| {
        body.starts_with('{') && body.contains(r#""mcp_server_id":"flood""#) && body.contains(r#""logs":"#)
    };
    let leaks: Vec<String> = hangar.bodies().into_iter().filter(|b| b.contains(SENTINEL) && !own_logs(b)).collect();
    assert!(leaks.is_empty(), "a read surface leaked {SENTINEL:?}: {leaks:?}");
}

/// Before issue 11 an over-long line failed every request in flight; now it is skipped and only
/// the request it answered fails (`long_lines.rs` has the calls around it). It still counts, once,
/// against the server: at `max_consecutive_failures: 1` that degrades it and recovery restarts it.
#[test]
fn a_ten_megabyte_answer_fails_its_own_call_and_counts_once_against_the_server() {
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
        logs.text.contains("skipped a 1000") && logs.text.contains("-byte line on stdout"),
        "logged: {}",
        logs.text
    );
    // Marked failed: degraded, then restarted by recovery; and the hangar is fine.
    hangar_tests::poll("bloated to be restarted", std::time::Duration::from_secs(15), || {
        let details = hangar.details("bloated");
        (details["meta"]["restarts"] == 1 && details["state"] == "ready").then_some(())
    });
    assert_eq!(hangar.details("bloated")["health"]["total_failures"], 1, "one fault, one failure");
    assert_eq!(hangar.call("bloated", "add", json!({"a": 1, "b": 1})), Some(json!({"result": 2})));
}
