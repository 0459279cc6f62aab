//! The front door: an ordinary MCP client sees the upstreams' own tools beside the hangar's,
//! collisions are qualified (never dropped), and results pass through untouched, bridged
//! between eras.

use hangar_tests::Hangar;
use hangar_tests::serde_json::{Value, json};

const CONFIG: &str = r#"
tool_access: {mode: front_door}
mcp_servers:
  math:
    command: ["{fake}", "--tools", "add,echo"]
  words:
    command: ["{fake}", "--legacy", "--tools", "echo,fail"]
"#;

fn tool_names(hangar: &Hangar) -> Vec<String> {
    let listed = hangar.mcp("tools/list", json!({}));
    assert_eq!(listed.status, 200, "{}", listed.text);
    listed.body["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn upstream_tools_are_served_directly_and_collisions_are_qualified() {
    let hangar = Hangar::start(CONFIG);
    let names = tool_names(&hangar);
    assert!(names.starts_with(&["hangar_list".to_owned()]), "the hangar's tools first: {names:?}");
    let upstream: Vec<&str> = names.iter().filter(|n| !n.starts_with("hangar_")).map(String::as_str).collect();
    assert_eq!(upstream, ["add", "math__echo", "words__echo", "fail"]);

    let listed = hangar.mcp("tools/list", json!({}));
    let add = listed.body["result"]["tools"].as_array().unwrap().iter().find(|t| t["name"] == "add").unwrap().clone();
    assert_eq!(add["inputSchema"]["required"], json!(["a", "b"]), "declarations pass through: {add}");
    assert_eq!(listed.body["result"]["resultType"], "complete");

    let added = hangar.mcp("tools/call", json!({"name": "add", "arguments": {"a": 2, "b": 3}}));
    assert_eq!(added.body["result"]["structuredContent"], json!({"result": 5}), "{}", added.text);
    assert_eq!(added.body["result"]["content"], json!([{"type": "text", "text": "5"}]));

    // A legacy upstream's answer is bridged to the modern shape.
    let echoed = hangar.mcp("tools/call", json!({"name": "words__echo", "arguments": {"x": 1}}));
    assert_eq!(echoed.body["result"]["structuredContent"], json!({"x": 1}), "{}", echoed.text);
    assert_eq!(echoed.body["result"]["resultType"], "complete");
    // isError passes through as the upstream said it.
    let failed = hangar.mcp("tools/call", json!({"name": "fail", "arguments": {}}));
    assert_eq!(failed.body["result"]["isError"], true, "{}", failed.text);

    // The qualified form always works; an ambiguous plain name is unknown, not guessed.
    let qualified = hangar.mcp("tools/call", json!({"name": "math__add", "arguments": {"a": 1, "b": 1}}));
    assert_eq!(qualified.body["result"]["structuredContent"], json!({"result": 2}));
    let ambiguous = hangar.mcp("tools/call", json!({"name": "echo", "arguments": {}}));
    assert_eq!((ambiguous.status, ambiguous.body["error"]["code"].as_i64()), (200, Some(-32602)), "{}", ambiguous.text);
    // An upstream's own JSON-RPC error keeps its code (and its words, cleaned: egress_content.rs).
    let bad = hangar.mcp("tools/call", json!({"name": "math__nope", "arguments": {}}));
    assert_eq!(bad.body["error"]["code"], -32602, "{}", bad.text);
}

#[test]
fn a_cold_server_is_started_by_the_first_call_to_one_of_its_tools() {
    let hangar = Hangar::start(CONFIG);
    tool_names(&hangar);
    assert_eq!(hangar.post("/api/mcp_servers/math/stop", None).status, 200);
    assert_eq!(hangar.details("math")["state"], "cold");
    assert!(tool_names(&hangar).contains(&"add".to_owned()), "a cold server's tools stay listed");
    let added = hangar.mcp("tools/call", json!({"name": "add", "arguments": {"a": 4, "b": 4}}));
    assert_eq!(added.body["result"]["structuredContent"], json!({"result": 8}), "{}", added.text);
    assert_eq!(hangar.details("math")["state"], "ready");
}

#[test]
fn a_legacy_client_gets_legacy_shaped_results() {
    let hangar = Hangar::start(CONFIG);
    let headers = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
    let init = hangar.post_raw(
        "/mcp",
        &headers,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).to_string().as_bytes(),
    );
    assert_eq!(init.body["result"]["protocolVersion"], "2025-06-18");
    assert!(
        init.body["result"]["capabilities"]["prompts"].is_object(),
        "the front door declares prompts and resources"
    );
    let session = init.header("mcp-session-id").unwrap().to_owned();
    let with_session =
        [headers[0], headers[1], ("Mcp-Session-Id", session.as_str()), ("MCP-Protocol-Version", "2025-06-18")];
    let call = |body: Value| hangar.post_raw("/mcp", &with_session, body.to_string().as_bytes());
    let listed = call(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    assert!(listed.body["result"]["tools"].as_array().unwrap().iter().any(|t| t["name"] == "add"));
    let added = call(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}),
    );
    let result = &added.body["result"];
    assert_eq!(result["structuredContent"], json!({"result": 3}), "{}", added.text);
    assert!(
        result.get("resultType").is_none(),
        "a modern upstream's result loses 2026-07-28 fields for a legacy client: {result}"
    );
}

#[test]
fn egress_mode_serves_only_the_hangar_tools() {
    let hangar = Hangar::start("mcp_servers:\n  math:\n    command: [\"{fake}\", \"--tools\", \"add\"]\n");
    assert!(tool_names(&hangar).iter().all(|n| n.starts_with("hangar_")));
    let refused = hangar.mcp("tools/call", json!({"name": "add", "arguments": {"a": 1, "b": 1}}));
    assert_eq!(refused.body["error"]["code"], -32602);
    assert_eq!(hangar.details("math")["state"], "cold", "egress mode starts nothing to list tools");
    // No upstream's prompts: egress declares prompts and has none.
    let prompts = hangar.mcp("prompts/list", json!({}));
    assert_eq!(prompts.body["result"]["prompts"], json!([]), "{}", prompts.text);
}
