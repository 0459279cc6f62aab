//! An egress client (`tool_access.mode: egress`, the default: `/mcp` serves the `hangar_*` tools
//! only) is never told its tool list changed when an upstream's did: its list did not (issue 32
//! §3). A legacy session's stream hears the upstream's own log line, sent after the upstream's
//! tools changed, and no `notifications/tools/list_changed` before it.

use std::time::Duration;

use hangar_tests::{Hangar, poll};
use serde_json::json;

use crate::legacy_sessions::{open_stream, read_until};

const EGRESS: &str = r#"
mcp_servers:
  math:
    command: ["{fake}", "--tools", "add,rpc_error", "--alt-tools", "add,echo,rpc_error", "--alt-tools-flag", "{dir}/alt"]
"#;

#[test]
fn an_egress_session_hears_no_tool_list_change_of_an_upstream() {
    let hangar = Hangar::start(EGRESS);
    assert_eq!(hangar.post("/api/mcp_servers/math/start", None).status, 200);
    let session = hangar.legacy_session();
    assert_eq!(hangar.legacy(&session, "logging/setLevel", json!({"level": "debug"})).status, 200);
    let addr = hangar.base.trim_start_matches("http://").to_owned();
    let head =
        format!("GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\n");
    let mut stream = open_stream(&addr, &head);
    let mut seen = String::new();
    let limit = Duration::from_secs(10);
    read_until(&mut stream, &mut seen, "200 OK", limit);

    // The upstream's tools change (it says so itself), and the hangar takes the new list.
    std::fs::write(hangar.path("alt"), "").unwrap();
    poll("the new tool list", Duration::from_secs(10), || {
        hangar.details("math")["tools"]
            .as_array()
            .is_some_and(|tools| tools.iter().any(|t| t["name"] == "echo"))
            .then_some(())
    });
    // Then a log line of the upstream's own, outside any request: it reaches the session. (The
    // call that makes the upstream send it is another client's, which asked for no log lines, so
    // the line belongs to no call.)
    let log = json!({"method": "notifications/message", "params": {"level": "error", "logger": "math", "data": "marker-after-the-change"}});
    let calls = json!({"calls": [{"mcp_server": "math", "tool": "rpc_error", "arguments": {"then_notify": log}}]});
    assert_eq!(hangar.mcp("tools/call", json!({"name": "hangar_call", "arguments": calls})).status, 200);
    read_until(&mut stream, &mut seen, "marker-after-the-change", limit);
    assert!(!seen.contains("list_changed"), "an egress client was told its tool list changed: {seen}");
}
