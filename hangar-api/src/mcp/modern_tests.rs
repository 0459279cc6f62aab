#![allow(clippy::unwrap_used)]

use axum::http::{HeaderName, HeaderValue};
use serde_json::json;

use super::*;
use crate::testing::FakeSupervisor;

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN_REVISION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    })
}

fn request(method: &str, mut params: Value) -> Value {
    params["_meta"] = meta();
    json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(HeaderName::from_bytes(name.as_bytes()).unwrap(), HeaderValue::from_str(value).unwrap());
    }
    map
}

fn good(method: &str) -> HeaderMap {
    headers(&[("MCP-Protocol-Version", MODERN_REVISION), ("Mcp-Method", method)])
}

fn refused(headers: &HeaderMap, body: Value) -> McpReply {
    match validate(headers, body.into()) {
        Err(reply) => reply,
        Ok(checked) => panic!("accepted: {checked:?}"),
    }
}

fn body_of(reply: &McpReply) -> Value {
    reply.body_json().unwrap()
}

#[test]
fn a_conformant_request_passes() {
    let checked = validate(&good("tools/list"), request("tools/list", json!({})).into()).unwrap();
    assert_eq!(
        checked,
        Checked::Request { id: json!(7).into(), method: "tools/list".into(), params: Some(json!({"_meta": meta()})) }
    );
}

#[test]
fn missing_meta_is_invalid_params() {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}});
    let reply = refused(&good("tools/list"), body);
    assert_eq!((reply.status, reply.error_code()), (StatusCode::BAD_REQUEST, Some(-32602)));
    assert_eq!(body_of(&reply)["id"], 7, "the id is echoed");

    let mut body = request("tools/list", json!({}));
    body["params"]["_meta"].as_object_mut().unwrap().remove("io.modelcontextprotocol/clientCapabilities");
    let reply = refused(&good("tools/list"), body);
    assert_eq!((reply.status, reply.error_code()), (StatusCode::BAD_REQUEST, Some(-32602)));
}

#[test]
fn an_unsupported_version_names_the_supported_ones() {
    let mut body = request("tools/list", json!({}));
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2030-01-01");
    let reply = refused(&headers(&[("MCP-Protocol-Version", "2030-01-01"), ("Mcp-Method", "tools/list")]), body);
    assert_eq!((reply.status, reply.error_code()), (StatusCode::BAD_REQUEST, Some(-32022)));
    assert_eq!(body_of(&reply)["error"]["data"], json!({"supported": ["2026-07-28"], "requested": "2030-01-01"}));
    assert_eq!(body_of(&reply)["id"], 7);
}

#[test]
fn a_version_header_contradicting_meta_is_a_mismatch_even_for_unknown_versions() {
    let mut body = request("server/discover", json!({}));
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    let reply = refused(&good("server/discover"), body.clone());
    assert_eq!((reply.status, reply.error_code()), (StatusCode::BAD_REQUEST, Some(-32020)));
    // Without the header, the unknown version is what is reported.
    let reply = refused(&headers(&[("Mcp-Method", "server/discover")]), body);
    assert_eq!(reply.error_code(), Some(-32022));
}

