//! What a view lists of the hangar's own tools (issue 29, section 9). A non-admin never sees the
//! admin tools (`hangar_start`, `hangar_stop`); in `front_door` mode the `hangar_*` tools follow
//! the profile's `tools` globs like any other name, so `allow: [add]` lists `add` alone. A tool
//! a view does not list is `forbidden` when called, as a denied upstream tool is, whichever way
//! the call comes (plain, or streamed to a client that asked for progress); a non-admin's call
//! of an admin tool is refused by the supervisor, on record in the audit trail. Admins see and
//! use them all.

use hangar_tests::key_hash;
use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, MODERN};

use super::tasks::mcp;

const DEV: &str = "dev-key-0123456789";
const CI: &str = "ci-key-0123456789";
const ADMIN: &str = "admin-key-0123456789";

/// Every hangar tool, in the order `tools/list` shows them.
const EVERY: [&str; 8] = hangar_core::policy::OWN_TOOLS;

/// A hangar in `mode` (`egress` or `front_door`) with a developer (every tool but `*delete*`),
/// a CI bot (`add` only) and an admin; `math` serves `add` and `echo`.
fn hangar(mode: &str) -> Hangar {
    Hangar::start(&format!(
        r#"
tool_access: {{mode: {mode}}}
auth:
  api_keys:
    - {{name: dev, hash: "{}", profile: dev}}
    - {{name: ci-bot, hash: "{}", profile: ci}}
    - {{name: admin, hash: "{}", profile: admin}}
profiles:
  dev: {{servers: [math], tools: {{allow: ["*"], deny: ["*delete*"]}}}}
  ci: {{servers: [math], tools: {{allow: [add]}}}}
  admin: {{servers: ["*"], admin: true}}
mcp_servers:
  math: {{command: ["{{fake}}", "--tools", "add,echo"]}}
"#,
        key_hash(DEV),
        key_hash(CI),
        key_hash(ADMIN),
    ))
}

/// The names `key`'s holder sees in `tools/list`.
fn listed(hangar: &Hangar, key: &str) -> Vec<String> {
    let (status, body) = mcp(&hangar.base, key, "tools/list", json!({}), false);
    assert_eq!(status, 200, "{body}");
    let tools = body["result"]["tools"].as_array().cloned().unwrap_or_default();
    tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
}

fn own(names: &[String]) -> Vec<&str> {
    names.iter().map(String::as_str).filter(|n| n.starts_with("hangar_")).collect()
}

/// A call of `tool` as `key`'s holder (streamed when `progress`): the JSON-RPC answer.
fn call(hangar: &Hangar, key: &str, tool: &str, arguments: Value, progress: bool) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    if progress {
        meta["progressToken"] = json!("p1");
    }
    let params = json!({"name": tool, "arguments": arguments, "_meta": meta});
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    let mut response = agent
        .post(&format!("{}/mcp", hangar.base))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", MODERN)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", tool)
        .header("X-API-Key", key)
        .send(body.to_string().as_bytes())
        .unwrap();
    let text = response.body_mut().read_to_string().unwrap();
    // A JSON answer, or the last `data:` of an event stream (the result after any notices).
    let data = text.lines().filter_map(|l| l.strip_prefix("data: ")).next_back().unwrap_or(&text).to_owned();
    hangar_tests::serde_json::from_str(&data).unwrap_or(Value::String(text))
}

fn assert_forbidden(answer: &Value, tool: &str) {
    assert_eq!(answer["result"]["isError"], true, "{tool}: {answer}");
    assert_eq!(answer["result"]["structuredContent"]["error_type"], "forbidden", "{tool}: {answer}");
}

#[test]
fn a_non_admin_never_lists_or_calls_the_admin_tools() {
    let hangar = hangar("egress");
    assert_eq!(own(&listed(&hangar, ADMIN)), EVERY, "an admin lists every hangar tool");
    let dev = listed(&hangar, DEV);
    assert_eq!(own(&dev), &EVERY[..5].iter().chain(&EVERY[7..]).copied().collect::<Vec<_>>()[..]);
    // In egress mode the globs judge upstream tools only: the CI bot lists the same.
    assert_eq!(own(&listed(&hangar, CI)), own(&dev));
    for key in [DEV, CI] {
        for tool in ["hangar_start", "hangar_stop"] {
            assert_forbidden(&call(&hangar, key, tool, json!({"mcp_server": "math"}), false), tool);
        }
    }
    let nope = call(&hangar, DEV, "hangar_nope", json!({}), false);
    assert_eq!(nope["error"]["message"], "Unknown tool: hangar_nope", "{nope}");
    let started = call(&hangar, ADMIN, "hangar_start", json!({"mcp_server": "math"}), false);
    assert_eq!(started["result"]["isError"], false, "{started}");
    let listed_by_ci = call(&hangar, CI, "hangar_list", json!({}), false);
    assert_eq!(listed_by_ci["result"]["isError"], false, "{listed_by_ci}");
}

#[test]
fn in_front_door_mode_the_hangar_tools_follow_the_profiles_globs() {
    let hangar = hangar("front_door");
    assert_eq!(listed(&hangar, CI), ["add"], "allow: [add] lists add alone");
    let dev = listed(&hangar, DEV);
    assert_eq!(
        own(&dev),
        ["hangar_list", "hangar_status", "hangar_health", "hangar_details", "hangar_tools", "hangar_call"]
    );
    assert!(dev.contains(&"add".to_owned()) && dev.contains(&"echo".to_owned()), "{dev:?}");
    assert_eq!(own(&listed(&hangar, ADMIN)), EVERY);

    // What the CI bot does not list it cannot call, plain or streamed.
    for tool in ["hangar_list", "hangar_status", "hangar_start"] {
        assert_forbidden(&call(&hangar, CI, tool, json!({"mcp_server": "math"}), false), tool);
    }
    let batch = json!({"calls": [{"mcp_server": "math", "tool": "add", "arguments": {"a": 1, "b": 2}}]});
    assert_forbidden(&call(&hangar, CI, "hangar_call", batch.clone(), false), "hangar_call");
    assert_forbidden(&call(&hangar, CI, "hangar_call", batch.clone(), true), "hangar_call");
    let added = call(&hangar, CI, "add", json!({"a": 1, "b": 2}), false);
    assert_eq!(added["result"]["isError"], false, "its own tool works: {added}");
    let by_dev = call(&hangar, DEV, "hangar_call", batch, true);
    assert_eq!(by_dev["result"]["structuredContent"]["succeeded"], 1, "{by_dev}");
}
