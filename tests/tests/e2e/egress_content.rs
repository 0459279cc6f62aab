//! What a real client gets back through `hangar_call` and the front door (issue 15, section 4):
//! the upstream's own content blocks (an image stays an image, carried once: the report refers
//! to it by its place) besides the report, its progress
//! while the call runs, `hangar_tools` of a server that has not run saying so, and an upstream's
//! JSON-RPC error: its own words (cleaned and bounded) through the front door, never through
//! `hangar_call` or onto the hangar's own surfaces.
//!
//! The client is the Python `mcp` package's (`tests/fixtures/py_egress_client.py`), in both eras.
//! Needs `scripts/setup-tools` and `scripts/setup-clients` (the venv).

use hangar_tests::serde_json::{self, Value, json};
use hangar_tests::{Hangar, python_json};
use nix::sys::signal::Signal;

const BEHIND_THE_FRONT_DOOR: &str = r#"
tool_access: {mode: front_door}
mcp_servers:
  conf:
    command: ["{fake}", "--conformance"]
  math:
    command: ["{fake}", "--tools", "add,rpc_error"]
"#;

/// The fake's 1x1 PNG (`hangar-upstream-fake/src/conformance/content.rs`), as its prefix.
const PNG_PREFIX: &str = "iVBORw0KGgo";

fn client_calls(hangar: &Hangar, mode: &str) -> Value {
    let url = format!("{}/mcp", hangar.base);
    python_json(hangar, "py_egress_client.py", &[url.as_str(), mode, "calls"])
}

fn types(blocks: &Value) -> Vec<&str> {
    blocks.as_array().unwrap().iter().map(|b| b["type"].as_str().unwrap()).collect()
}

