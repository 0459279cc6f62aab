//! What survives a restart of the supervisor (SIGTERM and SIGKILL alike): a dead server's
//! record and backoff, `given_up` and `capability_blocked` until an explicit start, and each
//! server's last known catalog, which the front door lists at once without starting anything.
//! A changed config makes the memory stale. Every fault is real: a fake that fails, exits at
//! start or serves a forbidden tool, and a supervisor killed without a goodbye.

use std::io::Read;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use hangar_tests::serde_json::{self, Value, json};
use hangar_tests::{Hangar, poll};
use nix::sys::signal::Signal;

use super::cli::{cli, ok};

/// Waits until the journal holds `mcp_server`'s memory with `needle` in its lifecycle (the
/// writer commits every 100 ms: a SIGKILL before that would lose the last change).
fn memory_saved(hangar: &Hangar, mcp_server: &str, needle: &str) {
    let path = hangar.path("state/journal.sqlite");
    poll(&format!("{mcp_server}'s memory with {needle} in the journal"), Duration::from_secs(10), || {
        let lifecycle = saved_lifecycle(&path, mcp_server)?;
        lifecycle.contains(needle).then_some(())
    });
}

fn saved_lifecycle(path: &Path, mcp_server: &str) -> Option<String> {
    let db = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
    db.query_row("SELECT lifecycle FROM servers WHERE mcp_server = ?1", [mcp_server], |row| row.get(0)).ok()
}

/// A server's entry in `hangar status --json`.
fn cli_status(hangar: &Hangar, id: &str) -> Value {
    let listed: Value = serde_json::from_str(&ok(cli(&hangar.base, &["status", "--json"]))).unwrap();
    listed["mcp_servers"].as_array().unwrap().iter().find(|s| s["mcp_server_id"] == id).cloned().unwrap()
}

fn starts(hangar: &Hangar, id: &str) -> Option<f64> {
    hangar.metric(&format!("hangar_mcp_server_starts_total{{mcp_server=\"{id}\"}}"))
}

const GIVEN_UP: &str = r#"
recovery: {max_retries: 1, initial_backoff_s: 0.2, backoff_multiplier: 2, max_backoff_s: 1}
mcp_servers:
  gave-up:
    command: ["{fake}", "--tools", "add", "--fail-flag", "{dir}/gave-up.fail"]
    max_consecutive_failures: 1
    health_check_interval_s: 0.2
    probe_timeout_s: 1
    handshake_timeout_s: 3
"#;

#[test]
fn given_up_survives_sigterm_and_sigkill_with_the_same_dead_record() {
    let hangar = Hangar::start(GIVEN_UP);
    hangar.tool_ok("hangar_start", json!({"mcp_server": "gave-up"}));
    std::fs::write(hangar.path("gave-up.fail"), "").unwrap();
    poll("gave-up to give up", Duration::from_secs(15), || {
        (hangar.details("gave-up")["dead"]["reason"] == "given_up").then_some(())
    });
    let dead = hangar.details("gave-up")["dead"].clone();
    assert!(dead["since"].is_string() && dead["retry_allowed_at"].is_string(), "{dead}");
    memory_saved(&hangar, "gave-up", "given_up");

    let mut hangar = hangar;
    for signal in [Signal::SIGTERM, Signal::SIGKILL] {
        hangar = hangar.restart(signal, &[]);
        let details = hangar.details("gave-up");
        assert_eq!(details["state"], "dead", "after {signal}: {details}");
        assert_eq!(details["dead"], dead, "after {signal}: the identical dead record");
        let status = cli_status(&hangar, "gave-up");
        assert_eq!((&status["state"], &status["dead"]), (&json!("dead"), &dead), "hangar status after {signal}");
        let table = ok(cli(&hangar.base, &["status"]));
        assert!(table.lines().any(|l| l.starts_with("gave-up ") && l.contains("given_up")), "{table}");
        assert_eq!(starts(&hangar, "gave-up"), Some(0.0), "nothing was started after {signal}");
    }

    // An explicit start revives it (once its backoff, kept across the restarts, has passed).
    std::fs::remove_file(hangar.path("gave-up.fail")).unwrap();
    let started = hangar.start_after_backoff("gave-up");
    assert_eq!(started["structuredContent"]["state"], "ready", "{started}");
    assert_eq!(hangar.details("gave-up")["dead"], json!(null));
}

