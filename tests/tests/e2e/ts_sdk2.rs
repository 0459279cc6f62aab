//! The TypeScript SDK 2.x client (`@modelcontextprotocol/client`, `tests/fixtures/ts2_client.mjs`)
//! at the 2026-07-28 wire, against the front door over two real servers: the reference
//! `@modelcontextprotocol/server-everything` (Node) and `mcp-server-time` (PyPI). It negotiates
//! 2026-07-28 with `server/discover`, lists both servers' tools and calls each; its
//! `subscriptions/listen` with `resourceSubscriptions` hears server-everything's resource updates;
//! a URL elicitation server-everything asks reaches it as `input_required`, and its answer
//! completes the call; after a reload adds a server, its listen hears `tools/list_changed` and
//! the new list has the new server's tools.
//!
//! Needs `scripts/setup-clients` (Node, server-everything, the 2.x SDK, mcp-server-time).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use hangar_tests::serde_json::{self, Value, json};
use hangar_tests::{Hangar, node, poll, repo_root, server_everything};

fn hangar() -> Hangar {
    Hangar::start(&config(""))
}

/// The front door over server-everything and mcp-server-time, and `more` servers.
fn config(more: &str) -> String {
    format!(
        "tool_access: {{mode: front_door}}\nmcp_servers:\n  everything:\n    command: [\"{}\", \"{}\", \"stdio\"]\n    handshake_timeout_s: 30\n  time:\n    command: [\"{}\", \"--local-timezone\", \"UTC\"]\n    handshake_timeout_s: 30\n{more}",
        node().display(),
        server_everything().display(),
        repo_root().join(".tools/venv/bin/mcp-server-time").display(),
    )
}

/// Runs one scenario of `ts2_client.mjs` (bounded) and parses the JSON line it prints.
fn ts2(hangar: &Hangar, args: &[&str]) -> Value {
    ts2_as(hangar, None, args)
}

/// [`ts2`] with `bearer` (an API key) on every request.
pub(crate) fn ts2_as(hangar: &Hangar, bearer: Option<&str>, args: &[&str]) -> Value {
    let script = repo_root().join("tests/fixtures/ts2_client.mjs");
    let url = format!("{}/mcp", hangar.base);
    let mut command = Command::new("timeout");
    command.arg("90").arg(node()).arg(script).arg(&url).args(args);
    if let Some(bearer) = bearer {
        command.env("MCP_BEARER", bearer);
    }
    let output = command.output().expect("run node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let seen: Value = serde_json::from_str(line)
        .unwrap_or_else(|err| panic!("{args:?}: {err}: {stdout}\n{}", String::from_utf8_lossy(&output.stderr)));
    assert!(output.status.success(), "{args:?}: {seen}\nhangar log:\n{}", hangar.log());
    seen
}

fn text(result: &Value) -> String {
    result["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect()
}

#[test]
fn the_2x_client_negotiates_2026_07_28_and_calls_both_real_servers() {
    let hangar = hangar();
    let seen = ts2(&hangar, &["basics", "echo", r#"{"message": "hi"}"#]);
    assert_eq!(seen["protocol_version"], "2026-07-28", "{seen}");
    assert_eq!(seen["server"], "hangar", "{seen}");
    let tools: Vec<&str> = seen["tools"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for expected in ["hangar_call", "echo", "toggle-subscriber-updates", "get_current_time", "convert_time"] {
        assert!(tools.contains(&expected), "{expected} is listed: {tools:?}");
    }
    assert_eq!(text(&seen["result"]), "Echo: hi", "{seen}");
    let time = ts2(&hangar, &["basics", "get_current_time", r#"{"timezone": "Europe/Paris"}"#]);
    let answer = text(&time["result"]);
    assert!(answer.contains("Europe/Paris") && answer.contains("datetime"), "{time}");
}

#[test]
fn the_2x_clients_listen_hears_resource_updates() {
    let hangar = hangar();
    let uri = "demo://resource/static/document/features.md";
    let seen = ts2(&hangar, &["listen", uri, "toggle-subscriber-updates"]);
    assert_eq!(seen["honored"], json!([uri]), "{seen}");
    assert_eq!(seen["updated"][0], uri, "{seen}");
}

#[test]
fn a_url_elicitation_reaches_the_2x_client_and_its_answer_completes_the_call() {
    let hangar = hangar();
    let seen =
        ts2(&hangar, &["url-elicitation", "trigger-url-elicitation", r#"{"url": "https://example.com/connect"}"#]);
    assert_eq!(seen["asked"], json!([{"mode": "url", "url": "https://example.com/connect"}]), "{seen}");
    assert!(text(&seen["result"]).contains("completed the URL elicitation"), "{seen}");
}

#[test]
fn after_a_reload_adds_a_server_the_2x_client_hears_its_tools_arrive() {
    let hangar = hangar();
    let script = repo_root().join("tests/fixtures/ts2_client.mjs");
    let url = format!("{}/mcp", hangar.base);
    let mut child = Command::new("timeout")
        .arg("90")
        .arg(node())
        .args([script.to_str().unwrap_or_default(), url.as_str(), "tools-changed"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run node");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    assert_eq!(first, r#"{"listening":true}"#);
    crate::reload::write_config(&hangar, &config("  math:\n    command: [\"{fake}\", \"--tools\", \"add\"]\n"));
    let reloaded = hangar.post("/api/config/reload", None);
    assert_eq!(reloaded.status, 200, "{}", reloaded.text);
    let last = poll("the 2.x client's answer", Duration::from_secs(60), || lines.next().and_then(Result::ok));
    let _ = child.wait();
    let seen: Value = serde_json::from_str(&last).unwrap_or_else(|err| panic!("{err}: {last}"));
    assert_eq!(seen["changed"], true, "{seen}");
    let tools: Vec<&str> = seen["tools"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(tools.contains(&"add") && tools.contains(&"echo"), "the new list has math's add: {tools:?}");
}
