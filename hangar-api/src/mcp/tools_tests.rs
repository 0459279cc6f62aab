#![allow(clippy::unwrap_used)]

use hangar_core::record::StatusEntry;

use super::*;
use crate::testing::{FakeSupervisor, summary};

async fn run(fake: &std::sync::Arc<FakeSupervisor>, name: &str, arguments: Value) -> Result<Value, RpcError> {
    call(&crate::testing::as_anonymous(fake), name, Some(arguments)).await
}

#[test]
fn every_tool_declares_an_object_schema_and_a_description() {
    let tools = definitions();
    assert_eq!(tools.len(), OWN_TOOLS.len());
    for (tool, name) in tools.iter().zip(OWN_TOOLS) {
        assert_eq!(tool["name"], name);
        assert_eq!(tool["inputSchema"]["type"], "object");
        assert!(tool["inputSchema"]["properties"].is_object() && tool["inputSchema"]["required"].is_array());
        assert!(!tool["description"].as_str().unwrap().contains('\n'));
    }
}

#[tokio::test]
async fn results_carry_the_same_json_as_text_and_structured_content() {
    let fake = FakeSupervisor::new();
    let result = run(&fake, "hangar_list", json!({})).await.unwrap();
    assert_eq!(result["isError"], false);
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, result["structuredContent"]);
    assert_eq!(text["mcp_servers"], serde_json::to_value(&fake.servers).unwrap(), "records pass through unchanged");
}

#[tokio::test]
async fn list_filters_by_state_and_refuses_unknown_states() {
    let fake = FakeSupervisor::new();
    let result = run(&fake, "hangar_list", json!({"state_filter": "dead"})).await.unwrap();
    let servers = result["structuredContent"]["mcp_servers"].as_array().unwrap();
    assert_eq!(servers.len(), 1);
    assert_eq!(servers[0]["dead"]["reason"], "crashed");
    let err = run(&fake, "hangar_list", json!({"state_filter": "asleep"})).await.unwrap_err();
    assert_eq!(err.code, -32602);
    assert!(err.message.contains("state_filter"));
}

#[tokio::test]
async fn status_uses_the_core_rendering() {
    let fake = FakeSupervisor::new();
    let result = run(&fake, "hangar_status", json!({})).await.unwrap();
    let expected: Vec<StatusEntry> = fake.servers.iter().map(StatusEntry::from).collect();
    assert_eq!(result["structuredContent"]["mcp_servers"], serde_json::to_value(expected).unwrap());
    assert_eq!(
        result["structuredContent"]["summary"],
        json!({"total": 3, "cold": 1, "initializing": 0, "ready": 1, "degraded": 0, "dead": 1})
    );
}

#[tokio::test]
async fn health_reads_the_counts() {
    let healthy = FakeSupervisor::with_servers(vec![summary("a", State::Ready), summary("b", State::Cold)]);
    let result = run(&healthy, "hangar_health", json!({})).await.unwrap();
    assert_eq!(result["structuredContent"]["status"], "healthy");
    assert_eq!(result["structuredContent"]["supervisor"], "connected");
    let result = run(&FakeSupervisor::new(), "hangar_health", json!({})).await.unwrap();
    assert_eq!(result["structuredContent"]["status"], "degraded");
    let result = run(&FakeSupervisor::disconnected(), "hangar_health", json!({})).await.unwrap();
    assert_eq!(result["structuredContent"]["status"], "unhealthy");
    assert_eq!(result["isError"], false);
}

#[tokio::test]
async fn hangar_failures_are_error_results_in_hangar_words() {
    let fake = FakeSupervisor::new();
    let result = run(&fake, "hangar_details", json!({"mcp_server": "nope"})).await.unwrap();
    assert_eq!(result["isError"], true);
    assert_eq!(
        result["structuredContent"],
        json!({"error": "no MCP server with id `nope` is configured", "error_type": "not_found", "details": null})
    );
    let result = run(&fake, "hangar_start", json!({"mcp_server": "broken"})).await.unwrap();
    assert_eq!(result["structuredContent"]["error_type"], "retry_later");
    assert_eq!(result["structuredContent"]["details"]["retry_allowed_at"], "2026-11-29T23:20:27.822Z");
}

#[tokio::test]
async fn start_stop_tools_and_details_answer_like_rest() {
    let fake = FakeSupervisor::new();
    let started = run(&fake, "hangar_start", json!({"mcp_server": "web"})).await.unwrap();
    assert_eq!(started["structuredContent"], json!({"mcp_server": "web", "state": "ready", "tools": ["add"]}));
    let stopped = run(&fake, "hangar_stop", json!({"mcp_server": "math"})).await.unwrap();
    assert_eq!(stopped["structuredContent"], json!({"stopped": "math", "reason": "user_request"}));
    let tools = run(&fake, "hangar_tools", json!({"mcp_server": "math"})).await.unwrap();
    assert_eq!(tools["structuredContent"]["tools"][0]["digest"], "sha256:00");
    let details = run(&fake, "hangar_details", json!({"mcp_server": "broken"})).await.unwrap();
    assert_eq!(details["structuredContent"]["dead"], serde_json::to_value(&fake.servers[2].dead).unwrap());
}

#[tokio::test]
async fn bad_arguments_and_unknown_tools_are_invalid_params() {
    let fake = FakeSupervisor::new();
    for (name, args, named) in [
        ("hangar_details", json!({}), "mcp_server"),
        ("hangar_start", json!({"mcp_server": 5}), "mcp_server"),
        ("hangar_stop", json!("math"), "arguments"),
        ("hangar_nope", json!({}), "hangar_nope"),
    ] {
        let err = run(&fake, name, args).await.unwrap_err();
        assert_eq!(err.code, -32602);
        assert!(err.message.contains(named), "{} should name {named}", err.message);
    }
}

#[tokio::test]
async fn hangar_call_reports_the_batch() {
    let fake = FakeSupervisor::new();
    let args = json!({"calls": [
        {"mcp_server": "math", "tool": "add", "arguments": {"a": 1}, "timeout": 3},
        {"mcp_server": "nope", "tool": "add"},
    ]});
    let result = run(&fake, "hangar_call", args).await.unwrap();
    let report = &result["structuredContent"];
    assert_eq!(
        (report["total"].clone(), report["succeeded"].clone(), report["success"].clone()),
        (json!(2), json!(1), json!(false))
    );
    assert_eq!(report["results"][1]["error_type"], "not_found");
    assert!(report["batch_id"].is_string() && report["elapsed_ms"].is_u64());
    let forwarded = fake.requests.lock().unwrap().clone();
    assert!(forwarded.contains(&hangar_core::ipc::Request::Call(Box::new(hangar_core::ipc::CallSpec::one(
        hangar_core::ipc::Target::tool("math", "add"),
        json!({"a": 1}),
        Some(3000),
    )))));
}
