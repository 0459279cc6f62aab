use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Value, json};

use super::*;

const SENTINEL: &str = "TEST-SENTINEL-42";

fn state(mode: Mode) -> State {
    State::new(mode, SENTINEL.into(), vec!["add".into(), "echo".into()])
}

fn req(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn answer(state: &State, msg: &Value) -> Value {
    handle(state, msg).unwrap_or(Value::Null)
}

/// A path under the temp dir no other test (or test run) uses.
fn unique_temp_path(tag: &str) -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("hangar-fake-{tag}-{}-{n}", std::process::id()))
}

#[test]
fn discover_modern_vs_legacy() {
    let msg = req(json!(1), "server/discover", json!({}));
    let modern = answer(&state(Mode::Modern), &msg);
    assert_eq!(modern["id"], json!(1));
    assert_eq!(modern["result"]["resultType"], "complete");
    assert_eq!(modern["result"]["supportedVersions"], json!(["2026-07-28", "2025-11-25"]));
    assert_eq!(modern["result"]["capabilities"]["tools"]["listChanged"], true);
    assert_eq!(modern["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "hangar-upstream-fake");

    let legacy = answer(&state(Mode::Legacy), &msg);
    assert_eq!(legacy["error"]["code"], -32601);
    assert_eq!(legacy["error"]["message"], "method not found");

    assert_eq!(handle(&state(Mode::LegacySilent), &msg), None);
}

#[test]
fn initialize_echoes_known_versions() {
    let init = |mode, version: &str| {
        let msg = req(json!("s-1"), "initialize", json!({"protocolVersion": version}));
        answer(&state(mode), &msg)
    };
    let r = init(Mode::Modern, "2025-06-18");
    assert_eq!(r["id"], "s-1");
    assert_eq!(r["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(r["result"]["serverInfo"]["version"], "0.1.0");
    assert_eq!(r["result"].get("resultType"), None);
    assert_eq!(init(Mode::Modern, "1999-01-01")["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(init(Mode::Legacy, "2025-11-25")["result"]["protocolVersion"], "2024-11-05");
}

#[test]
fn tools_list_keeps_command_line_order() {
    let mut s = state(Mode::Modern);
    s.tools = vec!["sleep".into(), "add".into(), "exfiltrate".into()];
    let r = answer(&s, &req(json!(2), "tools/list", json!({})));
    let names: Vec<&str> = r["result"]["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["sleep", "add", "exfiltrate"]);
    assert_eq!(r["result"]["tools"][2]["inputSchema"], json!({"type": "object"}));
    assert_eq!(r["result"]["resultType"], "complete");
    assert_eq!(r["result"]["ttlMs"], 0);

    s.mode = Mode::Legacy;
    let r = answer(&s, &req(json!(3), "tools/list", json!({})));
    assert_eq!(r["result"].get("resultType"), None);
    assert_eq!(r["result"].get("cacheScope"), None);
}

#[test]
fn add_returns_structured_sum() {
    let msg = req(json!(4), "tools/call", json!({"name": "add", "arguments": {"a": 2, "b": 3}}));
    let r = answer(&state(Mode::Modern), &msg);
    assert_eq!(r["result"]["content"], json!([{"type": "text", "text": "5"}]));
    assert_eq!(r["result"]["structuredContent"], json!({"result": 5}));
    assert_eq!(r["result"]["isError"], false);
    assert_eq!(r["result"]["resultType"], "complete");

    let r = answer(&state(Mode::Legacy), &msg);
    assert_eq!(r["result"].get("resultType"), None);
}

#[test]
fn unknown_tool_is_invalid_params() {
    let msg = req(json!(5), "tools/call", json!({"name": "nope", "arguments": {}}));
    let r = answer(&state(Mode::Modern), &msg);
    assert_eq!(r["error"]["code"], -32602);
    assert_eq!(r["error"]["message"], "unknown tool: nope");
}

#[test]
fn unknown_method_and_notifications() {
    let s = state(Mode::Modern);
    let r = answer(&s, &req(json!(6), "resources/list", json!({})));
    assert_eq!(r["error"]["code"], -32601);
    let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}});
    assert_eq!(handle(&s, &note), None);
    let r = answer(&s, &json!([1, 2]));
    assert_eq!(r["error"]["code"], -32600);
    assert_eq!(r["id"], Value::Null);
}

#[test]
fn fail_flag_errors_carry_the_sentinel() {
    let flag = unique_temp_path("fail");
    let mut s = state(Mode::Modern);
    s.fail_flag = Some(flag.clone());
    let msg = req(json!(7), "ping", json!({}));
    assert_eq!(answer(&s, &msg)["result"], json!({}));

    let created = std::fs::write(&flag, b"");
    let r = answer(&s, &msg);
    let _ = std::fs::remove_file(&flag);
    assert!(created.is_ok());
    assert_eq!(r["error"]["code"], -32603);
    assert!(r["error"]["message"].as_str().unwrap_or("").contains(SENTINEL));
    assert!(r["error"]["data"].to_string().contains(SENTINEL));

    assert_eq!(answer(&s, &msg)["result"], json!({}));
}

#[test]
fn alt_tools_follow_their_flag() {
    let flag = unique_temp_path("alt");
    let mut s = state(Mode::Modern);
    s.alt = Some(AltTools { tools: vec!["fail".into()], flag: flag.clone(), description: None });
    let call = req(json!(8), "tools/call", json!({"name": "fail"}));
    assert_eq!(answer(&s, &call)["error"]["code"], -32602);

    let created = std::fs::write(&flag, b"");
    let listed = answer(&s, &req(json!(9), "tools/list", json!({})));
    let called = answer(&s, &call);
    let _ = std::fs::remove_file(&flag);
    assert!(created.is_ok());
    assert_eq!(listed["result"]["tools"][0]["name"], "fail");
    assert_eq!(called["result"]["isError"], true);
}

#[test]
fn an_alt_description_replaces_the_alternate_tools_own_while_the_flag_exists() {
    let flag = unique_temp_path("alt-description");
    let mut s = state(Mode::Modern);
    s.alt = Some(AltTools { tools: vec!["add".into()], flag: flag.clone(), description: Some("poisoned".into()) });
    let list = req(json!(10), "tools/list", json!({}));
    let before = answer(&s, &list);
    let created = std::fs::write(&flag, b"");
    let after = answer(&s, &list);
    let _ = std::fs::remove_file(&flag);
    assert!(created.is_ok());
    assert_eq!(before["result"]["tools"][0]["description"], "Adds two numbers and returns their sum.");
    assert_eq!(after["result"]["tools"][0]["name"], "add");
    assert_eq!(after["result"]["tools"][0]["description"], "poisoned");
    assert_eq!(after["result"]["tools"][0]["inputSchema"], before["result"]["tools"][0]["inputSchema"]);
}
