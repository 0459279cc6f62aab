//! What `/mcp` answers: a status, an optional JSON body and a few headers.

use axum::body::{Body, Bytes};
use axum::http::header::{ALLOW, CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::errors::RpcError;

pub const SESSION_HEADER: &str = "mcp-session-id";

#[derive(Debug)]
pub struct McpReply {
    pub status: StatusCode,
    pub body: Option<Value>,
    /// A `text/event-stream` answer instead: each item one whole SSE event.
    pub events: Option<mpsc::Receiver<Bytes>>,
    /// Set on a legacy `initialize` answer.
    pub session_id: Option<String>,
    /// Answers to methods other than POST say what is allowed.
    pub allow_post: bool,
}

impl McpReply {
    pub fn result(id: &Value, result: Value) -> Self {
        let body = crate::json::object([("jsonrpc", Value::from("2.0")), ("id", id.clone()), ("result", result)]);
        McpReply::json(StatusCode::OK, body)
    }

    pub fn error(status: StatusCode, id: &Value, error: &RpcError) -> Self {
        McpReply::json(status, json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()}))
    }

    /// A notification or a client's response: nothing to say back.
    pub fn accepted() -> Self {
        McpReply { status: StatusCode::ACCEPTED, body: None, events: None, session_id: None, allow_post: false }
    }

    /// A 200 with no body (a legacy session DELETE).
    pub fn ok_empty() -> Self {
        McpReply { status: StatusCode::OK, body: None, events: None, session_id: None, allow_post: false }
    }

    pub fn method_not_allowed(message: &str) -> Self {
        let mut reply =
            McpReply::error(StatusCode::METHOD_NOT_ALLOWED, &Value::Null, &RpcError::invalid_request(message));
        reply.allow_post = true;
        reply
    }

    fn json(status: StatusCode, body: Value) -> Self {
        McpReply { status, body: Some(body), events: None, session_id: None, allow_post: false }
    }

    /// A `200 text/event-stream` answer scoped to one request: its notifications, then its
    /// response. The stream ends when the sender side does.
    pub fn events(events: mpsc::Receiver<Bytes>) -> Self {
        McpReply { status: StatusCode::OK, body: None, events: Some(events), session_id: None, allow_post: false }
    }

    /// The JSON-RPC error code, for tests.
    #[cfg(test)]
    pub fn error_code(&self) -> Option<i64> {
        self.body.as_ref()?.get("error")?.get("code")?.as_i64()
    }
}

impl IntoResponse for McpReply {
    fn into_response(self) -> Response {
        let mut response = match (self.events, self.body) {
            (Some(events), _) => event_stream(events),
            (None, Some(body)) => json_response(self.status, &body),
            (None, None) => self.status.into_response(),
        };
        let headers = response.headers_mut();
        if let Some(session) = self.session_id.and_then(|id| HeaderValue::from_str(&id).ok()) {
            headers.insert(SESSION_HEADER, session);
        }
        if self.allow_post {
            headers.insert(ALLOW, HeaderValue::from_static("POST"));
        }
        response
    }
}

/// `body` as `application/json`, written into one buffer sized for a typical answer (axum's
/// `Json` starts at 128 bytes and grows by copying).
fn json_response(status: StatusCode, body: &Value) -> Response {
    let mut bytes = Vec::with_capacity(1024);
    match serde_json::to_writer(&mut bytes, body) {
        Ok(()) => (status, [(CONTENT_TYPE, HeaderValue::from_static("application/json"))], bytes).into_response(),
        // Unreachable for a `Value` (its keys are strings); answered rather than assumed.
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// An SSE response fed by `events`. When the client goes away the body is dropped, and with it
/// the receiver: the producer sees that and cancels what it was waiting for.
fn event_stream(events: mpsc::Receiver<Bytes>) -> Response {
    let stream = futures_util::stream::unfold(events, |mut events| async move {
        events.recv().await.map(|event| (Ok::<_, std::convert::Infallible>(event), events))
    });
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies such as nginx must pass each event on as it comes.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// One SSE event carrying a JSON-RPC message.
pub fn sse_event(message: &Value) -> Bytes {
    Bytes::from(format!("event: message\ndata: {message}\n\n"))
}
