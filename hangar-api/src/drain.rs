//! Draining on a stop signal: `/health/ready` turns false at once, every new request but the
//! health probes and a task's follow-ups (`tasks/get`, `tasks/update`, `tasks/cancel`: the task
//! lives in this hangar) is refused 503 with `Retry-After` and `Connection: close` (so the
//! client reconnects, through the load balancer, to an instance that is ready), and the requests
//! already in progress are counted until their responses are sent in full.
//!
//! Counted: every request but GETs (reads, and the long-lived event streams: a legacy `GET /mcp`,
//! `GET /sse`, `/api/events`) and `subscriptions/listen` (a stream a client reopens elsewhere).
//! Those are cut when the grace ends or the in-flight count reaches zero.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hangar_core::ipc::{ErrorKind, IpcError};
use hangar_core::mcp::{HEADER_METHOD, METHOD_SUBSCRIPTIONS_LISTEN, TASK_METHODS};
use serde_json::json;
use tokio::sync::Notify;

use crate::error::ApiError;
use crate::serve::TrackedBody;

/// What a refused client is told to wait before it retries.
const RETRY_AFTER_MS: u64 = 1000;

/// Whether this instance is draining, and how many counted requests are in progress.
#[derive(Clone, Default)]
pub struct Drain(Arc<Inner>);

#[derive(Default)]
struct Inner {
    draining: AtomicBool,
    in_flight: AtomicUsize,
    /// Told whenever the count drops to zero.
    idle: Notify,
}

impl Drain {
    /// From now on new requests are refused and `/health/ready` says `draining`.
    pub fn begin(&self) {
        self.0.draining.store(true, Ordering::SeqCst);
    }

    pub fn draining(&self) -> bool {
        self.0.draining.load(Ordering::SeqCst)
    }

    pub fn in_flight(&self) -> usize {
        self.0.in_flight.load(Ordering::SeqCst)
    }

    /// Resolves once no counted request is in progress.
    pub async fn idle(&self) {
        loop {
            // Registered before the count is read, so a drop to zero in between is not missed.
            let told = self.0.idle.notified();
            if self.in_flight() == 0 {
                return;
            }
            told.await;
        }
    }

    /// Counts a request in progress; `None` (and nothing counted) once draining has begun. The
    /// count is taken before the flag is read, so `idle` never misses a request admitted as
    /// draining begins.
    fn enter(&self) -> Option<Busy> {
        self.0.in_flight.fetch_add(1, Ordering::SeqCst);
        let busy = Busy(self.0.clone());
        (!self.draining()).then_some(busy)
    }
}

/// One counted request, until its response is sent in full or dropped.
struct Busy(Arc<Inner>);

impl Drop for Busy {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// The middleware: refuses new work while draining, counts the requests it lets through.
pub async fn admit(State(drain): State<Drain>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if crate::public::is_probe(path) {
        return next.run(request).await;
    }
    let method = request.headers().get(HEADER_METHOD).and_then(|value| value.to_str().ok());
    let follow_up = method.is_some_and(|method| TASK_METHODS.contains(&method));
    let stream = request.method() == Method::GET || method == Some(METHOD_SUBSCRIPTIONS_LISTEN);
    match drain.enter() {
        Some(busy) if !stream => {
            let response = next.run(request).await;
            response.map(|body| Body::new(TrackedBody { body, _held: busy }))
        }
        Some(_) => next.run(request).await,
        None if follow_up => next.run(request).await,
        None => refusal(),
    }
}

fn refusal() -> Response {
    let refused =
        IpcError::new(ErrorKind::ShuttingDown, "this hangar is shutting down; retry, another instance will answer")
            .with_details(json!({"retry_after_ms": RETRY_AFTER_MS}));
    let mut response = ApiError::from(refused).into_response();
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::Router;
    use axum::http::StatusCode;
    use axum::routing::{get, post};
    use tower::ServiceExt;

    use super::*;

    fn app(drain: &Drain) -> Router {
        Router::new()
            .route("/health/ready", get(|| async { "ready" }))
            .route("/mcp", post(|| async { "answered" }).get(|| async { "stream" }))
            .layer(axum::middleware::from_fn_with_state(drain.clone(), admit))
    }

    fn post_mcp(method: &str) -> Request {
        Request::post("/mcp").header(HEADER_METHOD, method).body(Body::empty()).unwrap()
    }

    #[tokio::test]
    async fn draining_refuses_new_work_but_not_probes_or_a_tasks_follow_ups() {
        let drain = Drain::default();
        let served = app(&drain).oneshot(post_mcp("tools/call")).await.unwrap();
        assert_eq!(served.status(), StatusCode::OK);
        drop(served);
        drain.begin();
        let refused = app(&drain).oneshot(post_mcp("tools/call")).await.unwrap();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
        assert_eq!(refused.headers()[header::CONNECTION], "close");
        let probe = Request::get("/health/ready").body(Body::empty()).unwrap();
        assert_eq!(app(&drain).oneshot(probe).await.unwrap().status(), StatusCode::OK);
        assert_eq!(app(&drain).oneshot(post_mcp("tasks/get")).await.unwrap().status(), StatusCode::OK);
        assert_eq!(drain.in_flight(), 0, "refusals are not counted");
    }

    #[tokio::test]
    async fn a_request_counts_until_its_response_body_is_dropped() {
        let drain = Drain::default();
        let response = app(&drain).oneshot(post_mcp("tools/call")).await.unwrap();
        assert_eq!(drain.in_flight(), 1, "the body is not sent yet");
        drain.begin();
        let idle = tokio::spawn({
            let drain = drain.clone();
            async move { drain.idle().await }
        });
        tokio::task::yield_now().await;
        assert!(!idle.is_finished());
        drop(response);
        tokio::time::timeout(Duration::from_secs(5), idle).await.unwrap().unwrap();
        let stream = app(&Drain::default()).oneshot(Request::get("/mcp").body(Body::empty()).unwrap()).await;
        assert_eq!(stream.unwrap().status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn streams_are_not_counted() {
        let drain = Drain::default();
        let _stream = app(&drain).oneshot(Request::get("/mcp").body(Body::empty()).unwrap()).await.unwrap();
        let _listen = app(&drain).oneshot(post_mcp(METHOD_SUBSCRIPTIONS_LISTEN)).await.unwrap();
        assert_eq!(drain.in_flight(), 0);
    }
}
