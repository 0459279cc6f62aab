#![allow(clippy::unwrap_used)]

use axum::http::HeaderValue;
use serde_json::json;

use super::*;
use crate::testing::FakeSupervisor;

fn app() -> Calling {
    crate::testing::calling(FakeSupervisor::new())
}

fn with_session(id: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(HEADER_SESSION_ID, HeaderValue::from_str(id).unwrap());
    headers
}

fn initialize_body(version: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
           "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
}

#[tokio::test]
async fn initialize_negotiates_and_mints_a_session() {
    for (asked, answered) in [
        ("2024-11-05", "2024-11-05"),
        ("2025-06-18", "2025-06-18"),
        ("1999-01-01", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
    ] {
        let reply = handle(&app(), &HeaderMap::new(), initialize_body(asked).into()).await;
        assert_eq!(reply.status, StatusCode::OK);
        let result = &reply.body_json().unwrap()["result"].clone();
        assert_eq!(result["protocolVersion"], answered, "asked {asked}");
        assert_eq!(result["serverInfo"]["name"], "hangar");
        assert_eq!(
            result["capabilities"],
            json!({"tools": {"listChanged": false}, "prompts": {"listChanged": false}, "resources": {"listChanged": false, "subscribe": true}})
        );
        let session = reply.session_id.unwrap();
        assert_eq!(session::parse(&session), Some(answered));
    }
}

#[tokio::test]
async fn requests_need_a_session_of_our_shape() {
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let reply = handle(&app(), &HeaderMap::new(), ping.clone().into()).await;
    assert_eq!((reply.status, reply.error_code()), (StatusCode::BAD_REQUEST, Some(-32600)));
    assert!(reply.body_json().unwrap()["error"]["message"].as_str().unwrap().contains("missing session"));

    let reply = handle(&app(), &with_session("made-up"), ping.clone().into()).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);

    // A session minted by any instance works on this one: nothing is stored.
    let reply = handle(&app(), &with_session(&session::mint("2025-06-18")), ping.into()).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.body_json().unwrap()["result"], json!({}));
}

#[tokio::test]
async fn notifications_are_accepted_and_unknown_methods_are_errors() {
    let session = with_session(&session::mint("2025-11-25"));
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(handle(&app(), &session, note.into()).await.status, StatusCode::ACCEPTED);
    let unknown = json!({"jsonrpc": "2.0", "id": "x", "method": "widgets/list"});
    let reply = handle(&app(), &session, unknown.into()).await;
    assert_eq!((reply.status, reply.error_code()), (StatusCode::OK, Some(-32601)));
    assert_eq!(reply.body_json().unwrap()["id"], "x");
}

#[tokio::test]
async fn legacy_results_carry_no_modern_fields() {
    let session = with_session(&session::mint("2025-11-25"));
    let list = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"});
    let result = handle(&app(), &session, list.into()).await.body_json().unwrap()["result"].clone();
    assert_eq!(result["tools"].as_array().unwrap().len(), 8);
    assert!(result.get("resultType").is_none() && result.get("ttlMs").is_none());

    let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "hangar_health", "arguments": {}}});
    let result = handle(&app(), &session, call.into()).await.body_json().unwrap()["result"].clone();
    assert_eq!(result["structuredContent"]["status"], "degraded");
    assert!(result.get("resultType").is_none());
}

#[tokio::test]
async fn an_unknown_protocol_version_header_is_refused() {
    let mut headers = with_session(&session::mint("2025-11-25"));
    headers.insert("mcp-protocol-version", HeaderValue::from_static("1999-01-01"));
    let reply = handle(&app(), &headers, json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).into()).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
}
