//! What `/mcp` answers: a status, an optional JSON body and a few headers.

use axum::body::Bytes;
use axum::http::header::{ALLOW, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Map, Value};
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
    /// The result's `structuredContent` is already rendered as the text of its first content
    /// block (a hangar tool's result, [`McpReply::rendered`]): written from that text.
    pub rendered: bool,
}

impl McpReply {
    pub fn result(id: &Id, result: Value) -> Self {
        McpReply::json(StatusCode::OK, Answer { id: id.clone(), outcome: Ok(result) })
    }

    /// A hangar tool's result (`hangar_core::batch::tool_result`): its first content block's
    /// text is its `structuredContent` as serde_json writes it, so that copy is written from the
    /// text rather than serialized a second time (a `hangar_call` report is most of its answer).
    pub fn rendered(id: &Id, result: Value) -> Self {
        McpReply { rendered: true, ..McpReply::result(id, result) }
    }

    pub fn error(status: StatusCode, id: &(impl Echo + ?Sized), error: &RpcError) -> Self {
        McpReply::json(status, Answer { id: id.echo(), outcome: Err(error.clone()) })
    }

    /// A notification or a client's response: nothing to say back.
    pub fn accepted() -> Self {
        McpReply::bare(StatusCode::ACCEPTED)
    }

    /// A 200 with no body (a legacy session DELETE).
    pub fn ok_empty() -> Self {
        McpReply::bare(StatusCode::OK)
    }

    /// `status` alone: no body, no stream, no extra header. Every other answer starts from it.
    fn bare(status: StatusCode) -> Self {
        McpReply { status, body: None, events: None, session_id: None, allow_post: false, rendered: false }
    }

    pub fn method_not_allowed(message: &str) -> Self {
        let mut reply =
            McpReply::error(StatusCode::METHOD_NOT_ALLOWED, &Id::null(), &RpcError::invalid_request(message));
        reply.allow_post = true;
        reply
    }

    fn json(status: StatusCode, body: Answer) -> Self {
        McpReply { body: Some(body), ..McpReply::bare(status) }
    }

    /// A `200 text/event-stream` answer scoped to one request: its notifications, then its
    /// response. The stream ends when the sender side does.
    pub fn events(events: mpsc::Receiver<Bytes>) -> Self {
        McpReply { events: Some(events), ..McpReply::bare(StatusCode::OK) }
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
            (None, Some(body)) => json_response(self.status, &body, self.rendered),
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

/// `body` as `application/json`, written into one buffer sized for a typical answer (one
/// `hangar_call`'s is about 1 KiB; axum's `Json` starts at 128 bytes and grows by copying).
fn json_response(status: StatusCode, body: &Answer, rendered: bool) -> Response {
    let mut bytes = Vec::with_capacity(2048);
    let written = match (rendered, &body.outcome) {
        (true, Ok(Value::Object(result))) => write_rendered(&mut bytes, &body.id, result),
        _ => serde_json::to_writer(&mut bytes, body),
    };
    match written {
        Ok(()) => (status, [(CONTENT_TYPE, HeaderValue::from_static("application/json"))], bytes).into_response(),
        // Unreachable (every key is a string); answered rather than assumed.
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// What `Answer`'s `Serialize` writes for `result`, but with `structuredContent` copied from the
/// first content block's text, which holds it already rendered: the same bytes, serialized once.
/// Falls back to serializing it when that text is missing.
fn write_rendered(bytes: &mut Vec<u8>, id: &Id, result: &Map<String, Value>) -> serde_json::Result<()> {
    let text = result.get("content").and_then(|c| c.get(0)).and_then(|b| b.get("text")).and_then(Value::as_str);
    bytes.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    serde_json::to_writer(&mut *bytes, id)?;
    bytes.extend_from_slice(br#","result":{"#);
    for (n, (key, value)) in result.iter().enumerate() {
        if n > 0 {
            bytes.push(b',');
        }
        serde_json::to_writer(&mut *bytes, key)?;
        bytes.push(b':');
        match text {
            Some(text) if key == "structuredContent" => bytes.extend_from_slice(text.as_bytes()),
            _ => serde_json::to_writer(&mut *bytes, value)?,
        }
    }
    bytes.extend_from_slice(b"}}");
    Ok(())
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

#[cfg(test)]
#[path = "reply_tests.rs"]
mod tests;
