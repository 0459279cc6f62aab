#![allow(clippy::unwrap_used)]

use axum::body::Body;
use axum::http::Request as HttpRequest;
use serde_json::{Value, json};

use super::*;
use crate::testing::{FakeSupervisor, app_with, json_of, send};

fn get(uri: &str) -> HttpRequest<Body> {
    HttpRequest::get(uri).body(Body::empty()).unwrap()
}

fn post(uri: &str) -> HttpRequest<Body> {
    HttpRequest::post(uri).header("content-type", "application/json").body(Body::empty()).unwrap()
}

fn assert_envelope(body: &str, code: &str) -> Value {
    let body = json_of(body);
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(body["error"]["message"].is_string());
    assert!(body["error"].as_object().unwrap().contains_key("details"));
    body
}

#[test]
fn lines_defaults_to_100_and_must_be_in_range() {
    assert_eq!(parse_lines(None).unwrap(), 100);
    assert_eq!(parse_lines(Some("1")).unwrap(), 1);
    assert_eq!(parse_lines(Some("1000")).unwrap(), 1000);
    for bad in ["0", "1001", "abc", "", "-5", "2.5"] {
        let err = parse_lines(Some(bad)).unwrap_err();
        assert_eq!((err.status, err.code), (StatusCode::BAD_REQUEST, "InvalidArgument"), "{bad}");
    }
}

#[tokio::test]
async fn list_answers_on_both_paths_with_records_unchanged() {
    let fake = FakeSupervisor::new();
    let app = app_with(fake.clone());
    for uri in ["/api/mcp_servers", "/api/mcp_servers/"] {
        let (status, _, body) = send(&app, get(uri)).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(json_of(&body), json!({"mcp_servers": serde_json::to_value(&fake.servers).unwrap()}));
    }
}

#[tokio::test]
async fn details_start_stop_tools_and_logs() {
    let app = app_with(FakeSupervisor::new());
    let (status, _, body) = send(&app, get("/api/mcp_servers/broken")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json_of(&body)["dead"]["revived_by"], "call_or_start");

    let (status, _, body) = send(&app, post("/api/mcp_servers/web/start")).await;
    assert_eq!(
        (status, json_of(&body)),
        (StatusCode::OK, json!({"mcp_server": "web", "state": "ready", "tools": ["add"]}))
    );
    let (_, _, body) = send(&app, post("/api/mcp_servers/math/stop")).await;
    assert_eq!(json_of(&body), json!({"stopped": "math", "reason": "user_request"}));
    let (_, _, body) = send(&app, get("/api/mcp_servers/math/tools")).await;
    assert_eq!(json_of(&body)["tools"][0]["name"], "add");

    let (status, _, body) = send(&app, get("/api/mcp_servers/math/logs?lines=2")).await;
    let body = json_of(&body);
    assert_eq!(
        (status, body["count"].clone(), body["mcp_server_id"].clone()),
        (StatusCode::OK, json!(2), json!("math"))
    );
    assert_eq!(body["logs"][0]["stream"], "stderr");
}

