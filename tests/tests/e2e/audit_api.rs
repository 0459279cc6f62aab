//! Reading the audit trail: `GET /api/audit` shows who called what and how it ended, filters and
//! pages by cursor, exports JSON Lines; a non-admin sees only its own calls to its own servers
//! (and on `/api/events` no audit events, nothing about others' servers); `hangar audit` prints
//! it, and follows it with `-f`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use hangar_tests::serde_json::{self, Value, json};
use hangar_tests::{Hangar, MODERN, bin, key_hash, poll};

use crate::events::EventStream;

const CI: &str = "ci-s3cret";
const ADMIN: &str = "alice-s3cret";

/// ci-bot may call `add` and `fail` on math; alice is an admin.
const CONFIG: &str = r#"
tool_access: {mode: front_door, names: always_qualified}
auth:
  api_keys:
    - {name: ci-bot, hash: "{ci}", profile: ci}
    - {name: alice, hash: "{admin}", profile: admin}
profiles:
  ci: {servers: [math], tools: {allow: [add, fail]}}
  admin: {servers: ["*"], admin: true}
mcp_servers:
  math: {command: ["{fake}", "--tools", "add,echo,fail"]}
  web: {command: ["{fake}", "--tools", "echo"]}
"#;

fn start() -> Hangar {
    Hangar::start(&CONFIG.replace("{ci}", &key_hash(CI)).replace("{admin}", &key_hash(ADMIN)))
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// GET `path` with `key`: (status, content type, body text).
fn get(hangar: &Hangar, key: Option<&str>, path: &str) -> (u16, String, String) {
    let mut request = agent().get(format!("{}{path}", hangar.base));
    if let Some(key) = key {
        request = request.header("X-API-Key", key);
    }
    let mut response = request.call().unwrap();
    let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    (response.status().as_u16(), content_type, response.body_mut().read_to_string().unwrap())
}

fn get_json(hangar: &Hangar, key: &str, path: &str) -> Value {
    let (status, _, text) = get(hangar, Some(key), path);
    assert_eq!(status, 200, "{path}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// A front-door tools/call as `key`; its JSON-RPC result.
fn call(hangar: &Hangar, key: &str, name: &str) -> Value {
    let params = json!({"name": name, "arguments": {"a": 1, "b": 2}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }});
    let mut response = agent()
        .post(format!("{}/mcp", hangar.base))
        .header("Authorization", format!("Bearer {key}"))
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", MODERN)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", name)
        .send_json(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}))
        .unwrap();
    serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap()
}

/// The calls every story starts from: ci-bot's add (ok), fail (is_error) and echo (forbidden),
/// then alice's web echo (ok). Returns the admin's view of the four entries, oldest first.
fn four_calls(hangar: &Hangar) -> Vec<Value> {
    assert_eq!(call(hangar, CI, "math__add")["result"]["isError"], false);
    assert_eq!(call(hangar, CI, "math__fail")["result"]["isError"], true);
    let forbidden = call(hangar, CI, "math__echo");
    assert!(forbidden.get("error").is_some() || forbidden["result"]["isError"] == true, "{forbidden}");
    assert_eq!(call(hangar, ADMIN, "web__echo")["result"]["isError"], false);
    poll("the four calls' entries", Duration::from_secs(10), || {
        let page = get_json(hangar, ADMIN, "/api/audit?outcome=ok&limit=1000");
        let calls = |page: &Value| -> Vec<Value> {
            page["entries"].as_array().unwrap().iter().filter(|e| e["method"] == "tools/call").cloned().collect()
        };
        let all = get_json(hangar, ADMIN, "/api/audit?limit=1000");
        (calls(&page).len() == 2).then(|| calls(&all)).filter(|all| all.len() == 4)
    })
}

fn summary(entry: &Value) -> (String, String, String, String, String) {
    let text = |key: &str| entry[key].as_str().unwrap_or("-").to_owned();
    let outcome = if entry["outcome"] == "error" { text("error_type") } else { text("outcome") };
    (text("identity"), text("profile"), text("mcp_server"), text("tool"), outcome)
}

fn ids(entries: &[Value]) -> Vec<u64> {
    entries.iter().map(|e| e["id"].as_u64().unwrap()).collect()
}

