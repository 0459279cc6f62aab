//! The front door routes on the names as they are now: once a tool-list change has been
//! announced (`notifications/tools/list_changed`) or a reload has answered, the old name is
//! refused, the new one routes, and a name that became ambiguous is qualified on both sides,
//! each leading to its own server (the bare name is refused with the qualified ones).

use std::io::Read;
use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, poll};

/// `math` switches from `add` to `sleep,echo` when the flag file appears; `{second}` is the
/// server beside it.
const CONFIG: &str = r#"
tool_access: {mode: front_door}
mcp_servers:
  math:
    command: ["{fake}", "--tools", "add", "--alt-tools", "sleep,echo", "--alt-tools-flag", "{dir}/shift"]
{second}"#;

/// Serves `echo` throughout, so `math`'s switch makes `echo` collide.
const WORDS: &str = r#"  words: {command: ["{fake}", "--tools", "echo"]}"#;
/// Replaces `words` in the reload: never started, it serves `add`.
const FRESH: &str = r#"  fresh: {command: ["{fake}", "--tools", "add"]}"#;

fn config(second: &str) -> String {
    CONFIG.replace("{second}", second)
}

fn upstream_tool_names(hangar: &Hangar) -> Vec<String> {
    let listed = hangar.mcp("tools/list", json!({}));
    assert_eq!(listed.status, 200, "{}", listed.text);
    let tools = listed.body["result"]["tools"].as_array().unwrap();
    tools.iter().filter_map(|t| t["name"].as_str()).filter(|n| !n.starts_with("hangar_")).map(str::to_owned).collect()
}

/// Tool calls the hangar sent to `server`, from `/metrics`.
fn calls_to(hangar: &Hangar, server: &str) -> f64 {
    hangar.metric(&format!("hangar_tool_calls_total{{mcp_server=\"{server}\"}}")).unwrap_or(0.0)
}

/// Calls `name` on the front door and asserts it reached `server`, answered without error.
fn routes_to(hangar: &Hangar, name: &str, arguments: Value, server: &str) -> Value {
    let before = calls_to(hangar, server);
    let called = hangar.mcp("tools/call", json!({"name": name, "arguments": arguments}));
    assert!(called.body["error"].is_null(), "{name}: {}", called.text);
    assert_ne!(called.body["result"]["isError"], true, "{name}: {}", called.text);
    assert_eq!(calls_to(hangar, server), before + 1.0, "`{name}` went to {server}");
    called.body["result"].clone()
}

/// Calls `name` and asserts the hangar itself refused it as unknown, as it refuses any name
/// that leads nowhere.
fn refused(hangar: &Hangar, name: &str) {
    refused_with(hangar, name, &format!("Unknown tool: {name}"));
}

/// Calls `name` and asserts the hangar refused it as unknown with `message`.
fn refused_with(hangar: &Hangar, name: &str, message: &str) {
    let called = hangar.mcp("tools/call", json!({"name": name, "arguments": {}}));
    assert_eq!(called.status, 200, "{}", called.text);
    assert_eq!(called.body["error"]["code"], -32602, "{name}: {}", called.text);
    assert_eq!(called.body["error"]["message"], message, "{}", called.text);
}

/// A 2026-07-28 `subscriptions/listen` asking for tool-list changes, read up to its
/// acknowledgement. The stream is given 10 s in all.
fn listen_for_tool_changes(hangar: &Hangar) -> impl Read {
    let mut stream = hangar.listen_for_tool_changes(None, Duration::from_secs(10));
    read_until(&mut stream, "notifications/subscriptions/acknowledged");
    stream
}

/// Reads the event stream until `needle` arrives.
fn read_until(stream: &mut impl Read, needle: &str) {
    let mut seen = Vec::new();
    let mut chunk = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains(needle) {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => panic!("no `{needle}` on the event stream: {:?}", String::from_utf8_lossy(&seen)),
            Ok(n) => seen.extend_from_slice(&chunk[..n]),
        }
    }
}