#[tokio::test]
async fn supervisor_errors_keep_their_status_and_code() {
    let app = app_with(FakeSupervisor::new());
    let (status, _, body) = send(&app, get("/api/mcp_servers/nope")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_envelope(&body, "McpServerNotFound");
    let (status, _, body) = send(&app, post("/api/mcp_servers/broken/start")).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let body = assert_envelope(&body, "RetryLater");
    assert_eq!(body["error"]["details"]["retry_allowed_at"], "2026-11-29T23:20:27.822Z");

    let app = app_with(FakeSupervisor::disconnected());
    let (status, _, body) = send(&app, get("/api/mcp_servers")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_envelope(&body, "SupervisorUnavailable");
}

#[tokio::test]
async fn bad_queries_unknown_routes_and_methods_get_envelopes() {
    let app = app_with(FakeSupervisor::new());
    for uri in [
        "/api/mcp_servers/math/logs?lines=abc",
        "/api/mcp_servers/math/logs?lines=0",
        "/api/mcp_servers/math/logs?lines=1001",
    ] {
        let (status, _, body) = send(&app, get(uri)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}");
        assert_envelope(&body, "InvalidArgument");
    }
    let (status, _, body) = send(&app, get("/api/nothing/here")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_envelope(&body, "NotFound");
    let (status, headers, body) = send(&app, get("/api/mcp_servers/math/start")).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(headers["allow"], "POST");
    assert_envelope(&body, "MethodNotAllowed");
    let (status, _, body) = send(&app, get("/api/mcp_servers/%FF")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_envelope(&body, "InvalidArgument");
}

#[tokio::test]
async fn an_oversized_body_is_refused_with_an_envelope() {
    let app = app_with(FakeSupervisor::new());
    let request = HttpRequest::post("/api/mcp_servers/math/start")
        .header("content-type", "application/json")
        .header("content-length", (crate::body::BODY_LIMIT + 1).to_string())
        .body(Body::from(vec![b' '; crate::body::BODY_LIMIT + 1]))
        .unwrap();
    let (status, _, body) = send(&app, request).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_envelope(&body, "PayloadTooLarge");
}

#[tokio::test]
async fn health_probes() {
    let (status, _, body) = send(&app_with(FakeSupervisor::new()), get("/health/live")).await;
    assert_eq!((status, json_of(&body)), (StatusCode::OK, json!({"status": "alive"})));
    let (status, _, body) = send(&app_with(FakeSupervisor::new()), get("/health/ready")).await;
    assert_eq!((status, json_of(&body)), (StatusCode::OK, json!({"status": "ready"})));
    let (status, _, body) = send(&app_with(FakeSupervisor::disconnected()), get("/health/ready")).await;
    assert_eq!(
        (status, json_of(&body)),
        (StatusCode::SERVICE_UNAVAILABLE, json!({"status": "not_ready", "reason": "supervisor unreachable"}))
    );
}

#[tokio::test]
async fn a_chunked_body_over_the_limit_is_refused_before_the_handler_runs() {
    let fake = FakeSupervisor::new();
    let app = app_with(fake.clone());
    // No declared length: 20 chunks of 64 KiB, over the 1 MiB limit on the 17th.
    let chunks = (0..20).map(|_| Ok::<_, std::io::Error>(vec![b' '; 64 << 10]));
    let request = HttpRequest::post("/api/mcp_servers/web/start")
        .header("content-type", "application/json")
        .body(Body::from_stream(futures_util::stream::iter(chunks)))
        .unwrap();
    let (status, headers, body) = send(&app, request).await;
    assert_eq!((status, headers["connection"].to_str().unwrap()), (StatusCode::PAYLOAD_TOO_LARGE, "close"));
    assert_envelope(&body, "PayloadTooLarge");
    assert!(fake.requests.lock().unwrap().is_empty(), "the start never reached the supervisor");
}

#[tokio::test]
async fn every_request_names_the_caller_its_key_authenticated() {
    use hangar_core::access::{AuthConfig, Caller, NamedKey};
    use sha2::{Digest, Sha256};
    let fake = FakeSupervisor::new();
    let state = crate::state::AppState::new(fake.clone()).with_auth(crate::auth::Auth::default());
    let hex: String = Sha256::digest(b"ci-key").iter().map(|b| format!("{b:02x}")).collect();
    state.auth.learn(&AuthConfig {
        api_keys: vec![NamedKey { name: "ci-bot".into(), hash: format!("sha256:{hex}"), profile: Some("ci".into()) }],
        oauth: None,
    });
    let app = crate::app::router(state);
    let (status, _, _) = send(&app, get("/api/mcp_servers")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(fake.callers.lock().unwrap().is_empty(), "a refused request never reaches the supervisor");
    let keyed = HttpRequest::get("/api/mcp_servers").header("x-api-key", "ci-key").body(Body::empty()).unwrap();
    let (status, _, _) = send(&app, keyed).await;
    assert_eq!(status, StatusCode::OK);
    let callers = fake.callers.lock().unwrap().clone();
    assert_eq!(callers, [Caller { identity: "ci-bot".into(), profile: Some("ci".into()) }]);
}

#[tokio::test]
async fn not_ready_until_the_supervisor_said_who_may_call() {
    let state = crate::state::AppState::new(FakeSupervisor::new()).with_auth(crate::auth::Auth::default());
    let app = crate::app::router(state.clone());
    let (status, _, body) = send(&app, get("/health/ready")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(json_of(&body)["reason"], "waiting for the supervisor's auth settings");
    state.auth.learn(&Default::default());
    assert_eq!(send(&app, get("/health/ready")).await.0, StatusCode::OK);
}