#[test]
fn header_mismatches_name_the_header() {
    let cases = [
        (headers(&[("Mcp-Method", "tools/list")]), "MCP-Protocol-Version"),
        (headers(&[("MCP-Protocol-Version", "2025-11-25"), ("Mcp-Method", "tools/list")]), "MCP-Protocol-Version"),
        (headers(&[("MCP-Protocol-Version", MODERN_REVISION)]), "Mcp-Method"),
        (headers(&[("MCP-Protocol-Version", MODERN_REVISION), ("Mcp-Method", "prompts/list")]), "Mcp-Method"),
        (headers(&[("MCP-Protocol-Version", MODERN_REVISION), ("Mcp-Method", "TOOLS/LIST")]), "Mcp-Method"),
        (
            headers(&[
                ("MCP-Protocol-Version", MODERN_REVISION),
                ("Mcp-Method", "tools/list"),
                ("Mcp-Method", "tools/list"),
            ]),
            "Mcp-Method",
        ),
    ];
    for (headers, named) in cases {
        let reply = refused(&headers, request("tools/list", json!({})));
        assert_eq!((reply.status, reply.error_code()), (StatusCode::BAD_REQUEST, Some(-32020)), "{headers:?}");
        let message = body_of(&reply)["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains(named), "{message} should name {named}");
    }
}

#[test]
fn header_names_are_case_insensitive_and_values_trimmed() {
    let headers = headers(&[("mcp-protocol-version", MODERN_REVISION), ("MCP-METHOD", "  tools/list  ")]);
    assert!(validate(&headers, request("tools/list", json!({})).into()).is_ok());
}

#[test]
fn mcp_name_must_mirror_the_tool_name() {
    let body = || request("tools/call", json!({"name": "hangar_list", "arguments": {}}));
    let with_name = |name: &str| {
        let mut h = good("tools/call");
        h.insert("mcp-name", HeaderValue::from_str(name).unwrap());
        h
    };
    assert!(validate(&with_name("hangar_list"), body().into()).is_ok());
    assert!(validate(&with_name("  hangar_list "), body().into()).is_ok());
    for wrong in ["wrong_tool_name", "HANGAR_LIST"] {
        assert_eq!(refused(&with_name(wrong), body()).error_code(), Some(-32020));
    }
    let missing = refused(&good("tools/call"), body());
    assert_eq!(missing.error_code(), Some(-32020));
    assert!(body_of(&missing)["error"]["message"].as_str().unwrap().contains("Mcp-Name"));
}

#[test]
fn mcp_name_is_base64_decoded_before_comparing() {
    let body = request("tools/call", json!({"name": "héllo wörld", "arguments": {}}));
    let mut h = good("tools/call");
    // "héllo wörld" in UTF-8, Base64-encoded.
    h.insert("mcp-name", HeaderValue::from_static("=?base64?aMOpbGxvIHfDtnJsZA==?="));
    assert!(validate(&h, body.clone().into()).is_ok());
    h.insert("mcp-name", HeaderValue::from_static("=?base64?aMOpbGxvIHfDtnJsZA?="));
    assert_eq!(refused(&h, body).error_code(), Some(-32020), "bad padding is malformed");

    let body = request("resources/read", json!({"uri": "test://static-text"}));
    let mut h = good("resources/read");
    h.insert("mcp-name", HeaderValue::from_static("=?base64?dGVzdDovL3N0YXRpYy10ZXh0?="));
    // The header checks pass (the front door serves the method itself).
    assert!(validate(&h, body.clone().into()).is_ok());
    h.insert("mcp-name", HeaderValue::from_static("=?base64?dGVzdDovL290aGVy?="));
    assert_eq!(refused(&h, body).error_code(), Some(-32020), "test://other is not the body's uri");
}

#[test]
fn unknown_and_removed_methods_are_not_found() {
    for method in ["initialize", "ping", "logging/setLevel", "resources/subscribe", "no/such"] {
        let reply = refused(&good(method), request(method, json!({})));
        assert_eq!((reply.status, reply.error_code()), (StatusCode::NOT_FOUND, Some(-32601)), "{method}");
        assert_eq!(body_of(&reply)["id"], 7);
    }
}

#[test]
fn batches_and_non_requests_are_invalid() {
    let reply = refused(&good("tools/list"), json!([request("tools/list", json!({}))]));
    assert_eq!((reply.status, reply.error_code()), (StatusCode::BAD_REQUEST, Some(-32600)));
    let reply = refused(&good("tools/list"), json!({"id": 1, "method": "tools/list"}));
    assert_eq!((reply.status, reply.error_code()), (StatusCode::BAD_REQUEST, Some(-32600)));
    assert_eq!(body_of(&reply)["id"], 1);
}

#[test]
fn notifications_are_accepted() {
    let body = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}});
    assert_eq!(validate(&good("notifications/cancelled"), body.into()).unwrap(), Checked::Notification);
}

#[test]
fn era_is_chosen_by_meta_or_header() {
    assert!(is_modern(&HeaderMap::new(), &request("tools/list", json!({}))));
    assert!(is_modern(&good("tools/list"), &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})));
    let legacy =
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}});
    assert!(!is_modern(&headers(&[("MCP-Protocol-Version", "2025-06-18")]), &legacy));
    assert!(!is_modern(&HeaderMap::new(), &json!([1, 2])));
}

fn app() -> Calling {
    crate::testing::calling(FakeSupervisor::new())
}

#[tokio::test]
async fn discover_lists_every_version_and_carries_server_info() {
    let reply = handle(&app(), &good("server/discover"), request("server/discover", json!({})).into()).await;
    assert_eq!(reply.status, StatusCode::OK);
    let result = &body_of(&reply)["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(
        result["supportedVersions"],
        json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
    );
    assert_eq!(
        result["capabilities"],
        json!({
            "tools": {"listChanged": false},
            "prompts": {"listChanged": false},
            "resources": {"listChanged": false},
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        })
    );
    assert_eq!((result["ttlMs"].clone(), result["cacheScope"].clone()), (json!(0), json!("public")));
    assert_eq!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "hangar");
    assert!(result["instructions"].is_string());
}

#[tokio::test]
async fn tools_list_is_cacheable_and_in_a_fixed_order() {
    let first = handle(&app(), &good("tools/list"), request("tools/list", json!({})).into()).await;
    let second = handle(&app(), &good("tools/list"), request("tools/list", json!({})).into()).await;
    let result = &body_of(&first)["result"];
    let names: Vec<&str> = result["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 8);
    assert_eq!(names[0], "hangar_list");
    assert_eq!(body_of(&first), body_of(&second));
    assert_eq!((result["resultType"].clone(), result["ttlMs"].clone()), (json!("complete"), json!(0)));
}

#[tokio::test]
async fn tools_call_results_are_complete_and_bad_calls_answer_200() {
    let mut h = good("tools/call");
    h.insert("mcp-name", HeaderValue::from_static("hangar_list"));
    let reply = handle(&app(), &h, request("tools/call", json!({"name": "hangar_list"})).into()).await;
    let result = &body_of(&reply)["result"];
    assert_eq!((reply.status, result["resultType"].clone()), (StatusCode::OK, json!("complete")));
    assert_eq!(result["isError"], false);
    assert_eq!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "hangar");

    h.insert("mcp-name", HeaderValue::from_static("nope"));
    let reply = handle(&app(), &h, request("tools/call", json!({"name": "nope"})).into()).await;
    assert_eq!((reply.status, reply.error_code()), (StatusCode::OK, Some(-32602)));
}
