//! The audit trail: every tool call, front-door request and admin action is an entry in the
//! journal (read here straight from `journal.sqlite`, as an operator would), with
//! who asked, what, how it ended (`ok`, `is_error`, or the error type), its sizes and, as
//! `audit.arguments` says, its arguments. Refusals are recorded too; starts, stops and reloads
//! also say who did them; `audit: {enabled: false}` keeps calls out and the rest in.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, MODERN, poll};

const CONFIG: &str = r#"
tool_access: {mode: front_door}
audit: {arguments: digest}
mcp_servers:
  math: {command: ["{fake}", "--tools", "add,echo,fail,sleep"]}
"#;

/// The journal of a hangar started by the harness.
pub fn journal_of(hangar: &Hangar) -> PathBuf {
    hangar.path("state").join("journal.sqlite")
}

/// Every entry written to the journal at `path`, oldest first, as its JSON: each block's body
/// holds its entries as JSON lines, lz4-compressed (its length first, as lz4's own
/// `decompress_size_prepended` reads it), or as text in a block from before schema 4.
pub fn entries(path: &Path) -> Vec<Value> {
    let Ok(db) = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY) else {
        return Vec::new();
    };
    let Ok(mut select) = db.prepare("SELECT body FROM blocks ORDER BY first_id") else { return Vec::new() };
    let rows = select
        .query_map([], |row| {
            Ok(match row.get_ref(0)? {
                rusqlite::types::ValueRef::Blob(packed) => {
                    String::from_utf8(lz4_flex::block::decompress_size_prepended(packed).unwrap()).unwrap()
                }
                text => text.as_str()?.to_owned(),
            })
        })
        .unwrap();
    let entries: Vec<Value> = rows
        .flat_map(|body| {
            let body = body.unwrap();
            body.split('\n').map(|line| hangar_tests::serde_json::from_str(line).unwrap()).collect::<Vec<Value>>()
        })
        .collect();
    let ids: Vec<u64> = entries.iter().map(|e| e["id"].as_u64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "blocks hold their entries in id order, never overlapping: {ids:?}");
    entries
}

/// Polls the journal until `found` picks something out of its entries.
pub fn wait_for<T>(path: &Path, what: &str, found: impl Fn(&[Value]) -> Option<T>) -> T {
    poll(what, Duration::from_secs(10), || found(&entries(path)))
}

fn audit_of<'a>(entries: &'a [Value], method: &str, tool: Option<&str>) -> Option<&'a Value> {
    entries.iter().find(|e| e["kind"] == "audit" && e["method"] == method && tool.is_none_or(|tool| e["tool"] == tool))
}