const BLOCKED: &str = r#"
mcp_servers:
  blocked:
    command: ["{fake}", "--tools", "add,exfiltrate", "--alt-tools", "add", "--alt-tools-flag", "{dir}/clean",
              "--pid-file", "{dir}/blocked.pid"]
    capabilities:
      enforcement_mode: block
      tools: {expected_tools: [add]}
"#;

#[test]
fn capability_blocked_stays_blocked_until_an_explicit_start() {
    let hangar = Hangar::start(BLOCKED);
    let blocked = hangar.tool("hangar_start", json!({"mcp_server": "blocked"}));
    assert_eq!(blocked["structuredContent"]["error_type"], "capability_blocked", "{blocked}");
    let dead = hangar.details("blocked")["dead"].clone();
    assert_eq!(dead["reason"], "capability_blocked");
    memory_saved(&hangar, "blocked", "capability_blocked");

    let hangar = hangar.restart(Signal::SIGKILL, &[]);
    std::fs::remove_file(hangar.path("blocked.pid")).unwrap();
    // The upstream would now pass the check, but nothing starts it but an explicit start.
    std::fs::write(hangar.path("clean"), "").unwrap();
    assert_eq!(hangar.details("blocked")["dead"], dead, "the identical dead record");
    assert_eq!(cli_status(&hangar, "blocked")["dead"], dead);
    let (error_type, error) = hangar.call_error("blocked", "add", json!({"a": 1, "b": 2}));
    assert_eq!(error_type, "capability_blocked", "{error}");
    assert!(error.contains("explicit start"), "{error}");
    assert!(!hangar.path("blocked.pid").exists(), "a call spawned nothing");
    assert_eq!(starts(&hangar, "blocked"), Some(0.0));

    let started = hangar.post("/api/mcp_servers/blocked/start", None);
    assert_eq!((started.status, &started.body["state"]), (200, &json!("ready")), "{}", started.text);
    assert_eq!(hangar.call("blocked", "add", json!({"a": 1, "b": 2})), Some(json!({"result": 3})));
}

const BACKOFF: &str = r#"
recovery: {initial_backoff_s: 60, max_backoff_s: 120}
mcp_servers:
  flaky:
    command: ["{fake}", "--tools", "add", "--exit-flag", "{dir}/flaky.exit"]
"#;

/// A hangar on [`BACKOFF`] whose `flaky` failed to start (its process exits at start) and
/// waits out a backoff of about a minute, remembered in the journal; and its dead record.
fn flaky_in_backoff() -> (Hangar, Value) {
    let hangar = Hangar::start(BACKOFF);
    std::fs::write(hangar.path("flaky.exit"), "").unwrap();
    let failed = hangar.tool("hangar_start", json!({"mcp_server": "flaky"}));
    assert_eq!(failed["structuredContent"]["error_type"], "start_failed", "{failed}");
    let dead = hangar.details("flaky")["dead"].clone();
    assert!(dead["retry_allowed_at"].is_string(), "{dead}");
    memory_saved(&hangar, "flaky", "start_failed");
    std::fs::remove_file(hangar.path("flaky.exit")).unwrap();
    (hangar, dead)
}

#[test]
fn a_backoff_runs_on_across_a_restart() {
    let (hangar, dead) = flaky_in_backoff();
    let hangar = hangar.restart(Signal::SIGTERM, &[]);
    assert_eq!(hangar.details("flaky")["dead"], dead);
    let refused = hangar.post("/api/mcp_servers/flaky/start", None);
    assert_eq!(refused.status, 409, "{}", refused.text);
    assert_eq!(refused.body["error"]["code"], "RetryLater", "{}", refused.text);
    assert!(refused.header("Retry-After").is_some_and(|s| s.parse::<u64>().unwrap() > 30), "{:?}", refused.headers);
    let (error_type, _) = hangar.call_error("flaky", "add", json!({"a": 1, "b": 2}));
    assert_eq!(error_type, "retry_later", "a lazy start waits for the backoff too");
    assert_eq!(starts(&hangar, "flaky"), Some(0.0));
}

