//! What `/mcp` answers: a status, an optional JSON body and a few headers.

use axum::body::Bytes;
use axum::http::header::{ALLOW, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::Value;
use tokio::sync::mpsc;

use hangar_core::jsonrpc::RpcError;
use hangar_core::mcp::HEADER_SESSION_ID;

use super::id::{Echo, Id};
use crate::streamed::{EVENT_STREAM, streamed};

#[derive(Debug)]
pub struct McpReply {
    pub status: StatusCode,
    pub body: Option<Answer>,
    /// A `text/event-stream` answer instead: each item one whole SSE event.
    pub events: Option<mpsc::Receiver<Bytes>>,
    /// Set on a legacy `initialize` answer.
    pub session_id: Option<String>,
    /// Answers to methods other than POST say what is allowed.
    pub allow_post: bool,
}

impl McpReply {
    pub fn result(id: &Id, result: Value) -> Self {
        McpReply::json(StatusCode::OK, Answer { id: id.clone(), outcome: Ok(result) })
    }

    pub fn error(status: StatusCode, id: &(impl Echo + ?Sized), error: &RpcError) -> Self {
        McpReply::json(status, Answer { id: id.echo(), outcome: Err(error.clone()) })
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
            McpReply::error(StatusCode::METHOD_NOT_ALLOWED, &Id::null(), &RpcError::invalid_request(message));
        reply.allow_post = true;
        reply
    }

    fn json(status: StatusCode, body: Answer) -> Self {
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
        self.body.as_ref()?.outcome.as_ref().err().map(|err| err.code)
    }

    /// The body as a `Value`, for tests (the id as a `Value` can hold it).
    #[cfg(test)]
    pub fn body_json(&self) -> Option<Value> {
        self.body.as_ref().map(|body| serde_json::to_value(body).unwrap_or_default())
    }
}

/// A JSON-RPC response: the id as the client wrote it, then a result or an error.
#[derive(Debug)]
pub struct Answer {
    pub id: Id,
    pub outcome: Result<Value, RpcError>,
}

impl Serialize for Answer {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("jsonrpc", "2.0")?;
        map.serialize_entry("id", &self.id)?;
        match &self.outcome {
            Ok(result) => map.serialize_entry("result", result)?,
            Err(error) => map.serialize_entry("error", &error.to_json())?,
        }
        map.end()
    }
}

impl IntoResponse for McpReply {
    fn into_response(self) -> Response {
        let mut response = match (self.events, self.body) {
            (Some(events), _) => streamed(events, EVENT_STREAM),
            (None, Some(body)) => json_response(self.status, &body),
            (None, None) => self.status.into_response(),
        };
        let headers = response.headers_mut();
        if let Some(session) = self.session_id.and_then(|id| HeaderValue::from_str(&id).ok()) {
            headers.insert(HEADER_SESSION_ID, session);
        }
        if self.allow_post {
            headers.insert(ALLOW, HeaderValue::from_static("POST"));
        }
        response
    }
}

/// `body` as `application/json`, written into one buffer sized for a typical answer (axum's
/// `Json` starts at 128 bytes and grows by copying).
fn json_response(status: StatusCode, body: &Answer) -> Response {
    let mut bytes = Vec::with_capacity(1024);
    match serde_json::to_writer(&mut bytes, body) {
        Ok(()) => (status, [(CONTENT_TYPE, HeaderValue::from_static("application/json"))], bytes).into_response(),
        // Unreachable (every key is a string); answered rather than assumed.
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// One SSE event carrying a JSON-RPC message (serde_json writes no raw newline, so it is one
/// `data:` line).
pub fn sse_event<T: Serialize>(message: &T) -> Bytes {
    let mut event = b"event: message\ndata: ".to_vec();
    // Cannot fail: every key is a string.
    let _ = serde_json::to_writer(&mut event, message);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}
