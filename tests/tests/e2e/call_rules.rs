//! A profile's rules on calls (`profiles.<name>.rules`): alice's profile lets the real
//! `@modelcontextprotocol/server-filesystem` write only under a scratch directory, and refuses
//! a `DROP` in a database tool's `sql`, by CEL expressions over the arguments. The rules hold
//! through the front door and `hangar_call` alike (one cannot dodge them by the other route),
//! the refusal names the rule and its reason, the audit entry records the rule, a `when` that
//! cannot be evaluated denies, and a rule that does not compile refuses the config at its key
//! path (exit 78).
//!
//! Needs `scripts/setup-clients` (Node and server-filesystem).

use std::ffi::OsStr;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, key_hash, node, server_filesystem, supervisor_exit};

const ALICE: &str = "alice-rules-0123456789";
const BOB: &str = "bob-rules-0123456789";
const OPS: &str = "ops-rules-0123456789";

const CONFIG: &str = r#"
tool_access: {mode: front_door}
auth:
  api_keys:
    - {name: alice, hash: "{alice}", profile: dev}
    - {name: bob, hash: "{bob}", profile: reviewer}
    - {name: ops, hash: "{ops}"}
profiles:
  dev:
    servers: [files, db]
    rules:
      - {tool: "files__write_file", when: 'args.path.startsWith("{dir}/scratch/")', then: allow}
      - {tool: "files__write_file", then: deny, reason: "writes only under the scratch directory"}
      - {tool: "db__echo", when: 'args.sql.matches("(?i)\\b(drop|truncate)\\b")', then: deny}
  reviewer:
    servers: [files, db]
    rules:
      - {tool: "db__*", then: deny, reason: "reviewers do not query"}
mcp_servers:
  files:
    command: ["{node}", "{filesystem}", "{dir}"]
    handshake_timeout_s: 30
  db:
    command: ["{fake}", "--tools", "echo"]
"#;

fn hangar() -> Hangar {
    let yaml = CONFIG
        .replace("{alice}", &key_hash(ALICE))
        .replace("{bob}", &key_hash(BOB))
        .replace("{ops}", &key_hash(OPS))
        .replace("{node}", &node().display().to_string())
        .replace("{filesystem}", &server_filesystem().display().to_string());
    Hangar::start(&yaml)
}

/// A 2026-07-28 front-door `tools/call` as `key`: the JSON-RPC answer.
fn call(hangar: &Hangar, key: &str, name: &str, arguments: Value) -> Value {
    let response = hangar.mcp_with(
        "tools/call",
        json!({"name": name, "arguments": arguments}),
        json!({}),
        &[("Authorization", &format!("Bearer {key}"))],
    );
    response.body
}

/// The refusal's words, if the call was refused (a JSON-RPC error, or an error result).
fn refusal(answer: &Value) -> Option<String> {
    if let Some(error) = answer.get("error") {
        return Some(error.to_string());
    }
    (answer["result"]["isError"] == true).then(|| answer["result"].to_string())
}

