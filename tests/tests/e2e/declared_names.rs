//! Only what an upstream declares can be called (issue 29, section 9): a profile denies
//! `*delete*`, the upstream declares `delete_all`, and a hostile client spells it otherwise
//! (`DELETE_ALL`, `Delete_All`, `files__DELETE_ALL`) to slip past the glob. Every such name is
//! the hangar's `Unknown tool` (a spelling the glob still matches, `delete_all `, is `forbidden`
//! first), through `hangar_call` and the front door alike, on a cold server
//! (the call starts it, and the name is judged once its list is known) and after its list
//! changes; none of them reaches the upstream (the fake says so in its log when one does).
//! Prompts likewise: a prompt name no upstream lists is `Unknown prompt`, never forwarded.

use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, key_hash, poll};

use super::tasks::mcp;

const DEV: &str = "dev-key-0123456789";
const ADMIN: &str = "admin-key-0123456789";

/// `files` declares `delete_all` and `echo` (`delete_all` and `wipe` once `{dir}/shift` exists);
/// `words` serves the conformance fixtures' prompts.
fn hangar() -> Hangar {
    Hangar::start(&format!(
        r#"
tool_access: {{mode: front_door}}
auth:
  api_keys:
    - {{name: dev, hash: "{}", profile: dev}}
    - {{name: admin, hash: "{}", profile: admin}}
profiles:
  dev: {{servers: [files, words], tools: {{allow: ["*"], deny: ["*delete*"]}}}}
  admin: {{servers: ["*"], admin: true}}
mcp_servers:
  files: {{command: ["{{fake}}", "--tools", "delete_all,echo", "--alt-tools", "delete_all,wipe", "--alt-tools-flag", "{{dir}}/shift"]}}
  words: {{command: ["{{fake}}", "--conformance"]}}
"#,
        key_hash(DEV),
        key_hash(ADMIN),
    ))
}

/// A one-call `hangar_call` as the dev key: (success, error_type, error).
fn hangar_call(hangar: &Hangar, tool: &str) -> (bool, String, String) {
    let call = json!({"name": "hangar_call", "arguments": {"calls": [{"mcp_server": "files", "tool": tool, "arguments": {}}]}});
    let (status, body) = mcp(&hangar.base, DEV, "tools/call", call, false);
    assert_eq!(status, 200, "{body}");
    let result = &body["result"]["structuredContent"]["results"][0];
    let text = |key: &str| result[key].as_str().unwrap_or_default().to_owned();
    (result["success"] == true, text("error_type"), text("error"))
}

/// A front-door call (or prompt) as the dev key: the JSON-RPC body.
fn front_door(hangar: &Hangar, method: &str, name: &str) -> Value {
    mcp(&hangar.base, DEV, method, json!({"name": name, "arguments": {}}), false).1
}

/// `GET path` as the admin key.
fn admin_get(hangar: &Hangar, path: &str) -> Value {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut response = agent.get(&format!("{}{path}", hangar.base)).header("X-API-Key", ADMIN).call().unwrap();
    assert_eq!(response.status().as_u16(), 200, "GET {path}");
    response.body_mut().read_json::<Value>().unwrap()
}

/// What the upstream `id` logged of names that reached it undeclared.
fn undeclared_at(hangar: &Hangar, id: &str) -> Vec<String> {
    let logs = admin_get(hangar, &format!("/api/mcp_servers/{id}/logs?lines=1000"));
    let lines = logs["logs"].as_array().cloned().unwrap_or_default();
    let contents = lines.iter().filter_map(|line| line["content"].as_str());
    contents.filter(|line| line.contains("undeclared")).map(str::to_owned).collect()
}

fn assert_unknown(what: &str, (success, error_type, error): (bool, String, String)) {
    assert!(!success, "{what} was called");
    assert_eq!(error_type, "unknown_tool", "{what}: {error}");
    assert!(error.starts_with("Unknown tool: "), "{what}: the hangar's words: {error}");
}

#[test]
fn names_the_upstream_never_declared_are_unknown_and_never_reach_it() {
    let hangar = hangar();
    assert_eq!(admin_get(&hangar, "/api/mcp_servers/files")["state"], "cold");
    // The first call starts the cold server; its name is judged once the list is known.
    assert_unknown("DELETE_ALL on a cold server", hangar_call(&hangar, "DELETE_ALL"));
    for spelling in ["Delete_All", "DELETE_all", "dElEtE_aLl"] {
        assert_unknown(spelling, hangar_call(&hangar, spelling));
    }
    // Spellings the glob still matches are judged by it first (nothing is started for them).
    for spelling in ["delete_all ", " delete_all", "delete_all\u{0}", "delete_all\n", "files__delete_all"] {
        let (success, error_type, error) = hangar_call(&hangar, spelling);
        assert!(!success && error_type == "forbidden", "{spelling:?}: {error_type} {error}");
    }
    let (_, denied, _) = hangar_call(&hangar, "delete_all");
    assert_eq!(denied, "forbidden", "the declared name is denied by the glob");
    assert!(hangar_call(&hangar, "echo").0, "a declared, allowed tool is called");

    // Through the front door: bare and qualified spellings.
    for name in ["DELETE_ALL", "files__DELETE_ALL", "files__Delete_all", "files__nope"] {
        let body = front_door(&hangar, "tools/call", name);
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(message, format!("Unknown tool: {name}"), "{name}: {body}");
    }
    let denied = front_door(&hangar, "tools/call", "files__delete_all");
    assert!(denied.to_string().contains("forbidden"), "the qualified declared name is denied: {denied}");

    // Prompts: only what `words` lists.
    let listed = front_door(&hangar, "prompts/get", "test_simple_prompt");
    assert!(listed["result"]["messages"].is_array(), "a listed prompt is served: {listed}");
    for name in ["words__nope", "words__TEST_SIMPLE_PROMPT", "TEST_SIMPLE_PROMPT"] {
        let body = front_door(&hangar, "prompts/get", name);
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(message, format!("Unknown prompt: {name}"), "{name}: {body}");
    }

    assert_eq!(undeclared_at(&hangar, "files"), Vec::<String>::new(), "no undeclared tool reached the upstream");
    assert_eq!(undeclared_at(&hangar, "words"), Vec::<String>::new(), "no undeclared prompt reached the upstream");
}

#[test]
fn what_is_declared_follows_the_upstreams_list_as_it_changes() {
    let hangar = hangar();
    assert!(hangar_call(&hangar, "echo").0);
    // The upstream drops `echo` and declares `wipe` (tools/list_changed).
    std::fs::write(hangar.path("shift"), "").unwrap();
    poll("the hangar to learn the new list", Duration::from_secs(15), || {
        let tools = admin_get(&hangar, "/api/mcp_servers/files")["tools"].to_string();
        tools.contains("wipe").then_some(())
    });
    assert!(hangar_call(&hangar, "wipe").0, "a newly declared tool is called");
    assert_unknown("echo, no longer declared", hangar_call(&hangar, "echo"));
    let body = front_door(&hangar, "tools/call", "files__echo");
    assert_eq!(body["error"]["message"], "Unknown tool: files__echo", "{body}");
    assert_eq!(undeclared_at(&hangar, "files"), Vec::<String>::new(), "no undeclared tool reached the upstream");
}