#[test]
fn no_call_routes_on_a_name_whose_change_was_announced() {
    let hangar = Hangar::start(&config(WORDS));
    assert_eq!(upstream_tool_names(&hangar), ["add", "echo"]);
    routes_to(&hangar, "add", json!({"a": 1, "b": 2}), "math");
    routes_to(&hangar, "echo", json!({"x": 1}), "words");

    let mut changes = listen_for_tool_changes(&hangar);
    std::fs::write(hangar.path("shift"), "").unwrap();
    read_until(&mut changes, "notifications/tools/list_changed");

    // Right after the announcement, with no wait: the names are already the new ones.
    refused(&hangar, "add");
    routes_to(&hangar, "sleep", json!({"ms": 0}), "math");
    refused_with(&hangar, "echo", "Unknown tool: echo; it is now ambiguous: math__echo, words__echo");
    let echoed = routes_to(&hangar, "math__echo", json!({"from": "math"}), "math");
    assert_eq!(echoed["structuredContent"], json!({"from": "math"}));
    routes_to(&hangar, "words__echo", json!({"from": "words"}), "words");
    assert_eq!(upstream_tool_names(&hangar), ["sleep", "math__echo", "words__echo"]);
}

#[test]
fn a_reload_changes_the_names_before_it_answers() {
    let hangar = Hangar::start(&config(WORDS));
    routes_to(&hangar, "add", json!({"a": 1, "b": 2}), "math");
    let mut changes = listen_for_tool_changes(&hangar);
    std::fs::write(hangar.path("shift"), "").unwrap();
    read_until(&mut changes, "notifications/tools/list_changed");
    routes_to(&hangar, "words__echo", json!({}), "words");

    let yaml = config(FRESH)
        .replace("{fake}", &hangar_tests::bin("hangar-upstream-fake").display().to_string())
        .replace("{dir}", &hangar.dir.path().display().to_string());
    std::fs::write(hangar.path("hangar.yaml"), yaml).unwrap();
    let reloaded = hangar.post("/api/config/reload", None);
    assert_eq!(reloaded.status, 200, "{}", reloaded.text);

    // `fresh` was never started, and nobody remembers its tools: the reload starts it to learn
    // them; a call meanwhile waits for that start, so its tool routes at once.
    // `words` is gone: its names with it, and `echo` is no longer ambiguous.
    refused(&hangar, "words__echo");
    routes_to(&hangar, "echo", json!({}), "math");
    let added = routes_to(&hangar, "add", json!({"a": 2, "b": 3}), "fresh");
    assert_eq!(added["structuredContent"], json!({"result": 5}));
    assert_eq!(upstream_tool_names(&hangar), ["sleep", "echo", "add"]);
}

/// A reload that adds or removes a server is announced to listening clients at once, without
/// waiting for anyone to list or call; an added server's tools are learned by the reload itself.
#[test]
fn a_reload_announces_servers_that_came_and_went_and_learns_the_new_ones_tools() {
    let hangar = Hangar::start(&config(WORDS));
    assert_eq!(upstream_tool_names(&hangar), ["add", "echo"]);
    let with = |second: &str| {
        config(second)
            .replace("{fake}", &hangar_tests::bin("hangar-upstream-fake").display().to_string())
            .replace("{dir}", &hangar.dir.path().display().to_string())
    };
    let mut changes = listen_for_tool_changes(&hangar);
    std::fs::write(hangar.path("hangar.yaml"), with(&format!("{WORDS}\n{FRESH}"))).unwrap();
    assert_eq!(hangar.post("/api/config/reload", None).status, 200);
    read_until(&mut changes, "notifications/tools/list_changed");
    poll("the added server's tools to be learned", Duration::from_secs(10), || {
        (hangar.details("fresh")["tools_source"] == "live").then_some(())
    });

    let mut changes = listen_for_tool_changes(&hangar);
    std::fs::write(hangar.path("hangar.yaml"), with(FRESH)).unwrap();
    assert_eq!(hangar.post("/api/config/reload", None).status, 200);
    read_until(&mut changes, "notifications/tools/list_changed");
    refused(&hangar, "words__echo");
}