#[test]
fn rules_on_arguments_hold_on_every_route_and_are_audited() {
    let hangar = hangar();
    let dir = hangar.dir.path().to_owned();
    std::fs::create_dir_all(dir.join("scratch")).expect("scratch dir");
    let inside = dir.join("scratch/notes.txt").display().to_string();
    let outside = dir.join("elsewhere.txt").display().to_string();

    // Inside the scratch directory: the first rule allows it, and the file is written.
    let written = call(&hangar, ALICE, "write_file", json!({"path": inside, "content": "hello"}));
    assert_eq!(refusal(&written), None, "{written}");
    assert_eq!(std::fs::read_to_string(&inside).ok().as_deref(), Some("hello"));

    // Outside: the second rule denies, saying why and which rule; nothing is written.
    let denied = call(&hangar, ALICE, "write_file", json!({"path": outside, "content": "x"}));
    let words = refusal(&denied).unwrap_or_else(|| panic!("refused: {denied}"));
    assert!(words.contains("forbidden"), "{words}");
    assert!(words.contains("writes only under the scratch directory"), "{words}");
    assert!(words.contains("profiles.dev.rules[1]"), "{words}");
    assert!(!std::path::Path::new(&outside).exists(), "the upstream was never asked");

    // The other route: hangar_call of the same tool is judged by the same rules.
    let batch = call(
        &hangar,
        ALICE,
        "hangar_call",
        json!({"calls": [{"mcp_server": "files", "tool": "write_file", "arguments": {"path": outside, "content": "x"}}]}),
    );
    let result = &batch["result"]["structuredContent"]["results"][0];
    assert_eq!(result["success"], false, "{batch}");
    assert_eq!(result["error_type"], "forbidden", "{batch}");
    assert!(result["error"].as_str().unwrap_or_default().contains("profiles.dev.rules[1]"), "{batch}");
    assert!(!std::path::Path::new(&outside).exists());

    // A regular expression over an argument.
    let dropped = call(&hangar, ALICE, "echo", json!({"sql": "select 1; DROP TABLE users"}));
    let words = refusal(&dropped).unwrap_or_else(|| panic!("refused: {dropped}"));
    assert!(words.contains("profiles.dev.rules[2]"), "{words}");
    let selected = call(&hangar, ALICE, "echo", json!({"sql": "select 1"}));
    assert_eq!(refusal(&selected), None, "{selected}");
    // A `when` that cannot be evaluated (no `sql`) denies: a rule fails closed.
    let unreadable = call(&hangar, ALICE, "echo", json!({"text": "hi"}));
    let words = refusal(&unreadable).unwrap_or_else(|| panic!("refused: {unreadable}"));
    assert!(words.contains("could not be evaluated"), "{words}");

    // A caller without a profile has no rules.
    let ops = call(&hangar, OPS, "write_file", json!({"path": outside, "content": "ops"}));
    assert_eq!(refusal(&ops), None, "{ops}");

    // The audit records the rule that decided each of alice's calls.
    let addr = hangar.base.trim_start_matches("http://");
    let head = format!("GET /api/audit?limit=100 HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {OPS}\r\n");
    let (_, text) = hangar_tests::raw_http(addr, &head, b"").expect("audit");
    let body = text.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let page: Value = hangar_tests::serde_json::from_str(body).unwrap_or(Value::Null);
    let entries = page["entries"].as_array().cloned().unwrap_or_default();
    let ruled = |rule: &str, outcome: &str| {
        entries.iter().any(|e| e["identity"] == "alice" && e["rule"] == rule && e["outcome"] == outcome)
    };
    assert!(ruled("profiles.dev.rules[0]", "ok"), "{entries:?}");
    assert!(ruled("profiles.dev.rules[1]", "error"), "{entries:?}");
    assert!(ruled("profiles.dev.rules[2]", "error"), "{entries:?}");
}

/// A 2026-07-28 front-door `tools/call` as `key` at the API on `addr`: the JSON-RPC answer.
fn call_at(addr: &str, key: &str, name: &str, arguments: Value) -> Value {
    let (_, text) = crate::profile_quotas::call(addr, key, name, arguments);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    hangar_tests::serde_json::from_str(body).unwrap_or(Value::Null)
}

#[test]
fn another_profile_has_its_own_rules_and_every_api_instance_applies_them() {
    let hangar = hangar();
    let other = hangar.extra_api(&[]);
    let outside = hangar.dir.path().join("bobs.txt").display().to_string();
    // Bob's profile has no rule on writes, and one on the database.
    let written = call_at(&other.addr, BOB, "write_file", json!({"path": outside, "content": "bob"}));
    assert_eq!(refusal(&written), None, "{written}");
    let queried = call_at(&other.addr, BOB, "echo", json!({"sql": "select 1"}));
    let words = refusal(&queried).unwrap_or_else(|| panic!("refused: {queried}"));
    assert!(words.contains("reviewers do not query") && words.contains("profiles.reviewer.rules[0]"), "{words}");
    // Alice's rules hold on this API instance as on the first.
    let elsewhere = hangar.dir.path().join("alices.txt").display().to_string();
    let denied = call_at(&other.addr, ALICE, "write_file", json!({"path": elsewhere, "content": "x"}));
    let words = refusal(&denied).unwrap_or_else(|| panic!("refused: {denied}"));
    assert!(words.contains("profiles.dev.rules[1]"), "{words}");
    assert!(!std::path::Path::new(&elsewhere).exists());
}

#[test]
fn a_rule_that_does_not_compile_refuses_the_config_at_its_key_path() {
    let temp = tempfile::tempdir().expect("temp dir");
    let config = temp.path().join("hangar.yaml");
    let socket = temp.path().join("s.sock");
    for (when, expected) in [("args.(", "profiles.dev.rules[0].when"), ("secrets.token == 1", "`secrets`")] {
        let yaml = format!(
            "profiles:\n  dev:\n    servers: [db]\n    rules:\n      - {{tool: \"*\", when: '{when}', then: deny}}\nmcp_servers:\n  db: {{command: [echo]}}\n"
        );
        std::fs::write(&config, yaml).expect("write config");
        let args = [OsStr::new("--config"), config.as_os_str(), OsStr::new("--socket"), socket.as_os_str()];
        let (code, stderr) = supervisor_exit(&args, &[]);
        assert_eq!(code, Some(78), "{when}: {stderr:.500}");
        assert!(stderr.contains(expected) && stderr.contains("profiles.dev.rules[0].when"), "{when}: {stderr:.500}");
    }
}