#[test]
fn the_audit_trail_names_who_called_what_and_how_it_ended_and_pages_by_cursor() {
    let hangar = start();
    let calls = four_calls(&hangar);
    let s = |a: &str, b: &str, c: &str, d: &str, e: &str| (a.into(), b.into(), c.into(), d.into(), e.into());
    assert_eq!(
        calls.iter().map(summary).collect::<Vec<_>>(),
        [
            s("ci-bot", "ci", "math", "add", "ok"),
            s("ci-bot", "ci", "math", "fail", "is_error"),
            s("ci-bot", "ci", "math", "echo", "forbidden"),
            s("alice", "admin", "web", "echo", "ok"),
        ],
        "{calls:#?}"
    );

    // Filters, each alone and together.
    let only = |query: &str| -> Vec<Value> {
        get_json(&hangar, ADMIN, &format!("/api/audit?limit=1000&{query}"))["entries"].as_array().unwrap().clone()
    };
    let call_ids = ids(&calls);
    assert_eq!(ids(&only("identity=ci-bot")), call_ids[..3]);
    assert_eq!(ids(&only("outcome=forbidden")), call_ids[2..3]);
    assert_eq!(ids(&only("outcome=error")), call_ids[2..3]);
    assert_eq!(ids(&only("outcome=is_error")), call_ids[1..2]);
    assert_eq!(ids(&only("mcp_server=web")), call_ids[3..]);
    assert_eq!(ids(&only("mcp_server=math&outcome=ok")), call_ids[..1]);
    assert!(only("identity=nobody").is_empty());

    // Pages of one, by cursor from the start: every entry once, in order, then nothing new.
    let everything = only("since=0");
    assert!(everything.len() >= 4, "{everything:#?}");
    let mut walked = Vec::new();
    let mut cursor = "0".to_owned();
    loop {
        let page = get_json(&hangar, ADMIN, &format!("/api/audit?since={cursor}&limit=1"));
        assert!(page["next"].is_string(), "the cursor is a string: {page}");
        let entries = page["entries"].as_array().unwrap();
        assert!(entries.len() <= 1);
        if entries.is_empty() {
            assert_eq!(page["next"], cursor.as_str(), "caught up: the cursor stays");
            break;
        }
        walked.extend(ids(entries));
        cursor = page["next"].as_str().unwrap().to_owned();
    }
    assert_eq!(walked, ids(&everything));
    // Without since: the newest, newest last.
    let newest = get_json(&hangar, ADMIN, "/api/audit?limit=2");
    assert_eq!(ids(newest["entries"].as_array().unwrap()), ids(&everything)[everything.len() - 2..]);

    // JSON Lines: the same entries, one object a line.
    let (status, content_type, text) = get(&hangar, Some(ADMIN), "/api/audit?format=jsonl");
    assert_eq!((status, content_type.as_str()), (200, "application/x-ndjson"), "{text}");
    let lines: Vec<Value> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines, everything);
    let (status, _, text) = get(&hangar, Some(ADMIN), "/api/audit?format=jsonl&identity=alice");
    assert_eq!((status, text.lines().count()), (200, 1), "{text}");

    // Bad parameters are refused in the envelope; no key, no trail.
    let (status, _, text) = get(&hangar, Some(ADMIN), "/api/audit?since=yesterday");
    assert_eq!(status, 400, "{text}");
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap()["error"]["code"], "InvalidArgument");
    assert_eq!(get(&hangar, Some(ADMIN), "/api/audit?limit=1001").0, 400);
    assert_eq!(get(&hangar, None, "/api/audit").0, 401);

    // The chart's counts: four calls, two not ok (admin actions aside).
    let rates = get_json(&hangar, ADMIN, "/api/audit/rates?minutes=5");
    let minutes = rates["minutes"].as_array().unwrap();
    assert_eq!(minutes.len(), 5, "{rates}");
    let sum = |key: &str| minutes.iter().map(|m| m[key].as_u64().unwrap()).sum::<u64>();
    assert_eq!((sum("calls"), sum("errors")), (everything.len() as u64, 2), "{rates}");
    assert_eq!(get(&hangar, Some(ADMIN), "/api/audit/rates?minutes=1441").0, 400);
}