fn assert_the_client_saw_everything(seen: &Value, mode: &str) {
    // The report first (its JSON as text), then the upstream's own blocks: a real image.
    let image = &seen["image"];
    assert_eq!(types(&image["blocks"]), ["text", "image"], "{mode}: {seen}");
    let report: Value = serde_json::from_str(image["blocks"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(report, image["structured"], "{mode}: the report stays the first block");
    let block = &image["blocks"][1];
    assert_eq!(block["mime_type"], "image/png", "{mode}: {seen}");
    assert!(block["data"].as_str().unwrap().starts_with(PNG_PREFIX), "{mode}: {seen}");
    // The report refers to the image by its place: its data is carried once.
    let reference = &image["structured"]["results"][0]["result"]["content"][0];
    assert_eq!(*reference, json!({"type": "image", "mimeType": "image/png", "content_index": 1}), "{mode}: {seen}");
    assert_eq!(image.to_string().matches(PNG_PREFIX).count(), 1, "{mode}: the image's data once: {seen}");
    assert_eq!(types(&seen["mixed"]["blocks"]), ["text", "text", "image", "resource"], "{mode}: {seen}");

    // The upstream's progress reached the client's own callback, in order, then the result.
    let progress = &seen["progress"];
    let values: Vec<f64> =
        progress["notifications"].as_array().unwrap().iter().map(|n| n["progress"].as_f64().unwrap()).collect();
    assert_eq!(values, [0.0, 50.0, 100.0], "{mode}: {seen}");
    assert_eq!(progress["structured"]["succeeded"], 1, "{mode}: {seen}");

    // The front door passes the upstream's own message: cleaned, bounded, without its data.
    let error = &seen["front_door_error"];
    assert_eq!(error["code"], -32603, "{mode}: {seen}");
    let message = error["message"].as_str().unwrap();
    assert!(message.starts_with("disk [31mfull on  /srvxxx"), "{mode}: {message:.80}");
    assert!(!message.chars().any(|c| c.is_control() || c == '\u{202e}'), "{mode}: {message:?}");
    assert!(message.len() < 1100 && message.ends_with("bytes)"), "{mode}: {} bytes", message.len());
    assert_eq!(error["data"], Value::Null, "{mode}: data is dropped unless configured: {seen}");

    // `hangar_call` speaks in the hangar's words only.
    let batch = &seen["hangar_call_error"];
    let call = &batch["structured"]["results"][0];
    assert_eq!(
        (call["success"].clone(), call["error_type"].clone()),
        (json!(false), json!("upstream_error")),
        "{mode}"
    );
    assert!(call["error"].as_str().unwrap().contains("JSON-RPC error -32603"), "{mode}: {call}");
    let text = batch.to_string();
    assert!(!text.contains("disk") && !text.contains("xxxxxxxx"), "{mode}: upstream text in hangar_call: {text:.300}");
}

/// One client, in one mode, through everything; `version` is the wire it must land on.
fn a_python_client_sees_everything(mode: &str, version: &str) {
    let hangar = Hangar::start(BEHIND_THE_FRONT_DOOR);
    let seen = client_calls(&hangar, mode);
    assert_eq!(seen["protocol_version"], version, "{seen}");
    assert_the_client_saw_everything(&seen, mode);
    // Nothing the upstream printed reaches the hangar's own surfaces; its log keeps it.
    for path in ["/api/audit", "/api/mcp_servers/math", "/api/mcp_servers"] {
        let body = hangar.get(path).text;
        assert!(!body.contains("[31mfull") && !body.contains("upstream-data"), "{path}: {body:.300}");
    }
    assert!(hangar.get("/api/mcp_servers/math/logs?lines=100").text.contains("disk"), "the upstream's log keeps it");
}

#[test]
fn a_modern_python_client_gets_content_blocks_progress_and_the_upstreams_error_words() {
    a_python_client_sees_everything("2026-07-28", "2026-07-28");
}

#[test]
fn a_legacy_python_client_gets_the_same() {
    a_python_client_sees_everything("legacy", "2025-11-25");
}

fn front_door_error(hangar: &Hangar) -> Value {
    let arguments = json!({"message": "no such branch\u{1b}[0m", "data": {"branch": "main"}});
    let answer = hangar.mcp("tools/call", json!({"name": "rpc_error", "arguments": arguments}));
    assert_eq!(answer.status, 200, "{}", answer.text);
    answer.body["error"].clone()
}

#[test]
fn operators_choose_the_strict_rule_or_the_upstreams_data() {
    let strict = Hangar::start(&format!("{}tool_access: {{mode: front_door, upstream_errors: hide}}\n", MATH_ONLY));
    let error = front_door_error(&strict);
    assert_eq!(error["code"], -32603, "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("JSON-RPC error -32603") && !message.contains("branch"), "{error}");
    assert!(error.get("data").is_none(), "{error}");

    let with_data =
        Hangar::start(&format!("{}tool_access: {{mode: front_door, upstream_error_data: true}}\n", MATH_ONLY));
    let error = front_door_error(&with_data);
    assert_eq!(
        (error["message"].clone(), error["data"].clone()),
        (json!("no such branch[0m"), json!({"branch": "main"}))
    );
}

const MATH_ONLY: &str = r#"
mcp_servers:
  math:
    command: ["{fake}", "--tools", "add,rpc_error"]
"#;

const IDLE: &str = r#"
mcp_servers:
  idle:
    command: ["{fake}", "--tools", "add,echo"]
"#;

fn cold_tools(hangar: &Hangar, mode: &str) -> Value {
    let url = format!("{}/mcp", hangar.base);
    let seen = python_json(hangar, "py_egress_client.py", &[url.as_str(), mode, "cold"]);
    assert_eq!(seen["is_error"], false, "{seen}");
    seen["structured"].clone()
}

#[test]
fn hangar_tools_of_a_server_that_has_not_run_says_so_or_answers_the_remembered_list() {
    let hangar = Hangar::start(IDLE);
    for mode in ["2026-07-28", "legacy"] {
        let tools = cold_tools(&hangar, mode);
        assert_eq!(
            (tools["state"].clone(), tools["tools_source"].clone()),
            (json!("cold"), json!("unknown")),
            "{tools}"
        );
        assert_eq!(tools["tools"], json!([]), "{tools}");
        assert!(tools["note"].as_str().unwrap().contains("unknown until it starts"), "{tools}");
    }
    let rest = hangar.get("/api/mcp_servers/idle/tools").body;
    assert_eq!(rest["tools_source"], "unknown", "REST answers alike: {rest}");

    hangar.tool_ok("hangar_start", json!({"mcp_server": "idle"}));
    let live = hangar.tool_ok("hangar_tools", json!({"mcp_server": "idle"}));
    assert_eq!((live["tools_source"].clone(), live.get("note")), (json!("live"), None), "{live}");

    // After a restart, with the journal warm: the last run's list, said to be that.
    let hangar = hangar.restart(Signal::SIGTERM, &[]);
    let tools = cold_tools(&hangar, "2026-07-28");
    assert_eq!(
        (tools["state"].clone(), tools["tools_source"].clone()),
        (json!("cold"), json!("remembered")),
        "{tools}"
    );
    let names: Vec<&str> = tools["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["add", "echo"], "{tools}");
    assert!(tools["note"].as_str().unwrap().contains("when it last ran"), "{tools}");
}
