//! Real clients and real upstreams: the Python `mcp` package's own client (2.3.x) talks to the
//! front door in each of its connection modes, and two real servers (the reference
//! `@modelcontextprotocol/server-everything` on Node, and a Python `mcp` stdio server) sit behind
//! the hangar, their tools, resources and prompts served through the front door.
//!
//! Needs `scripts/setup-tools` and `scripts/setup-clients` (the venv, Node and the npm server).

use hangar_tests::serde_json::{self, Value, json};
use hangar_tests::{Hangar, SENTINEL, node, python_json, server_everything};

// ---------------------------------------------------------------------------------------------
// The Python `mcp` client against the front door.

const FAKE_BEHIND_FRONT_DOOR: &str = r#"
tool_access: {mode: front_door}
mcp_servers:
  math:
    command: ["{fake}", "--tools", "add,echo"]
"#;

/// Runs `tests/fixtures/py_client.py URL MODE` (bounded) and parses the one JSON line it prints.
fn py_client(hangar: &Hangar, mode: &str) -> Value {
    let url = format!("{}/mcp", hangar.base);
    python_json(hangar, "py_client.py", &[url.as_str(), mode])
}

/// What every mode must see: the tools, `add` called directly, and `add` through `hangar_call`.
fn assert_client_saw_the_front_door(seen: &Value, mode: &str) {
    let tools: Vec<&str> = seen["tools"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for expected in ["hangar_list", "hangar_call", "add", "echo"] {
        assert!(tools.contains(&expected), "{mode}: {expected} is listed: {tools:?}");
    }

    let added = &seen["add"];
    assert_eq!(added["is_error"], false, "{mode}: {seen}");
    assert_eq!(added["structured"], json!({"result": 5}), "{mode}: {seen}");
    assert_eq!(added["text"], json!(["5"]), "{mode}: {seen}");

    let batch = &seen["hangar_call"];
    assert_eq!(batch["is_error"], false, "{mode}: {seen}");
    let structured = &batch["structured"];
    assert_eq!((structured["total"].as_u64(), structured["succeeded"].as_u64()), (Some(1), Some(1)), "{mode}: {seen}");
    let result = &structured["results"][0];
    assert_eq!(result["success"], true, "{mode}: {seen}");
    assert_eq!(result["result"]["structuredContent"], json!({"result": 5}), "{mode}: {seen}");
    // The text content carries the same JSON as structuredContent.
    let text = batch["text"][0].as_str().unwrap_or_else(|| panic!("{mode}: hangar_call has text: {seen}"));
    assert_eq!(&serde_json::from_str::<Value>(text).unwrap(), structured, "{mode}");
}

#[test]
fn the_python_client_in_modern_mode_lists_and_calls_through_the_front_door() {
    let hangar = Hangar::start(FAKE_BEHIND_FRONT_DOOR);
    let seen = py_client(&hangar, "2026-07-28");
    assert_eq!(seen["protocol_version"], "2026-07-28", "{seen}");
    assert_client_saw_the_front_door(&seen, "2026-07-28");
    hangar.assert_no_body_contains(SENTINEL);
}

#[test]
fn the_python_client_in_legacy_mode_lists_and_calls_through_the_front_door() {
    let hangar = Hangar::start(FAKE_BEHIND_FRONT_DOOR);
    let seen = py_client(&hangar, "legacy");
    assert_eq!(
        seen["protocol_version"], "2025-11-25",
        "the initialize handshake negotiates the newest legacy wire: {seen}"
    );
    assert_eq!(seen["server_info"]["name"], "hangar", "{seen}");
    assert_client_saw_the_front_door(&seen, "legacy");
}

#[test]
fn the_python_client_in_auto_mode_discovers_the_modern_wire() {
    let hangar = Hangar::start(FAKE_BEHIND_FRONT_DOOR);
    let seen = py_client(&hangar, "auto");
    assert_eq!(seen["protocol_version"], "2026-07-28", "server/discover is answered, so auto picks it: {seen}");
    assert_eq!(seen["server_info"]["name"], "hangar", "{seen}");
    assert_client_saw_the_front_door(&seen, "auto");
}

// ---------------------------------------------------------------------------------------------
// Real servers behind the front door.

/// `everything` (the reference server, a legacy-era Node server) and `py` (a modern Python `mcp`
/// stdio server) behind the front door.
fn real_servers() -> Hangar {
    Hangar::start(&format!(
        r#"
tool_access: {{mode: front_door}}
mcp_servers:
  everything:
    command: ["{node}", "{everything}", "stdio"]
    handshake_timeout_s: 30
  py:
    command: ["{{python}}", "{{fixtures}}/py_stdio_server.py"]
    handshake_timeout_s: 30
"#,
        node = node().display(),
        everything = server_everything().display(),
    ))
}

/// A modern request that must succeed: its `result`, checked for the 2026-07-28 shape.
fn ok(hangar: &Hangar, method: &str, params: Value) -> Value {
    let response = hangar.mcp(method, params.clone());
    assert_eq!(response.status, 200, "{method} {params}: {}", response.text);
    let result = response.body.get("result").cloned();
    let result = result
        .unwrap_or_else(|| panic!("{method} {params} answered no result: {}\nlog:\n{}", response.text, hangar.log()));
    assert_eq!(result["resultType"], "complete", "{method}: every modern result says its type: {result}");
    if method.ends_with("/list") || method == "resources/read" {
        assert!(result["ttlMs"].as_u64().is_some(), "{method} is cacheable and carries ttlMs: {result}");
        assert!(
            matches!(result["cacheScope"].as_str(), Some("public" | "private")),
            "{method} is cacheable and carries cacheScope: {result}"
        );
    }
    result
}

/// The values of `key` in the array `result[field]`.
fn names(result: &Value, field: &str, key: &str) -> Vec<String> {
    let items = result[field].as_array().unwrap_or_else(|| panic!("no {field} in {result}"));
    items.iter().filter_map(|item| item[key].as_str().map(str::to_owned)).collect()
}

fn first_text(contents: &Value) -> String {
    contents[0]["text"].as_str().unwrap_or_else(|| panic!("no text in {contents}")).to_owned()
}

#[test]
fn server_everything_is_served_through_the_front_door() {
    let hangar = real_servers();

    let tools = names(&ok(&hangar, "tools/list", json!({})), "tools", "name");
    for expected in ["hangar_call", "echo", "get-sum"] {
        assert!(tools.contains(&expected.to_owned()), "{expected} is listed: {tools:?}");
    }
    let echoed = ok(&hangar, "tools/call", json!({"name": "echo", "arguments": {"message": "hi hangar"}}));
    assert_eq!(echoed["content"], json!([{"type": "text", "text": "Echo: hi hangar"}]), "{echoed}");
    assert_ne!(echoed["isError"], true, "{echoed}");
    let summed = ok(&hangar, "tools/call", json!({"name": "get-sum", "arguments": {"a": 2, "b": 40}}));
    assert!(first_text(&summed["content"]).contains("42"), "{summed}");

    // A static resource and a templated one.
    let uri = "demo://resource/static/document/features.md";
    let resources = names(&ok(&hangar, "resources/list", json!({})), "resources", "uri");
    assert!(resources.contains(&uri.to_owned()), "{uri} is listed: {resources:?}");
    let read = ok(&hangar, "resources/read", json!({"uri": uri}));
    assert_eq!(read["contents"][0]["uri"], uri, "{read}");
    assert_eq!(read["contents"][0]["mimeType"], "text/markdown", "{read}");
    assert!(first_text(&read["contents"]).starts_with("# Everything Server - Features"), "{read}");
    let templates = names(&ok(&hangar, "resources/templates/list", json!({})), "resourceTemplates", "uriTemplate");
    assert!(templates.contains(&"demo://resource/dynamic/text/{resourceId}".to_owned()), "{templates:?}");
    let dynamic = ok(&hangar, "resources/read", json!({"uri": "demo://resource/dynamic/text/7"}));
    assert!(first_text(&dynamic["contents"]).starts_with("Resource 7: "), "{dynamic}");

    let missing = hangar.mcp("resources/read", json!({"uri": "demo://resource/nope"}));
    assert_eq!(missing.body["error"]["code"], -32602, "resource not found is -32602 at 2026-07-28: {}", missing.text);

    let prompts = names(&ok(&hangar, "prompts/list", json!({})), "prompts", "name");
    for expected in ["simple-prompt", "args-prompt"] {
        assert!(prompts.contains(&expected.to_owned()), "{expected} is listed: {prompts:?}");
    }
    let prompt =
        ok(&hangar, "prompts/get", json!({"name": "args-prompt", "arguments": {"city": "Oslo", "state": "Viken"}}));
    assert_eq!(prompt["messages"][0]["role"], "user", "{prompt}");
    assert_eq!(prompt["messages"][0]["content"], json!({"type": "text", "text": "What's weather in Oslo, Viken?"}));

    let details = hangar.details("everything");
    assert_eq!((details["state"].as_str(), details["meta"]["protocol_era"].as_str()), (Some("ready"), Some("legacy")));
}

#[test]
fn a_python_mcp_stdio_server_is_served_through_the_front_door() {
    let hangar = real_servers();

    // Listing the front door's tools starts every upstream.
    let tools = names(&ok(&hangar, "tools/list", json!({})), "tools", "name");
    assert_py_is_ready_and_modern(&hangar);
    for expected in ["hangar_call", "echo", "multiply"] {
        assert!(tools.contains(&expected.to_owned()), "{expected} is listed (one of each upstream): {tools:?}");
    }

    let product = ok(&hangar, "tools/call", json!({"name": "multiply", "arguments": {"a": 6, "b": 7}}));
    assert_eq!(product["structuredContent"], json!({"result": 42}), "{product}");
    assert_eq!(product["content"], json!([{"type": "text", "text": "42"}]), "{product}");
    assert_eq!(hangar.call("py", "multiply", json!({"a": 3, "b": 5})), Some(json!({"result": 15})));

    let resources = names(&ok(&hangar, "resources/list", json!({})), "resources", "uri");
    assert!(resources.contains(&"fixture://greeting".to_owned()), "{resources:?}");
    assert!(
        resources.contains(&"demo://resource/static/document/features.md".to_owned()),
        "both upstreams' resources are listed: {resources:?}"
    );
    let read = ok(&hangar, "resources/read", json!({"uri": "fixture://greeting"}));
    assert_eq!(
        read["contents"],
        json!([{"uri": "fixture://greeting", "mimeType": "text/plain", "text": "hello from the py fixture"}]),
        "{read}"
    );

    let prompts = names(&ok(&hangar, "prompts/list", json!({})), "prompts", "name");
    assert!(prompts.contains(&"haiku".to_owned()) && prompts.contains(&"simple-prompt".to_owned()), "{prompts:?}");
    let prompt = ok(&hangar, "prompts/get", json!({"name": "haiku", "arguments": {"topic": "hangars"}}));
    assert_eq!(
        prompt["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": "Write a haiku about hangars."}}]),
        "{prompt}"
    );
}

