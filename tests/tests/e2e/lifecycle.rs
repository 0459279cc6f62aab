//! A user's first session: every server listed cold, one started, its tool called through the
//! gateway, and REST and MCP telling the same story about it.

use std::time::Duration;

use hangar_tests::{Hangar, poll, serde_json::json};

const CONFIG: &str = r#"
mcp_servers:
  math:
    command: ["{fake}", "--tools", "add,echo"]
  words:
    command: ["{fake}", "--tools", "echo"]
  legacy:
    command: ["{fake}", "--legacy", "--tools", "add"]
"#;

#[test]
fn servers_start_cold_and_a_call_through_the_gateway_adds() {
    let hangar = Hangar::start(CONFIG);

    let listed = hangar.get("/api/mcp_servers");
    assert_eq!(listed.status, 200);
    let servers = listed.body["mcp_servers"].as_array().unwrap();
    let ids: Vec<_> = servers.iter().map(|s| s["mcp_server_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["math", "words", "legacy"], "config order");
    for server in servers {
        assert_eq!(server["state"], "cold", "{server}");
        assert_eq!(server["alive"], false);
        assert_eq!(server["dead"], json!(null));
    }
    assert_eq!(hangar.get("/api/mcp_servers/").body, listed.body, "trailing slash answers too");

    let started = hangar.tool_ok("hangar_start", json!({"mcp_server": "math"}));
    assert_eq!(started, json!({"mcp_server": "math", "state": "ready", "tools": ["add", "echo"]}));

    let batch = hangar.tool_ok(
        "hangar_call",
        json!({"calls": [{"mcp_server": "math", "tool": "add", "arguments": {"a": 2, "b": 3}}]}),
    );
    assert_eq!(batch["success"], true, "{batch}");
    assert_eq!(
        (batch["total"].as_u64(), batch["succeeded"].as_u64(), batch["failed"].as_u64()),
        (Some(1), Some(1), Some(0))
    );
    let result = &batch["results"][0];
    assert_eq!(result["index"], 0);
    assert_eq!(result["success"], true);
    assert_eq!(result["result"]["structuredContent"], json!({"result": 5}));
    assert_eq!(result["result"]["content"][0]["text"], "5");

    let details = hangar.details("math");
    assert_eq!(details["state"], "ready");
    assert_eq!(details["health"]["total_invocations"], 1);
    let tool_names: Vec<_> = details["tools"].as_array().unwrap().iter().map(|t| t["name"].clone()).collect();
    assert_eq!(tool_names, [json!("add"), json!("echo")]);
}

#[test]
fn rest_and_mcp_show_the_same_record() {
    let hangar = Hangar::start(CONFIG);
    let started = hangar.post("/api/mcp_servers/words/start", None);
    assert_eq!(started.status, 200, "{}", started.text);
    assert_eq!(started.body["state"], "ready");

    // Fields like counters are stable while nothing calls, so the records must match exactly.
    let rest_details = hangar.details("words");
    let mcp_details = hangar.tool_ok("hangar_details", json!({"mcp_server": "words"}));
    assert_eq!(rest_details, mcp_details);

    let rest_list = hangar.get("/api/mcp_servers").body;
    let mcp_list = hangar.tool_ok("hangar_list", json!({}));
    assert_eq!(rest_list, mcp_list);

    let rest_tools = hangar.get("/api/mcp_servers/words/tools").body;
    let mcp_tools = hangar.tool_ok("hangar_tools", json!({"mcp_server": "words"}));
    assert_eq!(rest_tools, mcp_tools);
    assert!(rest_tools["tools"][0]["digest"].as_str().unwrap().starts_with("sha256:"));

    let status = hangar.tool_ok("hangar_status", json!({}));
    let entry = status["mcp_servers"].as_array().unwrap().iter().find(|e| e["id"] == "words").unwrap().clone();
    assert_eq!((entry["indicator"].as_str(), entry["state"].as_str()), (Some("[READY]"), Some("ready")));
    assert_eq!(status["summary"]["ready"], 1);
    assert_eq!(status["summary"]["cold"], 2);
}

#[test]
fn a_cold_server_starts_on_its_first_call_and_stops_on_request() {
    let hangar = Hangar::start(CONFIG);
    let batch = hangar.tool_ok(
        "hangar_call",
        json!({"calls": [{"mcp_server": "legacy", "tool": "add", "arguments": {"a": 40, "b": 2}}]}),
    );
    assert_eq!(batch["results"][0]["result"]["structuredContent"], json!({"result": 42}), "{batch}");
    assert_eq!(hangar.details("legacy")["state"], "ready");

    let stopped = hangar.post("/api/mcp_servers/legacy/stop", None);
    assert_eq!(stopped.body, json!({"stopped": "legacy", "reason": "user_request"}));
    let details = hangar.details("legacy");
    assert_eq!((details["state"].as_str(), details["alive"].as_bool()), (Some("cold"), Some(false)));
    assert_eq!(details["dead"], json!(null), "a stopped server is cold, not dead");
}

#[test]
fn concurrent_starts_share_one_spawn() {
    let hangar = Hangar::start(CONFIG);
    std::thread::scope(|scope| {
        let handles: Vec<_> =
            (0..6).map(|_| scope.spawn(|| hangar.post("/api/mcp_servers/math/start", None))).collect();
        for handle in handles {
            let response = handle.join().unwrap();
            assert_eq!(response.status, 200, "{}", response.text);
            assert_eq!(response.body["state"], "ready");
        }
    });
    let details = hangar.details("math");
    assert_eq!(details["meta"]["restarts"], 0, "one spawn for six concurrent starts: {details}");
    let fakes = poll("the process count to settle", Duration::from_secs(5), || {
        let pid = details["meta"]["pid"].as_u64()?;
        hangar_tests::alive(pid as u32).then_some(pid)
    });
    assert!(fakes > 0);
}
