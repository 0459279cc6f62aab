//! The 2024-11-05 HTTP+SSE transport, for clients that predate streamable HTTP.
//!
//! `GET /sse` opens a legacy session and its event stream, whose first event (`endpoint`) names
//! where to POST: `/messages?sessionId=<id>`. Each POSTed message is answered 202, and its
//! answer goes out on the stream. The stream is the session's at the supervisor, so a POST may
//! reach any API instance: the answer is posted to the supervisor and sent by whichever instance
//! holds the stream. A message is handled as a legacy `/mcp` request in that session (the same
//! auth, guard and limits apply: they are middleware in front of every route).

use axum::Router;
use axum::body::Bytes;
use axum::extract::Query;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::http::header::ACCEPT;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hangar_core::ipc::SessionChange;
use hangar_core::jsonrpc::RpcError;
use hangar_core::mcp::HEADER_SESSION_ID;
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::mpsc;

use super::errors::session_not_found;
use super::id::Incoming;
use super::reply::{McpReply, sse_event};
use super::{legacy, session};
use crate::state::{AppState, Calling};
use crate::streamed::{EVENT_STREAM, streamed};
use crate::supervisor::AsCaller;

/// The revision that defined this transport; `initialize` may still negotiate another.
const VERSION: &str = "2024-11-05";

pub fn routes() -> Router<AppState> {
    Router::new().route("/sse", get(open)).route("/messages", post(message))
}

#[derive(Deserialize)]
struct Target {
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

/// Opens the session and its stream.
async fn open(app: Calling) -> Response {
    let session_id = session::mint(VERSION);
    if let Err(err) = app.supervisor.session_open(&session_id, VERSION, serde_json::json!({}), None).await {
        let status = session::failure_status(&err);
        return McpReply::error(status, &Value::Null, &session::open_failure(err)).into_response();
    }
    let (events, receiver) = mpsc::channel(16);
    tokio::spawn(feed(app.supervisor.clone(), session_id, events));
    streamed(receiver, EVENT_STREAM)
}

/// The `endpoint` event, then the session's messages, until the client goes (which ends the
/// session: this transport has no other way to) or the session ends.
async fn feed(supervisor: AsCaller, session_id: String, events: mpsc::Sender<Bytes>) {
    let (mut messages, followed) = supervisor.follow_session(&session_id);
    tokio::pin!(followed);
    let endpoint = format!("event: endpoint\ndata: /messages?sessionId={session_id}\n\n");
    if events.send(Bytes::from(endpoint)).await.is_ok() {
        loop {
            let event = tokio::select! {
                () = events.closed() => break,
                message = messages.recv() => match message {
                    Some(message) => sse_event(&message),
                    None => return,
                },
                _ = &mut followed => return,
            };
            if events.send(event).await.is_err() {
                break;
            }
        }
    }
    if let Err(err) = supervisor.session_end(&session_id).await {
        tracing::debug!(%err, "ending an old-transport session");
    }
}

/// One message in the session: 202, its answer on the stream.
async fn message(
    app: Calling,
    target: Result<Query<Target>, QueryRejection>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> McpReply {
    let bad = StatusCode::BAD_REQUEST;
    let Some(session_id) = target.ok().and_then(|Query(target)| target.session_id) else {
        let err =
            RpcError::invalid_request("Bad Request: POST /messages needs the sessionId from the `endpoint` event");
        return McpReply::error(bad, &Value::Null, &err);
    };
    if session::parse(&session_id).is_none() {
        return McpReply::error(StatusCode::NOT_FOUND, &Value::Null, &session_not_found());
    }
    let incoming = match body
        .map_err(|rejection| rejection.body_text())
        .and_then(|bytes| Incoming::decode(&bytes).map_err(|err| err.to_string()))
    {
        Ok(incoming) => incoming,
        Err(err) => return McpReply::error(bad, &Value::Null, &RpcError::parse_error(err)),
    };
    let reply = match initialize_params(&incoming) {
        Some(params) => initialize(&app, &session_id, &incoming, params.as_ref()).await,
        None => legacy::handle(&app, &in_session(&headers, &session_id), incoming).await,
    };
    if reply.status == StatusCode::NOT_FOUND {
        return reply;
    }
    if let Some(events) = reply.events {
        // A call that streams (progress, log lines, then its answer): each message goes on the
        // session's stream as it comes, while the POST is already answered.
        tokio::spawn(post_each(app.supervisor.clone(), session_id, events));
        return McpReply::accepted();
    }
    let Some(answer) = reply.body else { return McpReply::accepted() };
    let answer = serde_json::to_value(&answer).unwrap_or_default();
    match app.supervisor.session_post(&session_id, answer).await {
        Ok(()) => McpReply::accepted(),
        Err(err) => McpReply::error(session::failure_status(&err), &Value::Null, &session_not_found()),
    }
}

/// Posts each message of a streamed answer to the session's stream, in order, until the answer
/// ends or the session does.
async fn post_each(supervisor: AsCaller, session_id: String, mut events: mpsc::Receiver<Bytes>) {
    while let Some(event) = events.recv().await {
        let Some(message) = event_message(&event) else { continue };
        if let Err(err) = supervisor.session_post(&session_id, message).await {
            tracing::debug!(%err, "a streamed answer's session ended");
            return;
        }
    }
}

/// The JSON message one whole SSE event carries; none for a comment (a keep-alive).
fn event_message(event: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(event).ok()?;
    let data: Vec<&str> = text.lines().filter_map(|line| line.strip_prefix("data:")).map(str::trim_start).collect();
    if data.is_empty() {
        return None;
    }
    serde_json::from_str(&data.join("\n")).ok()
}

/// The params of an `initialize` request (`Some(None)` when it has none).
fn initialize_params(incoming: &Incoming) -> Option<Option<Value>> {
    let is_initialize =
        incoming.id.is_some() && incoming.body.get("method").and_then(Value::as_str) == Some("initialize");
    is_initialize.then(|| incoming.body.get("params").cloned())
}

/// `initialize` in the session `GET /sse` opened: negotiates, and tells the supervisor the
/// version and the client's capabilities.
async fn initialize(app: &Calling, session_id: &str, incoming: &Incoming, params: Option<&Value>) -> McpReply {
    let (version, result) = legacy::negotiate(app, params).await;
    let change =
        SessionChange::Initialize { version: version.to_owned(), capabilities: session::client_capabilities(params) };
    let id = incoming.id.clone().unwrap_or_else(super::id::Id::null);
    match session::check(app, session_id, Some(change)).await {
        Ok(_) => McpReply::result(&id, result),
        Err((status, err)) => McpReply::error(status, &id, &err),
    }
}

/// The request's headers as a legacy `/mcp` request in the session.
fn in_session(headers: &HeaderMap, session_id: &str) -> HeaderMap {
    let mut headers = headers.clone();
    if let Ok(value) = HeaderValue::from_str(session_id) {
        headers.insert(HEADER_SESSION_ID, value);
    }
    // A call that asked to hear about itself (a progress token, a log level) streams; its
    // messages are carried to the session's stream one by one.
    headers.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
    headers
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::streamed::KEEP_ALIVE_COMMENT;

    #[test]
    fn an_event_s_message_is_its_data_and_a_comment_has_none() {
        let message = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}});
        assert_eq!(event_message(&sse_event(&message)), Some(message));
        assert_eq!(event_message(KEEP_ALIVE_COMMENT), None);
        assert_eq!(event_message(b"event: message\ndata: {not json\n\n"), None);
    }
}
