//! Stable front-door names: with `tool_access.names: always_qualified` a name a client uses
//! stays the same when a server declaring the same tool is added; `expose_as` gives a server's
//! qualified names a prefix of its choosing; and under the default `bare_when_unique` a bare name
//! that a new server made ambiguous is refused with the qualified names that now exist. Prompts
//! and resources follow the same rule.

use std::ffi::OsStr;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, MODERN, supervisor_exit};

fn upstream_names(hangar: &Hangar, method: &str, key: &str, field: &str) -> Vec<String> {
    let listed = hangar.mcp(method, json!({}));
    assert_eq!(listed.status, 200, "{}", listed.text);
    let items = listed.body["result"][key].as_array().unwrap_or_else(|| panic!("{method}: {}", listed.text));
    items.iter().filter_map(|t| t[field].as_str()).filter(|n| !n.starts_with("hangar_")).map(str::to_owned).collect()
}

fn tool_names(hangar: &Hangar) -> Vec<String> {
    upstream_names(hangar, "tools/list", "tools", "name")
}

/// Tool calls the hangar sent to `server`, from `/metrics`.
fn calls_to(hangar: &Hangar, server: &str) -> f64 {
    hangar.metric(&format!("hangar_tool_calls_total{{mcp_server=\"{server}\"}}")).unwrap_or(0.0)
}

/// Calls `name` on the front door and asserts it reached `server`, answered without error.
fn routes_to(hangar: &Hangar, name: &str, server: &str) {
    let before = calls_to(hangar, server);
    let called = hangar.mcp("tools/call", json!({"name": name, "arguments": {"from": name}}));
    assert!(called.body["error"].is_null(), "{name}: {}", called.text);
    assert_eq!(called.body["result"]["structuredContent"], json!({"from": name}), "{}", called.text);
    assert_eq!(calls_to(hangar, server), before + 1.0, "`{name}` went to {server}");
}

/// Calls `method` with `params` and asserts the hangar refused it (-32602) with `message`.
fn refused(hangar: &Hangar, method: &str, params: Value, message: &str) {
    let answered = hangar.mcp(method, params);
    assert_eq!(answered.status, 200, "{}", answered.text);
    assert_eq!(answered.body["error"]["code"], -32602, "{}", answered.text);
    assert_eq!(answered.body["error"]["message"], message, "{}", answered.text);
}

fn tool_refused(hangar: &Hangar, name: &str, message: &str) {
    refused(hangar, "tools/call", json!({"name": name, "arguments": {}}), message);
}

/// Rewrites the config file with `yaml` (placeholders as `Hangar::start` fills them) and reloads.
fn reload(hangar: &Hangar, yaml: &str) {
    let yaml = yaml
        .replace("{fake}", &hangar_tests::bin("hangar-upstream-fake").display().to_string())
        .replace("{dir}", &hangar.dir.path().display().to_string());
    std::fs::write(hangar.path("hangar.yaml"), yaml).unwrap();
    let reloaded = hangar.post("/api/config/reload", None);
    assert_eq!(reloaded.status, 200, "{}", reloaded.text);
}

/// `time` serves `echo` and `add`; `{names}` sets (or leaves out) `tool_access.names`, and
/// `{second}` is the server beside `time`.
const CONFIG: &str = r#"
tool_access: {mode: front_door{names}}
mcp_servers:
  time:
    command: ["{fake}", "--tools", "echo,add"]
{second}"#;

/// Serves the same `echo` as `time`, under a prefix of its own.
const CLOCK: &str = r#"  clock:
    command: ["{fake}", "--tools", "echo"]
    expose_as: tick
"#;

fn config(names: Option<&str>, second: &str) -> String {
    let names = names.map(|n| format!(", names: {n}")).unwrap_or_default();
    CONFIG.replace("{names}", &names).replace("{second}", second)
}

#[test]
fn always_qualified_names_stay_the_same_when_a_colliding_server_is_added() {
    let hangar = Hangar::start(&config(Some("always_qualified"), ""));
    assert_eq!(tool_names(&hangar), ["time__echo", "time__add"], "even a unique name is qualified");
    routes_to(&hangar, "time__echo", "time");
    tool_refused(&hangar, "echo", "Unknown tool: echo; it is exposed as time__echo");

    reload(&hangar, &config(Some("always_qualified"), CLOCK));
    assert_eq!(tool_names(&hangar), ["time__echo", "time__add", "tick__echo"]);
    routes_to(&hangar, "time__echo", "time");
    routes_to(&hangar, "tick__echo", "clock");
    // `expose_as` replaces the id: `clock__echo` is no name of anything.
    tool_refused(&hangar, "clock__echo", "Unknown tool: clock__echo");
}

#[test]
fn a_bare_name_made_ambiguous_is_refused_with_the_qualified_names_that_now_exist() {
    let hangar = Hangar::start(&config(None, ""));
    assert_eq!(tool_names(&hangar), ["echo", "add"]);
    routes_to(&hangar, "echo", "time");

    reload(&hangar, &config(Some("bare_when_unique"), CLOCK));
    tool_refused(&hangar, "echo", "Unknown tool: echo; it is now ambiguous: time__echo, tick__echo");
    assert_eq!(tool_names(&hangar), ["time__echo", "add", "tick__echo"]);
    routes_to(&hangar, "time__echo", "time");
    routes_to(&hangar, "tick__echo", "clock");
    // An event-stream call (it asks for progress) is refused the same way, before it streams.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "echo", "arguments": {},
        "_meta": {"progressToken": 1, "io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}},
    }});
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "echo"),
    ];
    let streamed = hangar.post_raw("/mcp", &headers, body.to_string().as_bytes());
    assert_eq!(streamed.body["error"]["code"], -32602, "{}", streamed.text);
    assert_eq!(
        streamed.body["error"]["message"], "Unknown tool: echo; it is now ambiguous: time__echo, tick__echo",
        "{}",
        streamed.text
    );
}