const FRONT_DOOR: &str = r#"
tool_access: {mode: front_door}
mcp_servers:
  math:
    command: ["{fake}", "--tools", "add,echo", "--alt-tools", "add,echo,sleep", "--alt-tools-flag", "{dir}/alt",
              "--pid-file", "{dir}/math.pid"]
  fixtures:
    command: ["{fake}", "--conformance", "--pid-file", "{dir}/fixtures.pid"]
"#;

fn listed(hangar: &Hangar, method: &str, key: &str, field: &str) -> Vec<String> {
    let answer = hangar.mcp(method, json!({}));
    assert_eq!(answer.status, 200, "{}", answer.text);
    let items = answer.body["result"][key].as_array().unwrap_or_else(|| panic!("{method}: {}", answer.text));
    items.iter().map(|i| i[field].as_str().unwrap().to_owned()).filter(|n| !n.starts_with("hangar_")).collect()
}

#[test]
fn the_front_door_lists_the_remembered_catalog_without_starting_anything() {
    let hangar = Hangar::start(FRONT_DOOR);
    let tools = listed(&hangar, "tools/list", "tools", "name");
    for tool in ["add", "echo", "test_simple_text"] {
        assert!(tools.contains(&tool.to_owned()), "{tools:?}");
    }
    let prompts = listed(&hangar, "prompts/list", "prompts", "name");
    let resources = listed(&hangar, "resources/list", "resources", "uri");
    assert!(!prompts.is_empty() && !resources.is_empty(), "{prompts:?} {resources:?}");

    let hangar = hangar.restart(Signal::SIGTERM, &[]);
    for pid in ["math.pid", "fixtures.pid"] {
        std::fs::remove_file(hangar.path(pid)).unwrap();
    }
    // While it was down, math's tools changed.
    std::fs::write(hangar.path("alt"), "").unwrap();

    assert_eq!(listed(&hangar, "tools/list", "tools", "name"), tools, "the remembered catalog, at once");
    assert_eq!(listed(&hangar, "prompts/list", "prompts", "name"), prompts);
    assert_eq!(listed(&hangar, "resources/list", "resources", "uri"), resources);
    for id in ["math", "fixtures"] {
        let details = hangar.details(id);
        assert_eq!(details["state"], "cold", "{details}");
        assert_eq!(details["tools_source"], "remembered", "{details}");
        assert!(!hangar.path(&format!("{id}.pid")).exists(), "{id} was spawned");
    }
    let math = hangar.details("math");
    let names: Vec<&str> = math["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["add", "echo"], "REST shows the remembered tools");

    // A client listening for changes; a call starts math, whose fresh list differs: announced.
    let mut stream = hangar.listen_for_tool_changes(None, Duration::from_secs(20));
    let (heard, hear) = mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = stream.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
            if String::from_utf8_lossy(&seen).contains("notifications/tools/list_changed") {
                let _ = heard.send(());
                return;
            }
        }
    });
    let added = hangar.mcp("tools/call", json!({"name": "add", "arguments": {"a": 2, "b": 3}}));
    assert_eq!(added.body["result"]["structuredContent"], json!({"result": 5}), "{}", added.text);
    assert!(hangar.path("math.pid").exists(), "the call started it");
    hear.recv_timeout(Duration::from_secs(15)).expect("list_changed after the first start refreshed the catalog");
    let math = hangar.details("math");
    assert_eq!((&math["state"], &math["tools_source"]), (&json!("ready"), &json!("live")), "{math}");
    let fresh = listed(&hangar, "tools/list", "tools", "name");
    assert!(fresh.contains(&"sleep".to_owned()), "{fresh:?}");
    assert!(!hangar.path("fixtures.pid").exists(), "fixtures stayed cold");
}

#[test]
fn a_changed_config_ignores_the_stale_memory() {
    let (hangar, _) = flaky_in_backoff();
    let config = hangar.path("hangar.yaml");
    let changed = std::fs::read_to_string(&config).unwrap().replace("\"add\"", "\"add,echo\"");
    std::fs::write(&config, changed).unwrap();

    let hangar = hangar.restart(Signal::SIGKILL, &[]);
    let details = hangar.details("flaky");
    assert_eq!((&details["state"], &details["dead"]), (&json!("cold"), &json!(null)), "{details}");
    let started = hangar.post("/api/mcp_servers/flaky/start", None);
    assert_eq!((started.status, &started.body["tools"]), (200, &json!(["add", "echo"])), "{}", started.text);
}
