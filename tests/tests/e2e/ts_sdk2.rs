//! The TypeScript SDK 2.x client (`@modelcontextprotocol/client`, `tests/fixtures/ts2_client.mjs`)
//! at the 2026-07-28 wire, against the front door over real servers: the reference
//! `@modelcontextprotocol/server-everything` (Node), `mcp-server-time` (PyPI) and, for what is
//! asked of a server that declares tools only, `@modelcontextprotocol/server-filesystem`. Each of
//! issue 32's findings this client showed, end to end:
//! - it negotiates 2026-07-28 with `server/discover`, lists both servers' tools and calls each;
//! - its `prompts/list`, `resources/list` and `resources/templates/list` ask only the upstreams
//!   that declared them (§2);
//! - its `subscriptions/listen` with `resourceSubscriptions` hears server-everything's resource
//!   updates (§3);
//! - after a reload adds or removes a server, its listen hears `tools/list_changed` and the new
//!   list has the change (§3); behind `mode: egress` it is promised and told nothing (§3);
//! - a URL elicitation server-everything asks reaches it as `input_required`, and its answer
//!   completes the call (§3); so do sampling, a form elicitation and `roots/list`, and two
//!   people's roots stay their own (§1);
//! - server-everything's image through `hangar_call` is carried once (§3);
//! - aborting a call cancels it upstream.
//!
//! Needs `scripts/setup-clients` (Node, server-everything, server-filesystem, the 2.x SDK,
//! mcp-server-time).

use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use hangar_tests::serde_json::{self, Value, json};
use hangar_tests::{Hangar, node, poll, repo_root, server_everything, server_filesystem};

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
    let env: Vec<(&str, &str)> = bearer.map(|bearer| ("MCP_BEARER", bearer)).into_iter().collect();
    ts2_with(hangar, &env, args)
}

