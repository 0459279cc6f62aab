//! `GET /metrics`: the supervisor's counters as Prometheus text.
//!
//! The supervisor keeps the numbers; this asks for a snapshot and renders it with
//! `hangar_core::metrics::render`, so every API instance prints the same text. The cross-site
//! guard applies as on every route: a rebound page must not read the counters either.

use axum::Router;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::error::ApiError;
use crate::state::{AppState, Calling};

/// The Prometheus text exposition format, version 0.0.4.
pub const CONTENT_TYPE_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

pub fn routes() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

async fn metrics(app: Calling) -> Result<Response, ApiError> {
    let snapshot = app.supervisor.metrics().await?;
    Ok(([(CONTENT_TYPE, CONTENT_TYPE_TEXT)], hangar_core::metrics::render(&snapshot)).into_response())
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Request as HttpRequest, StatusCode};
    use hangar_core::ipc::Request;

    use super::*;
    use crate::testing::{FakeSupervisor, app_with, json_of, send};

    fn get(uri: &str) -> HttpRequest<Body> {
        HttpRequest::get(uri).body(Body::empty()).unwrap()
    }

    #[tokio::test]
    async fn renders_the_supervisors_snapshot_as_prometheus_text() {
        let fake = FakeSupervisor::new();
        let app = app_with(fake.clone());
        let (status, headers, body) = send(&app, get("/metrics")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[CONTENT_TYPE], CONTENT_TYPE_TEXT);
        assert_eq!(body, hangar_core::metrics::render(&fake.metrics_snapshot()));
        assert!(body.contains("hangar_mcp_server_state{mcp_server=\"broken\"} 4\n"), "{body}");
        assert_eq!(fake.requests.lock().unwrap().as_slice(), [Request::Metrics]);
    }

    #[tokio::test]
    async fn is_guarded_like_every_route() {
        let app = app_with(FakeSupervisor::new());
        for (name, value) in [("host", "rebound.example:8000"), ("origin", "https://evil.example.com")] {
            let request = HttpRequest::get("/metrics").header(name, value).body(Body::empty()).unwrap();
            let (status, _, body) = send(&app, request).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{name}");
            assert_eq!(json_of(&body)["error"]["code"], "Forbidden");
        }
    }

    #[tokio::test]
    async fn an_unreachable_supervisor_is_a_503_envelope() {
        let app = app_with(FakeSupervisor::disconnected());
        let (status, headers, body) = send(&app, get("/metrics")).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(headers[CONTENT_TYPE], "application/json");
        assert_eq!(json_of(&body)["error"]["code"], "SupervisorUnavailable");
    }
}