/// `py` reads `ready`, spoken to in the modern era; on failure, says what its log says.
fn assert_py_is_ready_and_modern(hangar: &Hangar) {
    let details = hangar.details("py");
    let logs = hangar.get("/api/mcp_servers/py/logs?lines=20").text;
    assert_eq!(details["state"], "ready", "{details}\npy's log: {logs}");
    assert_eq!(details["meta"]["protocol_era"], "modern", "{details}");
}

#[test]
fn a_slow_starting_modern_stdio_server_is_detected_as_modern() {
    // The same Python server, waiting 3 s before it serves (as a heavy import would).
    let hangar = Hangar::start(
        r#"
tool_access: {mode: front_door}
mcp_servers:
  py:
    command: ["{python}", "{fixtures}/py_stdio_server.py", "--slow-start", "3"]
    handshake_timeout_s: 30
"#,
    );
    let started = hangar.tool("hangar_start", json!({"mcp_server": "py"}));
    assert_eq!(started["isError"], false, "{started}\nlog:\n{}", hangar.log());
    assert_eq!(started["structuredContent"]["tools"], json!(["multiply"]), "{started}");
    assert_py_is_ready_and_modern(&hangar);
    let product = ok(&hangar, "tools/call", json!({"name": "multiply", "arguments": {"a": 6, "b": 7}}));
    assert_eq!(product["structuredContent"], json!({"result": 42}), "{product}");
}