/// [`ts2`] with `env` (`MCP_BEARER`, `MCP_ROOT`) set for the client.
fn ts2_with(hangar: &Hangar, env: &[(&str, &str)], args: &[&str]) -> Value {
    let script = repo_root().join("tests/fixtures/ts2_client.mjs");
    let url = format!("{}/mcp", hangar.base);
    let mut command = Command::new("timeout");
    command.arg("90").arg(node()).arg(script).arg(&url).args(args).envs(env.iter().copied());
    let output = command.output().expect("run node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let seen: Value = serde_json::from_str(line)
        .unwrap_or_else(|err| panic!("{args:?}: {err}: {stdout}\n{}", String::from_utf8_lossy(&output.stderr)));
    assert!(output.status.success(), "{args:?}: {seen}\nhangar log:\n{}", hangar.log());
    seen
}

/// A scenario of `ts2_client.mjs` that runs while the test acts: its stdin and its lines.
struct Running {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Running {
    fn start(hangar: &Hangar, args: &[&str]) -> Running {
        let script = repo_root().join("tests/fixtures/ts2_client.mjs");
        let url = format!("{}/mcp", hangar.base);
        let mut child = Command::new("timeout")
            .arg("90")
            .arg(node())
            .arg(script)
            .arg(&url)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run node");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Running { child, lines }
    }

    /// Its next line (bounded: the client gives up within 90 s, which ends the read).
    fn line(&mut self) -> Value {
        let line = self.lines.next().and_then(Result::ok).unwrap_or_default();
        serde_json::from_str(&line).unwrap_or_else(|err| panic!("{err}: {line}"))
    }

    /// A line on its stdin.
    fn tell(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().expect("piped stdin");
        stdin.write_all(format!("{line}\n").as_bytes()).expect("tell the client");
    }

    /// Its stdin closed, then its last line, once it exits.
    fn last(mut self) -> Value {
        drop(self.child.stdin.take());
        let last = self.line();
        let _ = self.child.wait();
        last
    }
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
    let (before, after) = tools_changed(&hangar, || {
        crate::reload::write_config(&hangar, &config(MATH));
        let reloaded = hangar.post("/api/config/reload", None);
        assert_eq!(reloaded.status, 200, "{}", reloaded.text);
    });
    assert!(!names(&before["tools"]).contains(&"add"), "{before}");
    assert_eq!(after["changed"], true, "{after}");
    let tools = names(&after["tools"]);
    assert!(tools.contains(&"add") && tools.contains(&"echo"), "the new list has math's add: {tools:?}");
}

/// A fake upstream with one tool, `add`, for a reload to add or remove.
const MATH: &str = "  math:\n    command: [\"{fake}\", \"--tools\", \"add\"]\n";

fn names(list: &Value) -> Vec<&str> {
    list.as_array().into_iter().flatten().filter_map(Value::as_str).collect()
}

/// Runs the `tools-changed` scenario around `between`: its first line once it listens (with the
/// tools it lists then), and its last once it heard a change (or gave up).
fn tools_changed(hangar: &Hangar, between: impl FnOnce()) -> (Value, Value) {
    let mut client = Running::start(hangar, &["tools-changed"]);
    let first = client.line();
    assert_eq!(first["listening"], true, "{first}");
    between();
    (first, client.last())
}

#[test]
fn after_a_reload_removes_a_server_the_2x_client_hears_its_tools_go() {
    let hangar = Hangar::start(&config(MATH));
    let (before, after) = tools_changed(&hangar, || {
        crate::reload::write_config(&hangar, &config(""));
        let reloaded = hangar.post("/api/config/reload", None);
        assert_eq!(reloaded.status, 200, "{}", reloaded.text);
    });
    assert!(names(&before["tools"]).contains(&"add"), "math's add is listed first: {before}");
    assert_eq!(after["changed"], true, "{after}");
    let tools = names(&after["tools"]);
    assert!(!tools.contains(&"add") && tools.contains(&"echo"), "math's add is gone: {tools:?}");
    let call = hangar.mcp("tools/call", json!({"name": "add", "arguments": {"a": 1, "b": 2}}));
    assert_eq!(call.body["error"]["code"], -32602, "the removed server's tool no longer routes: {}", call.text);
}

/// Issue 32 §2 with the 2.x client: its `prompts/list`, `resources/list` and
/// `resources/templates/list` through the front door reach only the upstreams that declared
/// them. server-filesystem and mcp-server-time declare `tools` alone: neither is asked (no
/// -32601 in their logs), nothing is audited as a failure, and server-everything's own prompts,
/// resources and templates are listed.
#[test]
fn the_2x_clients_lists_ask_only_the_upstreams_that_declared_them() {
    let dir = tempfile::tempdir().unwrap();
    let fs = format!(
        "  fs:\n    command: [\"{}\", \"{}\", \"{}\"]\n",
        node().display(),
        server_filesystem().display(),
        dir.path().display()
    );
    let hangar = Hangar::start(&config(&fs));
    for server in ["fs", "time", "everything"] {
        let started = hangar.post(&format!("/api/mcp_servers/{server}/start"), None);
        assert_eq!(started.status, 200, "{server}: {}", started.text);
    }
    let seen = ts2(&hangar, &["lists"]);
    for list in ["prompts", "resources", "templates"] {
        assert!(!names(&seen[list]).is_empty(), "server-everything's {list} are listed: {seen}");
    }
    for server in ["fs", "time"] {
        crate::declared_only::asked_nothing_undeclared(&hangar, server);
    }
    crate::declared_only::no_failure_audited(&hangar);
}

/// Issue 32 §3 with the 2.x client and the image that showed it (server-everything's
/// `get-tiny-image`, 5.4 KB of base64): through `hangar_call` the image is carried once, as a
/// block of its own that the report refers to by its place, not again in the report's text or
/// `structuredContent`.
#[test]
fn an_image_through_hangar_call_reaches_the_2x_client_once() {
    let hangar = hangar();
    let seen = ts2(&hangar, &["hangar-call", "everything", "get-tiny-image", "{}"]);
    let result = &seen["result"];
    let blocks = result["content"].as_array().unwrap();
    let images: Vec<&Value> = blocks.iter().filter(|block| block["type"] == "image").collect();
    assert_eq!(images.len(), 1, "{result}");
    let data = images[0]["data"].as_str().unwrap();
    assert_eq!(images[0]["mimeType"], "image/png", "{result}");
    assert!(data.len() > 5000, "server-everything's whole image: {} bytes", data.len());
    let whole = result.to_string();
    assert_eq!(whole.matches(&data[100..160]).count(), 1, "the image's data once: {whole:.600}");
    assert!(whole.len() < data.len() + 2000, "{} bytes for a {}-byte image: {whole:.600}", whole.len(), data.len());
    let report = &result["structuredContent"];
    assert_eq!(report["succeeded"], 1, "{report}");
    let index = blocks.iter().position(|block| block["type"] == "image").unwrap();
    let referred = report["results"][0]["result"]["content"].as_array().unwrap();
    assert!(referred.iter().any(|block| block["content_index"] == index), "the report refers to it: {report}");
}

/// Issue 32 §3's egress noise with the 2.x client: behind `tool_access.mode: egress` its list is
/// the `hangar_*` tools, which never change, so its `subscriptions/listen` is not promised
/// `toolsListChanged`, and a reload that adds a server (then started, its tools learned) tells
/// it nothing.
#[test]
fn an_egress_2x_client_is_not_told_of_upstream_tool_changes() {
    let egress = config("").replace("tool_access: {mode: front_door}", "tool_access: {mode: egress}");
    let hangar = Hangar::start(&egress);
    let mut client = Running::start(&hangar, &["egress-listen"]);
    let first = client.line();
    // Neither `server/discover` nor the listen's acknowledgement promises tool-list changes.
    assert_eq!(first["advertised"], false, "{first}");
    assert_ne!(first["honored"]["toolsListChanged"], true, "no tool-list changes promised: {first}");
    assert!(names(&first["tools"]).iter().all(|name| name.starts_with("hangar_")), "{first}");

    crate::reload::write_config(&hangar, &format!("{egress}{MATH}"));
    let reloaded = hangar.post("/api/config/reload", None);
    assert_eq!(reloaded.status, 200, "{}", reloaded.text);
    let started = hangar.post("/api/mcp_servers/math/start", None);
    assert_eq!(started.status, 200, "{}", started.text);
    let last = client.last();
    assert_eq!(last["changes"], 0, "an egress client was told its tool list changed: {last}");
}

/// server-everything's questions to its client reach the 2.x client as `input_required`, its
/// handlers answer, and the call completes with the answer: the roots it asks for
/// (`get-roots-list`), a sampling request and a form elicitation.
#[test]
fn server_everythings_questions_reach_the_2x_client_and_its_answers_complete_the_calls() {
    let hangar = hangar();
    let methods = |seen: &Value| -> Vec<String> {
        seen["asked"].as_array().into_iter().flatten().filter_map(|a| a["method"].as_str().map(str::to_owned)).collect()
    };
    let roots = ts2(&hangar, &["ask", "get-roots-list", "{}"]);
    assert_eq!(methods(&roots), ["roots/list"], "{roots}");
    assert!(text(&roots["result"]).contains("URI: file:///home/ts2/project"), "{roots}");
    let sampled = ts2(&hangar, &["ask", "trigger-sampling-request", r#"{"prompt": "hi", "maxTokens": 42}"#]);
    assert_eq!(sampled["asked"], json!([{"method": "sampling/createMessage", "maxTokens": 42}]), "{sampled}");
    assert!(text(&sampled["result"]).contains("sampled by ts2"), "{sampled}");
    let elicited = ts2(&hangar, &["ask", "trigger-elicitation-request", "{}"]);
    assert!(
        elicited["asked"].as_array().unwrap().contains(&json!({"method": "elicitation/create", "mode": "form"})),
        "{elicited}"
    );
    assert!(text(&elicited["result"]).contains("Name: Ada from ts2"), "{elicited}");
}

/// The 2.x client aborting a call (its `AbortSignal`) cancels it upstream: the upstream (the
/// fake, which logs each cancel it hears) is told, and the client's next call is served.
#[test]
fn the_2x_client_aborting_a_call_cancels_it_upstream() {
    let hangar = Hangar::start(
        "tool_access: {mode: front_door}\nmcp_servers:\n  slow:\n    command: [\"{fake}\", \"--tools\", \"sleep,echo\"]\n",
    );
    assert_eq!(hangar.post("/api/mcp_servers/slow/start", None).status, 200);
    let mut client = Running::start(&hangar, &["abort", "sleep", r#"{"ms": 60000}"#]);
    assert_eq!(client.line(), json!({"calling": true}));
    poll("the call to reach the upstream", Duration::from_secs(20), || {
        (hangar.details("slow")["health"]["total_invocations"] == 1).then_some(())
    });
    assert_eq!(hangar.cancellations("slow"), 0);
    client.tell("abort");
    poll("the upstream to be told the call is cancelled", Duration::from_secs(20), || {
        (hangar.cancellations("slow") == 1).then_some(())
    });
    let last = client.last();
    assert_eq!(last["aborted"], true, "{last}");
    assert_eq!(last["echo"]["structuredContent"], json!({"after": true}), "{last}");
}

/// Issue 32 §1 at 2026-07-28: two people (alice and bob, each an API key) run the 2.x client,
/// each with a root of their own, against one shared server-everything that caches the roots it
/// gets. Each `get-roots-list` answers with the caller's own root, never the other's: the hangar
/// tells the server the roots changed, and its `roots/list` reaches the calling client as
/// `input_required`.
#[test]
fn two_people_with_the_2x_client_each_get_their_own_roots() {
    const ALICE: &str = "alice-key-0123456789";
    const BOB: &str = "bob-key-0123456789";
    let people = format!(
        "auth:\n  api_keys:\n    - {{name: alice, hash: \"{}\", profile: people}}\n    - {{name: bob, hash: \"{}\", profile: people}}\nprofiles:\n  people: {{servers: [everything, time]}}\n",
        hangar_tests::key_hash(ALICE),
        hangar_tests::key_hash(BOB),
    );
    let hangar = Hangar::start(&format!("{people}{}", config("")));
    let turns = [
        (ALICE, "file:///home/alice/secret-project"),
        (BOB, "file:///home/bob/other"),
        (ALICE, "file:///home/alice/secret-project"),
    ];
    for (turn, (key, root)) in turns.into_iter().enumerate() {
        let seen = ts2_with(&hangar, &[("MCP_BEARER", key), ("MCP_ROOT", root)], &["ask", "get-roots-list", "{}"]);
        let answer = text(&seen["result"]);
        assert!(answer.contains(&format!("URI: {root}\n")), "{root}: {seen}");
        assert!(answer.contains("(1 total)"), "only the caller's own root: {seen}");
        if turn == 0 {
            // The first call starts the server, and the `roots/list` server-everything sends
            // when it is initialized may land during that call too (then it is relayed to the
            // same client): one or two asks, each for roots.
            let asked = seen["asked"].as_array().cloned().unwrap_or_default();
            assert!(matches!(asked.len(), 1 | 2), "{root}: {seen}");
            assert!(asked.iter().all(|ask| *ask == json!({"method": "roots/list"})), "{root}: {seen}");
        } else {
            assert_eq!(seen["asked"], json!([{"method": "roots/list"}]), "{root}: {seen}");
        }
    }
}