#[test]
fn calls_refusals_and_actions_are_audited_with_their_outcome() {
    let hangar = Hangar::start(CONFIG);
    let journal = journal_of(&hangar);
    let result = hangar.tool("add", json!({"b": 2, "a": 1}));
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(hangar.tool("fail", json!({}))["isError"], true);
    let unknown = hangar.mcp("tools/call", json!({"name": "nosuch", "arguments": {}}));
    assert_eq!(unknown.status, 200, "{}", unknown.text);
    assert_eq!(hangar.get("/api/mcp_servers/math/logs").status, 200);
    assert_eq!(hangar.post("/api/mcp_servers/math/stop", None).status, 200);
    assert_eq!(hangar.post("/api/config/reload", None).status, 200);

    let all = wait_for(&journal, "the reload's entries", |all| {
        all.iter().any(|e| e["kind"] == "reload").then(|| all.to_vec())
    });
    let add = audit_of(&all, "tools/call", Some("add")).unwrap_or_else(|| panic!("{all:#?}"));
    assert_eq!(add["identity"], "anonymous");
    assert_eq!(add["mcp_server"], "math");
    assert_eq!(add["outcome"], "ok");
    assert_eq!(add["bytes_in"], r#"{"a":1,"b":2}"#.len());
    assert!(add["bytes_out"].as_u64().unwrap() > 0, "{add}");
    assert!(add["duration_ms"].as_f64().unwrap() >= 0.0, "{add}");
    // The canonical form: keys sorted, whatever order the client sent them in.
    let digest = hangar_tests::serde_json::to_string(&json!(sha256_hex(br#"{"a":1,"b":2}"#))).unwrap();
    assert_eq!(add["arguments"].to_string(), digest, "{add}");

    let fail = audit_of(&all, "tools/call", Some("fail")).unwrap();
    assert_eq!(fail["outcome"], "is_error", "{fail}");
    let nosuch = audit_of(&all, "tools/call", Some("nosuch")).unwrap_or_else(|| panic!("{all:#?}"));
    assert_eq!((&nosuch["outcome"], &nosuch["error_type"]), (&json!("error"), &json!("unknown_tool")));

    let stop = audit_of(&all, "stop", None).unwrap_or_else(|| panic!("{all:#?}"));
    assert_eq!((&stop["mcp_server"], &stop["outcome"]), (&json!("math"), &json!("ok")));
    let action = all.iter().find(|e| e["kind"] == "action").unwrap();
    assert_eq!((&action["action"], &action["identity"]), (&json!("stop"), &json!("anonymous")));
    let reload = all.iter().find(|e| e["kind"] == "reload").unwrap();
    assert_eq!((&reload["identity"], &reload["unchanged"]), (&json!("anonymous"), &json!(["math"])));
    assert!(audit_of(&all, "reload", None).is_some(), "{all:#?}");
    // A log read changes nothing (and an open status-page panel reads every 2 s): only a refused
    // one is an entry.
    assert!(audit_of(&all, "logs", None).is_none(), "{all:#?}");
    // Ids are the journal's order.
    let ids: Vec<u64> = all.iter().map(|e| e["id"].as_u64().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
}

#[test]
fn a_call_its_client_gave_up_on_is_recorded_as_cancelled() {
    let hangar = Hangar::start(CONFIG);
    let journal = journal_of(&hangar);
    let stream = hangar.open_sleep_call("sleep", json!({}));
    poll("the call to reach the upstream", Duration::from_secs(10), || {
        (hangar.get("/api/mcp_servers/math").body["health"]["total_invocations"] == 1).then_some(())
    });
    drop(stream);
    let sleep =
        wait_for(&journal, "the cancelled call's entry", |all| audit_of(all, "tools/call", Some("sleep")).cloned());
    assert_eq!((&sleep["outcome"], &sleep["error_type"]), (&json!("error"), &json!("cancelled")), "{sleep}");
}

#[test]
fn a_refused_call_names_the_caller_and_its_profile() {
    let hangar = Hangar::start(&format!(
        r#"
auth:
  api_keys:
    - {{name: ci-bot, hash: "{hash}", profile: ci}}
profiles:
  ci: {{servers: [math], tools: {{allow: [add]}}}}
audit: {{arguments: full}}
mcp_servers:
  math: {{command: ["{{fake}}", "--tools", "add,echo"]}}
"#,
        hash = sha256_hex(b"ci-s3cret")
    ));
    let journal = journal_of(&hangar);
    let call = |tool: &str| {
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let arguments = json!({"calls": [{"mcp_server": "math", "tool": tool, "arguments": {"text": "hi"}}]});
        let params = json!({"name": "hangar_call", "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }});
        let request = agent
            .post(format!("{}/mcp", hangar.base))
            .header("Authorization", "Bearer ci-s3cret")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", MODERN)
            .header("Mcp-Method", "tools/call")
            .header("Mcp-Name", "hangar_call");
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
        assert_eq!(request.send_json(body).unwrap().status().as_u16(), 200);
    };
    call("echo");
    let refused =
        wait_for(&journal, "the refused call's entry", |all| audit_of(all, "tools/call", Some("echo")).cloned());
    assert_eq!(refused["identity"], "ci-bot");
    assert_eq!(refused["profile"], "ci");
    assert_eq!((&refused["outcome"], &refused["error_type"]), (&json!("error"), &json!("forbidden")));
    assert_eq!(refused["arguments"], json!({"text": "hi"}), "audit.arguments: full keeps them as sent");
    let logs = ureq::Agent::from(ureq::Agent::config_builder().http_status_as_error(false).build())
        .get(format!("{}/api/mcp_servers/math/logs", hangar.base))
        .header("X-API-Key", "ci-s3cret")
        .call()
        .unwrap();
    assert_eq!(logs.status().as_u16(), 403);
    let logs = wait_for(&journal, "the refused log read's entry", |all| audit_of(all, "logs", None).cloned());
    assert_eq!((&logs["identity"], &logs["error_type"]), (&json!("ci-bot"), &json!("forbidden")), "{logs}");
    let log = std::fs::read(&journal).unwrap();
    assert!(!log.windows(9).any(|w| w == b"ci-s3cret"), "a key never reaches the journal");
}

#[test]
fn with_audit_off_calls_are_not_recorded_and_the_rest_is() {
    let hangar = Hangar::start(&CONFIG.replace("audit: {arguments: digest}", "audit: {enabled: false}"));
    let journal = journal_of(&hangar);
    assert_eq!(hangar.tool("add", json!({"a": 1, "b": 2}))["isError"], false);
    assert_eq!(hangar.post("/api/mcp_servers/math/stop", None).status, 200);
    let all = wait_for(&journal, "the stop's entries", |all| {
        all.iter().any(|e| e["kind"] == "state" && e["to"] == "cold").then(|| all.to_vec())
    });
    assert!(all.iter().any(|e| e["kind"] == "action"), "{all:#?}");
    assert!(all.iter().all(|e| e["kind"] != "audit"), "{all:#?}");
}

/// `printf %s TEXT | sha256sum`.
fn sha256_hex(text: &[u8]) -> String {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new("sha256sum").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(text).unwrap();
    let out = child.wait_with_output().unwrap();
    format!("sha256:{}", String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap())
}
