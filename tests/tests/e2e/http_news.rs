//! A 2026-07-28 HTTP upstream has no channel for what belongs to no request but a held
//! `subscriptions/listen`: the hangar holds one for each such running upstream, so a tools change
//! the upstream announces outside any of the hangar's requests reaches the front door.

use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, free_port, poll, raw_http};

const DYNAMIC: &str = "test_dynamic_tool";

/// Calls the fake's `test_trigger_tool_change` directly (not through the hangar): the tool is
/// added or removed; answers which.
fn toggle_at_the_upstream(addr: &str) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "test_trigger_tool_change", "arguments": {},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}},
    }});
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: test_trigger_tool_change\r\n"
    );
    let (status, text) = raw_http(addr, &head, body.to_string().as_bytes()).expect("the fake answers");
    assert_eq!(status, 200, "{text}");
    if text.contains(&format!("{DYNAMIC} added")) { "added" } else { "removed" }.to_owned()
}

fn front_door_lists_it(hangar: &Hangar) -> bool {
    let listed = hangar.mcp("tools/list", json!({}));
    let tools = listed.body["result"]["tools"].as_array().cloned().unwrap_or_default();
    tools.iter().any(|t| t["name"].as_str().is_some_and(|n| n.ends_with(DYNAMIC)))
}

#[test]
fn a_modern_http_upstreams_tools_change_outside_any_request_reaches_the_front_door() {
    let port = free_port();
    let hangar = Hangar::start(&format!(
        r#"
tool_access: {{mode: front_door}}
mcp_servers:
  fixtures:
    mode: http
    command: ["{{fake}}", "--conformance", "--http", "127.0.0.1:{port}"]
    endpoint: http://127.0.0.1:{port}/mcp
"#
    ));
    assert!(!front_door_lists_it(&hangar), "not before it is added (the first list starts the upstream)");
    let upstream = format!("127.0.0.1:{port}");
    // Each add is announced on the upstream's listens; once the hangar's is held, one is heard.
    // An add the hangar missed (its listen not yet held) is followed by a remove and an add.
    let mut looks_since_add = None;
    poll("the front door to list the tool the upstream added on its own", Duration::from_secs(30), || {
        match looks_since_add {
            Some(looks) if looks < 20 => looks_since_add = Some(looks + 1),
            _ => looks_since_add = (toggle_at_the_upstream(&upstream) == "added").then_some(0),
        }
        (looks_since_add.is_some() && front_door_lists_it(&hangar)).then_some(())
    });
    let details: Value = hangar.details("fixtures");
    assert_eq!(details["meta"]["protocol_era"], "modern", "{details}");
}
