#![allow(clippy::unwrap_used)]

use axum::body::Body;
use axum::http::Request as HttpRequest;
use serde_json::json;

use super::*;
use crate::body::BODY_LIMIT;
use crate::testing::{FakeSupervisor, app_with, json_of, send};

fn mcp_post(body: &str, extra: &[(&str, &str)]) -> HttpRequest<Body> {
    let mut builder = HttpRequest::post("/mcp")
        .header("host", "127.0.0.1:8000")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (name, value) in extra {
        builder = builder.header(*name, *value);
    }
    let mut request = builder.body(Body::from(body.to_owned())).unwrap();
    // An extra Host replaces the default one rather than repeating it.
    if let Some((_, host)) = extra.iter().find(|(name, _)| *name == "host") {
        request.headers_mut().insert("host", axum::http::HeaderValue::from_str(host).unwrap());
    }
    request
}

fn modern_headers(method: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![("mcp-protocol-version", "2026-07-28"), ("mcp-method", method)]
}

const MODERN_LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{
    "io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

#[tokio::test]
async fn a_modern_request_gets_a_json_answer() {
    let app = app_with(FakeSupervisor::new());
    let (status, headers, body) = send(&app, mcp_post(MODERN_LIST, &modern_headers("tools/list"))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/json");
    assert!(!headers.contains_key("mcp-session-id"));
    assert_eq!(json_of(&body)["result"]["tools"][0]["name"], "hangar_list");
}

#[tokio::test]
async fn invalid_json_is_a_parse_error_with_a_null_id() {
    let app = app_with(FakeSupervisor::new());
    for extra in [modern_headers("tools/list"), vec![]] {
        let (status, _, body) = send(&app, mcp_post("{not json", &extra)).await;
        let body = json_of(&body);
        assert_eq!(
            (status, body["error"]["code"].clone(), body["id"].clone()),
            (StatusCode::BAD_REQUEST, json!(-32700), Value::Null)
        );
    }
}

#[tokio::test]
async fn batches_are_refused() {
    let app = app_with(FakeSupervisor::new());
    let (status, _, body) = send(&app, mcp_post(&format!("[{MODERN_LIST}]"), &modern_headers("tools/list"))).await;
    assert_eq!((status, json_of(&body)["error"]["code"].clone()), (StatusCode::BAD_REQUEST, json!(-32600)));
}

#[tokio::test]
async fn content_type_accept_host_and_origin_are_checked() {
    let app = app_with(FakeSupervisor::new());
    // The cross-site guard's refusals keep the JSON-RPC shape on /mcp.
    let request = HttpRequest::post("/mcp").header("content-type", "text/plain").body(Body::from(MODERN_LIST)).unwrap();
    let (status, _, body) = send(&app, request).await;
    let body = json_of(&body);
    assert_eq!((status, body["error"]["code"].clone()), (StatusCode::FORBIDDEN, json!(-32600)));
    assert!(body["error"]["message"].as_str().unwrap().contains("Content-Type: application/json"), "{body}");

    let request = HttpRequest::post("/mcp")
        .header("content-type", "application/json; charset=utf-8")
        .header("accept", "text/html")
        .body(Body::from(MODERN_LIST))
        .unwrap();
    assert_eq!(send(&app, request).await.0, StatusCode::NOT_ACCEPTABLE);

    let (status, _, body) = send(&app, mcp_post(MODERN_LIST, &[("origin", "https://evil.example.com")])).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(json_of(&body)["error"]["message"].as_str().unwrap().contains("origin not allowed"));

    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let request = HttpRequest::post("/mcp")
        .header("host", "evil.example.com")
        .header("content-type", "application/json")
        .body(Body::from(initialize))
        .unwrap();
    assert_eq!(send(&app, request).await.0, StatusCode::FORBIDDEN);
    let (status, headers, _) = send(&app, mcp_post(initialize, &[("host", "localhost:8000")])).await;
    assert_eq!(status, StatusCode::OK);
    assert!(session::parse(headers["mcp-session-id"].to_str().unwrap()).is_some());
}

#[tokio::test]
async fn get_and_delete_follow_the_session_rules() {
    let app = app_with(FakeSupervisor::new());
    let session = session::mint("2025-11-25");
    let request = |method: &str, session: Option<&str>| {
        let mut builder = HttpRequest::builder()
            .method(method)
            .uri("/mcp")
            .header("host", "localhost:8000")
            .header("content-type", "application/json");
        if let Some(id) = session {
            builder = builder.header("mcp-session-id", id);
        }
        builder.body(Body::empty()).unwrap()
    };
    let (status, headers, _) = send(&app, request("GET", None)).await;
    assert_eq!((status, headers["allow"].to_str().unwrap()), (StatusCode::METHOD_NOT_ALLOWED, "POST"));
    // A session's GET opens its event stream (read only its head: it stays open).
    let stream = tower::ServiceExt::oneshot(app.clone(), request("GET", Some(&session))).await.unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    assert_eq!(send(&app, request("GET", Some("stale"))).await.0, StatusCode::NOT_FOUND);
    let (status, headers, _) = send(&app, request("DELETE", None)).await;
    assert_eq!((status, headers["allow"].to_str().unwrap()), (StatusCode::METHOD_NOT_ALLOWED, "POST"));
    assert_eq!(send(&app, request("DELETE", Some(&session))).await.0, StatusCode::OK);
    assert_eq!(send(&app, request("DELETE", Some("stale"))).await.0, StatusCode::NOT_FOUND);
    let (status, headers, _) = send(&app, request("PUT", None)).await;
    assert_eq!((status, headers["allow"].to_str().unwrap()), (StatusCode::METHOD_NOT_ALLOWED, "POST"));
}

#[tokio::test]
async fn notifications_get_202_and_no_body() {
    let app = app_with(FakeSupervisor::new());
    let session = session::mint("2025-11-25");
    let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let (status, _, body) = send(&app, mcp_post(note, &[("mcp-session-id", &session)])).await;
    assert_eq!((status, body.as_str()), (StatusCode::ACCEPTED, ""));
}

#[tokio::test]
async fn an_oversized_body_is_413() {
    let app = app_with(FakeSupervisor::new());
    let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(BODY_LIMIT));
    let (status, _, body) = send(&app, mcp_post(&big, &modern_headers("tools/list"))).await;
    assert_eq!((status, json_of(&body)["error"]["code"].clone()), (StatusCode::PAYLOAD_TOO_LARGE, json!(-32600)));
}

#[test]
fn accept_ranges() {
    let with = |value: &'static str| {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT, axum::http::HeaderValue::from_static(value));
        h
    };
    assert!(accepts_json(&HeaderMap::new()));
    assert!(accepts_json(&with("application/json, text/event-stream")));
    assert!(accepts_json(&with("text/event-stream")));
    assert!(accepts_json(&with("*/*;q=0.8")));
    assert!(!accepts_json(&with("text/html")));
}