#[test]
fn a_non_admin_sees_only_its_own_calls_to_its_own_servers_and_no_audit_events() {
    let hangar = start();
    let calls = four_calls(&hangar);
    let own = get_json(&hangar, CI, "/api/audit?limit=1000");
    let entries = own["entries"].as_array().unwrap();
    assert_eq!(ids(entries), ids(&calls[..3]), "{own}");
    assert!(get_json(&hangar, CI, "/api/audit?identity=alice")["entries"].as_array().unwrap().is_empty());
    assert!(get_json(&hangar, CI, "/api/audit?mcp_server=web")["entries"].as_array().unwrap().is_empty());
    let (_, _, jsonl) = get(&hangar, Some(CI), "/api/audit?format=jsonl");
    assert_eq!(jsonl.lines().count(), 3, "{jsonl}");
    let rates = get_json(&hangar, CI, "/api/audit/rates?minutes=5");
    let calls_seen: u64 = rates["minutes"].as_array().unwrap().iter().map(|m| m["calls"].as_u64().unwrap()).sum();
    assert_eq!(calls_seen, 3, "{rates}");

    // Events: the admin stops both servers; ci-bot hears of math only, and of no audit entry.
    for server in ["web", "math"] {
        let (status, _, text) = post(&hangar, ADMIN, &format!("/api/mcp_servers/{server}/stop"));
        assert_eq!(status, 200, "{text}");
    }
    let as_ci = EventStream::open(&hangar, "?since=0", &[("X-API-Key", CI)]);
    let seen = as_ci
        .until("math's stop", |e| e.kind == "state" && e.data["mcp_server_id"] == "math" && e.data["to"] == "cold");
    assert!(seen.iter().all(|e| e.kind != "audit"), "{seen:#?}");
    assert!(seen.iter().all(|e| e.data["mcp_server_id"] != "web" && e.data["mcp_server"] != "web"), "{seen:#?}");
    as_ci.close();
    let as_admin = EventStream::open(&hangar, "?since=0", &[("X-API-Key", ADMIN)]);
    let all = as_admin
        .until("math's stop", |e| e.kind == "state" && e.data["mcp_server_id"] == "math" && e.data["to"] == "cold");
    assert!(all.iter().any(|e| e.kind == "audit"), "{all:#?}");
    assert!(all.iter().any(|e| e.data["mcp_server_id"] == "web"), "{all:#?}");
    as_admin.close();
}

fn post(hangar: &Hangar, key: &str, path: &str) -> (u16, String, String) {
    let mut response = agent()
        .post(format!("{}{path}", hangar.base))
        .header("X-API-Key", key)
        .header("Content-Type", "application/json")
        .send_empty()
        .unwrap();
    (response.status().as_u16(), String::new(), response.body_mut().read_to_string().unwrap())
}

#[test]
fn hangar_audit_prints_the_trail_and_follows_it() {
    let hangar = start();
    let calls = four_calls(&hangar);
    let cli = |args: &[&str]| {
        Command::new(bin("hangar")).args(["--url", &hangar.base, "--api-key", ADMIN]).args(args).output().unwrap()
    };
    let out = cli(&["audit", "--json", "--identity", "ci-bot"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed: Vec<Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(printed, calls[..3]);
    let table = cli(&["audit", "--outcome", "forbidden"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.starts_with("TIME") && text.contains("ci-bot") && text.contains("echo (tools/call)"), "{text}");
    assert_eq!(text.lines().count(), 2, "the header and the one refusal: {text}");

    // -f: the newest entry first, then what comes next, until killed.
    let mut follow = Command::new(bin("hangar"))
        .args(["--url", &hangar.base, "--api-key", ADMIN, "audit", "-f", "--json", "-n", "1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = mpsc::channel();
    let stdout = follow.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let first: Value = serde_json::from_str(&lines.recv_timeout(Duration::from_secs(10)).unwrap()).unwrap();
    assert_eq!(first["id"], calls[3]["id"], "{first}");
    assert_eq!(call(&hangar, CI, "math__add")["result"]["isError"], false);
    let next: Value = serde_json::from_str(&lines.recv_timeout(Duration::from_secs(10)).unwrap()).unwrap();
    assert_eq!((next["identity"].as_str(), next["tool"].as_str()), (Some("ci-bot"), Some("add")), "{next}");
    assert!(next["id"].as_u64() > first["id"].as_u64());
    follow.kill().unwrap();
    follow.wait().unwrap();
}
