//! Admission limits: a server's and the hangar's concurrency limits refuse the request beyond
//! them at once and say which limit refused; an opt-in rate limit refuses with when to retry.
//! Calls are held in flight for real (a `sleep` upstream call on an open connection), and freed
//! for real (the client goes away, which cancels the call upstream).

use std::net::TcpStream;

use hangar_tests::serde_json::json;
use hangar_tests::{Hangar, poll};
use std::time::Duration;

const CONFIG: &str = r#"
tool_access: {mode: front_door}
limits: {max_concurrent_calls: 3}
mcp_servers:
  slow:
    command: ["{fake}", "--tools", "sleep,echo"]
    limits: {max_concurrent_calls: 2}
  other:
    command: ["{fake}", "--tools", "sleep,add"]
"#;

fn calls_sent(hangar: &Hangar, server: &str) -> f64 {
    hangar.metric(&format!("hangar_tool_calls_total{{mcp_server=\"{server}\"}}")).unwrap_or(0.0)
}

#[test]
fn concurrency_limits_refuse_beyond_them_and_free_up_when_calls_end() {
    let hangar = Hangar::start(CONFIG);
    // `slow`'s sleep is named `slow__sleep` in the front door (both servers have `sleep`).
    let held: Vec<TcpStream> = (0..2).map(|_| hangar.open_sleep_call("slow__sleep", json!({}))).collect();
    poll("two calls in flight on slow", Duration::from_secs(20), || (calls_sent(&hangar, "slow") >= 2.0).then_some(()));

    // The server's own limit refuses a third call, on both tool surfaces.
    let (kind, message) = hangar.call_error("slow", "echo", json!({"text": "hi"}));
    assert_eq!(kind, "concurrency_limited", "{message}");
    assert!(message.contains("MCP server `slow` already has 2 requests in flight"), "{message}");
    assert!(message.contains("mcp_servers.slow.limits.max_concurrent_calls"), "names the key: {message}");
    let direct = hangar.mcp("tools/call", json!({"name": "echo", "arguments": {"text": "hi"}}));
    assert_eq!(direct.body["result"]["isError"], true, "{}", direct.text);
    assert_eq!(direct.body["result"]["structuredContent"]["error_type"], "concurrency_limited", "{}", direct.text);

    // Another server is not limited by `slow`'s limit...
    assert!(hangar.call("other", "add", json!({"a": 1, "b": 2})).is_some(), "other is not limited by slow's limit");
    // ...but the hangar-wide one counts every server's calls: 2 + 1 = 3 fills it.
    let _third = hangar.open_sleep_call("other__sleep", json!({}));
    poll("a call in flight on other", Duration::from_secs(20), || (calls_sent(&hangar, "other") >= 2.0).then_some(()));
    let (kind, message) = hangar.call_error("other", "add", json!({"a": 1, "b": 2}));
    assert_eq!(kind, "concurrency_limited", "{message}");
    assert!(
        message.contains("the hangar already has 3 requests in flight, its limit (limits.max_concurrent_calls)"),
        "{message}"
    );

    let refused = |sample: &str| hangar.metric(sample).unwrap_or_else(|| panic!("{sample} in /metrics"));
    assert_eq!(
        refused("hangar_mcp_server_requests_refused_total{mcp_server=\"slow\",limit=\"max_concurrent_calls\"}"),
        2.0
    );
    assert_eq!(refused("hangar_requests_refused_total{limit=\"max_concurrent_calls\"}"), 1.0);

    // A client going away cancels its call and frees its place.
    drop(held);
    poll("slow admits calls again", Duration::from_secs(20), || hangar.call("slow", "echo", json!({"text": "back"})));
}

#[test]
fn an_opt_in_rate_limit_refuses_with_when_to_retry_and_the_default_has_none() {
    let hangar = Hangar::start(
        r#"
mcp_servers:
  metered:
    command: ["{fake}", "--tools", "echo"]
    # One call per 100 s with a burst of 2: the third call in a row is refused.
    limits: {rate_limit: {calls_per_s: 0.01, burst: 2}}
  free:
    command: ["{fake}", "--tools", "echo"]
"#,
    );
    for _ in 0..2 {
        assert!(hangar.call("metered", "echo", json!({"text": "ok"})).is_some());
    }
    let (kind, message) = hangar.call_error("metered", "echo", json!({"text": "too soon"}));
    assert_eq!(kind, "rate_limited", "{message}");
    assert!(
        message.contains("rate limit of MCP server `metered` reached (mcp_servers.metered.limits.rate_limit)"),
        "{message}"
    );
    let retry_ms: u64 = message
        .rsplit("retry in ")
        .next()
        .and_then(|rest| rest.strip_suffix(" ms"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("says when to retry: {message}"));
    assert!(retry_ms > 1000 && retry_ms <= 100_000, "{retry_ms}");
    let sample = "hangar_mcp_server_requests_refused_total{mcp_server=\"metered\",limit=\"rate_limit\"}";
    assert_eq!(hangar.metric(sample), Some(1.0));

    // No rate limit unless configured: many calls in a row all pass.
    for i in 0..50 {
        assert!(hangar.call("free", "echo", json!({"text": i.to_string()})).is_some(), "call {i}");
    }
}
