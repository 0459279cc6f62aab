use serde_json::{Value, json};

use super::inputs::tests::ScriptedPeer;
use super::*;

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

fn send(server: &Server, id: i64, method: &str, params: Value) -> Value {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    server.handle(&msg, &ScriptedPeer::default()).unwrap_or(Value::Null)
}

#[test]
fn discover_declares_what_the_fixtures_serve() {
    let r = send(&Server::default(), 1, "server/discover", json!({"_meta": meta()}));
    assert_eq!(r["id"], 1);
    let result = &r["result"];
    assert_eq!(result["supportedVersions"], json!(["2026-07-28"]));
    for cap in ["tools", "prompts", "resources", "logging", "completions"] {
        assert!(result["capabilities"][cap].is_object(), "{cap}");
    }
    assert_eq!((result["resultType"].as_str(), result["ttlMs"].as_i64()), (Some("complete"), Some(0)));
    assert_eq!(result["cacheScope"], "public");
    assert_eq!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], SERVER_NAME);
}

#[test]
fn modern_results_carry_result_type_server_info_and_cache_hints_where_cacheable() {
    let s = Server::default();
    let listed = send(&s, 2, "resources/list", json!({"_meta": meta()}));
    assert_eq!(
        (listed["result"]["ttlMs"].as_i64(), listed["result"]["cacheScope"].as_str()),
        (Some(0), Some("public"))
    );
    let called = send(&s, 3, "tools/call", json!({"name": "test_simple_text", "_meta": meta()}));
    assert_eq!(called["result"]["resultType"], "complete");
    assert!(called["result"].get("ttlMs").is_none());
    assert!(called["result"]["_meta"]["io.modelcontextprotocol/serverInfo"].is_object());
    let asked = send(
        &s,
        4,
        "tools/call",
        json!({"name": "test_input_required_result_sampling",
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {"sampling": {}}}}),
    );
    assert_eq!(asked["result"]["resultType"], "input_required");
}

#[test]
fn legacy_results_stay_legacy() {
    let s = Server::default();
    let init = send(&s, 1, "initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {"sampling": {}}}));
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(init["result"]["capabilities"]["resources"]["subscribe"], true);
    assert!(init["result"]["capabilities"]["completions"].is_object());
    assert!(init["result"].get("resultType").is_none());
    let listed = send(&s, 2, "tools/list", json!({}));
    assert!(listed["result"].get("resultType").is_none() && listed["result"].get("ttlMs").is_none());
    assert_eq!(send(&s, 3, "ping", json!({}))["result"], json!({}));
    // The capabilities sent with initialize are what legacy tools rely on.
    let probe = send(&s, 4, "tools/call", json!({"name": "test_missing_capability"}));
    assert_eq!(probe["result"]["content"][0]["type"], "text");
}

#[test]
fn removed_methods_are_method_not_found_on_the_modern_wire() {
    let s = Server::default();
    for method in
        ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "unknown/method"]
    {
        let r = send(&s, 500, method, json!({"_meta": meta()}));
        assert_eq!((r["id"].as_i64(), r["error"]["code"].as_i64()), (Some(500), Some(-32601)), "{method}");
    }
}

#[test]
fn set_level_filters_legacy_log_messages() {
    let s = Server::default();
    assert_eq!(send(&s, 1, "logging/setLevel", json!({"level": "error"}))["result"], json!({}));
    assert_eq!(send(&s, 2, "logging/setLevel", json!({"level": "loud"}))["error"]["code"], -32602);
    let peer = ScriptedPeer::default();
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "test_tool_with_logging"}});
    assert!(s.handle(&call, &peer).is_some());
    assert!(peer.notes.lock().unwrap().is_empty());
}

#[test]
fn bad_messages_get_errors_and_notifications_nothing() {
    let s = Server::default();
    let peer = ScriptedPeer::default();
    assert_eq!(s.handle(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), &peer), None);
    assert_eq!(s.handle(&json!({"jsonrpc": "2.0", "id": "x", "result": {}}), &peer), None);
    assert_eq!(s.handle(&json!([1]), &peer).unwrap()["error"]["code"], -32600);
    assert_eq!(send(&s, 9, "tools/list", json!([1]))["error"]["code"], -32602);
    let bad_version = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "v999.0.0",
                                       "io.modelcontextprotocol/clientCapabilities": {}}});
    let r = send(&s, 10, "tools/list", bad_version);
    assert_eq!((r["error"]["code"].as_i64(), r["id"].as_i64()), (Some(-32022), Some(10)));
}