/// Two servers serving the conformance fixtures: every prompt and resource collides.
const PROMPTS: &str = r#"
tool_access: {mode: front_door}
mcp_servers:
  first:
    command: ["{fake}", "--conformance"]
  second:
    command: ["{fake}", "--conformance"]
    expose_as: other
"#;

#[test]
fn prompts_follow_the_same_rule() {
    let hangar = Hangar::start(PROMPTS);
    let prompts = upstream_names(&hangar, "prompts/list", "prompts", "name");
    assert!(prompts.contains(&"first__test_simple_prompt".to_owned()), "{prompts:?}");
    assert!(prompts.contains(&"other__test_simple_prompt".to_owned()), "{prompts:?}");
    assert!(!prompts.iter().any(|p| p == "test_simple_prompt"), "{prompts:?}");
    refused(
        &hangar,
        "prompts/get",
        json!({"name": "test_simple_prompt"}),
        "Unknown prompt: test_simple_prompt; it is now ambiguous: first__test_simple_prompt, other__test_simple_prompt",
    );
    let got = hangar.mcp("prompts/get", json!({"name": "other__test_simple_prompt"}));
    assert_eq!(
        got.body["result"]["messages"][0]["content"]["text"], "This is a simple prompt for testing.",
        "{}",
        got.text
    );
    refused(
        &hangar,
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "test_simple_prompt"}, "argument": {"name": "arg1", "value": ""}}),
        "Unknown prompt: test_simple_prompt; it is now ambiguous: first__test_simple_prompt, other__test_simple_prompt",
    );
}

pub(crate) const ONE_CONFORMANCE: &str = r#"
tool_access: {mode: front_door, names: always_qualified}
mcp_servers:
  fixtures:
    command: ["{fake}", "--conformance"]
    expose_as: conf
"#;

#[test]
fn always_qualified_names_prompts_and_resources_too() {
    let hangar = Hangar::start(ONE_CONFORMANCE);
    assert!(tool_names(&hangar).contains(&"conf__test_simple_text".to_owned()));
    let prompts = upstream_names(&hangar, "prompts/list", "prompts", "name");
    assert!(prompts.contains(&"conf__test_simple_prompt".to_owned()), "{prompts:?}");
    refused(
        &hangar,
        "prompts/get",
        json!({"name": "test_simple_prompt"}),
        "Unknown prompt: test_simple_prompt; it is exposed as conf__test_simple_prompt",
    );
    let got = hangar.mcp("prompts/get", json!({"name": "conf__test_simple_prompt"}));
    assert!(got.body["result"]["messages"].is_array(), "{}", got.text);

    let resources = upstream_names(&hangar, "resources/list", "resources", "uri");
    assert!(resources.contains(&"conf__test://static-text".to_owned()), "{resources:?}");
    let templates = upstream_names(&hangar, "resources/templates/list", "resourceTemplates", "uriTemplate");
    assert_eq!(templates, ["conf__test://template/{id}/data"]);
    let read = hangar.mcp("resources/read", json!({"uri": "conf__test://static-text"}));
    // The contents are named as the client asked for them, in its names.
    assert_eq!(read.body["result"]["contents"][0]["uri"], "conf__test://static-text", "{}", read.text);
    // The listed template, filled in, reads; the bare URI is no name of anything.
    let read = hangar.mcp("resources/read", json!({"uri": "conf__test://template/7/data"}));
    assert!(read.body["result"]["contents"].is_array(), "{}", read.text);
    let bare = hangar.mcp("resources/read", json!({"uri": "test://template/7/data"}));
    assert_eq!(bare.body["error"]["code"], -32602, "{}", bare.text);
}

#[test]
fn a_prefix_two_servers_would_share_exits_78_naming_the_key() {
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("hangar.yaml");
    let socket = temp.path().join("s.sock");
    for (yaml, says) in [
        (
            "mcp_servers:\n  a: {command: [x], expose_as: c}\n  b: {command: [x], expose_as: c}\n",
            "mcp_servers.b.expose_as: `c` is already the front-door prefix of server `a`",
        ),
        (
            "mcp_servers:\n  a: {command: [x], expose_as: b}\n  b: {command: [x]}\n",
            "mcp_servers.a.expose_as: `b` is already the front-door prefix of server `b` (its id)",
        ),
        ("mcp_servers:\n  a: {command: [x], expose_as: \"c d\"}\n", "mcp_servers.a.expose_as: a front-door prefix"),
        ("tool_access: {names: sometimes}\n", "tool_access.names"),
    ] {
        std::fs::write(&config, yaml).unwrap();
        let (code, stderr) = supervisor_exit(
            &[OsStr::new("--config"), config.as_os_str(), OsStr::new("--socket"), socket.as_os_str()],
            &[],
        );
        assert_eq!(code, Some(78), "{yaml}: {stderr}");
        assert!(stderr.contains(says), "{yaml}: {stderr}");
    }
}
