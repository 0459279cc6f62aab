//! `/metrics` is valid Prometheus text, linted by the real `promtool`, with every family
//! the hangar promises, while its servers are in every interesting state: ready with calls
//! (ok, a tool error and an upstream failure) and health checks behind it, dead at start,
//! stopped by a user, and serving a tool it was not expected to.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use hangar_tests::serde_json::json;
use hangar_tests::{Hangar, SENTINEL, poll, repo_root};

const CONFIG: &str = r#"
recovery: {max_retries: 0}
mcp_servers:
  ready:
    command: ["{fake}", "--tools", "add,fail", "--fail-flag", "{dir}/ready.fail"]
    health_check_interval_s: 0.2
  start-failed:
    command: ["{fake}", "--tools", "add", "--exit-flag", "{dir}/start-failed.exit"]
  stopped:
    command: ["{fake}", "--tools", "add"]
  drifty:
    command: ["{fake}", "--tools", "add,exfiltrate"]
    capabilities:
      enforcement_mode: alert
      tools: {expected_tools: [add]}
"#;

/// The families `GET /metrics` has always served (state gauge, up, starts, stops by
/// reason, tool calls, call latency histogram, health checks), with the ones the hangar adds.
const FAMILIES: [(&str, &str); 11] = [
    ("hangar_mcp_server_state", "gauge"),
    ("hangar_mcp_server_up", "gauge"),
    ("hangar_mcp_server_starts_total", "counter"),
    ("hangar_mcp_server_stops_total", "counter"),
    ("hangar_tool_calls_total", "counter"),
    ("hangar_tool_call_duration_seconds", "histogram"),
    ("hangar_health_checks_total", "counter"),
    ("hangar_mcp_server_deaths_total", "counter"),
    ("hangar_tool_call_errors_total", "counter"),
    ("hangar_capability_violations_total", "counter"),
    ("hangar_tool_drift_total", "counter"),
];

#[test]
fn metrics_pass_promtool_with_servers_in_every_state() {
    let promtool = repo_root().join(".tools/prometheus/usr/bin/promtool");
    assert!(promtool.exists(), "{} is missing; run scripts/setup-tools (scripts/test does)", promtool.display());
    let hangar = Hangar::start(CONFIG);

    // ready: three good calls, a tool error (an answer, not a failure) and one upstream failure.
    hangar.tool_ok("hangar_start", json!({"mcp_server": "ready"}));
    for i in 0..3 {
        assert_eq!(hangar.call("ready", "add", json!({"a": i, "b": 1})), Some(json!({"result": i + 1})));
    }
    let failed = hangar.tool_ok("hangar_call", json!({"calls": [{"mcp_server": "ready", "tool": "fail"}]}));
    assert_eq!(failed["results"][0]["result"]["isError"], true, "{failed}");
    poll("a passed health check of ready", Duration::from_secs(10), || {
        (hangar.metric("hangar_health_checks_total{mcp_server=\"ready\",result=\"ok\"}")? >= 1.0).then_some(())
    });
    std::fs::write(hangar.path("ready.fail"), "").unwrap();
    let (error_type, _) = hangar.call_error("ready", "add", json!({"a": 1, "b": 1}));
    assert_eq!(error_type, "upstream_error");
    std::fs::remove_file(hangar.path("ready.fail")).unwrap();

    // start-failed: exits at start, so it is dead with a reason.
    std::fs::write(hangar.path("start-failed.exit"), "").unwrap();
    let refused = hangar.tool("hangar_start", json!({"mcp_server": "start-failed"}));
    assert_eq!(refused["structuredContent"]["error_type"], "start_failed", "{refused}");
    poll("start-failed to read dead", Duration::from_secs(10), || {
        (hangar.details("start-failed")["dead"]["reason"] == "start_failed").then_some(())
    });

    // stopped: started, then stopped by the user.
    hangar.tool_ok("hangar_start", json!({"mcp_server": "stopped"}));
    hangar.tool_ok("hangar_stop", json!({"mcp_server": "stopped"}));

    // drifty: serves a tool outside its expected ones (alert mode: recorded, still up).
    hangar.tool_ok("hangar_start", json!({"mcp_server": "drifty"}));

    let text = hangar.metrics();
    let (ok, said) = promtool_check(&promtool, &text);
    assert!(ok && said.is_empty(), "promtool check metrics found problems:\n{said}\nin:\n{text}");

    for (name, kind) in FAMILIES {
        assert_eq!(text.matches(&format!("\n# TYPE {name} {kind}\n")).count(), 1, "{name} {kind}:\n{text}");
        assert!(text.contains(&format!("# HELP {name} ")), "{name} has help:\n{text}");
        assert!(text.lines().any(|l| l.starts_with(name) && !l.starts_with('#')), "{name} has samples:\n{text}");
    }
    // The samples say what happened.
    let sample = |s: &str| text.lines().find_map(|l| l.strip_prefix(s)?.trim().parse::<f64>().ok());
    assert_eq!(sample("hangar_mcp_server_state{mcp_server=\"ready\"}"), Some(2.0));
    assert_eq!(sample("hangar_mcp_server_state{mcp_server=\"start-failed\"}"), Some(4.0));
    assert_eq!(sample("hangar_mcp_server_state{mcp_server=\"stopped\"}"), Some(0.0));
    assert_eq!(sample("hangar_mcp_server_up{mcp_server=\"start-failed\"}"), Some(0.0));
    assert_eq!(
        sample("hangar_mcp_server_deaths_total{mcp_server=\"start-failed\",reason=\"start_failed\"}"),
        Some(1.0)
    );
    assert_eq!(sample("hangar_mcp_server_stops_total{mcp_server=\"stopped\",reason=\"user_request\"}"), Some(1.0));
    assert_eq!(sample("hangar_tool_calls_total{mcp_server=\"ready\"}"), Some(5.0));
    assert_eq!(sample("hangar_tool_call_errors_total{mcp_server=\"ready\"}"), Some(1.0));
    assert_eq!(sample("hangar_tool_call_duration_seconds_count{mcp_server=\"ready\"}"), Some(5.0));
    assert_eq!(sample("hangar_tool_call_duration_seconds_bucket{mcp_server=\"ready\",le=\"+Inf\"}"), Some(5.0));
    assert_eq!(sample("hangar_capability_violations_total{mcp_server=\"drifty\"}"), Some(1.0));
    hangar.assert_no_body_contains(SENTINEL);
}

/// Pipes `text` to `promtool check metrics`: whether it exited 0, and everything it printed.
fn promtool_check(promtool: &std::path::Path, text: &str) -> (bool, String) {
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("cannot run {}: {err}", promtool.display()));
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), said.trim().to_owned())
}

/// The check itself can fail: a family without HELP, or a counter without `_total`, is reported.
#[test]
fn promtool_reports_what_it_should() {
    let promtool = repo_root().join(".tools/prometheus/usr/bin/promtool");
    assert!(promtool.exists(), "{} is missing; run scripts/setup-tools (scripts/test does)", promtool.display());
    let (ok, said) = promtool_check(&promtool, "# TYPE hangar_things counter\nhangar_things 1\n");
    assert!(!ok && said.contains("_total") && said.contains("no help text"), "{said}");
}
