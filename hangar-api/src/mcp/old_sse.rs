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
use crate::streamed::{KEEP_ALIVE, KEEP_ALIVE_COMMENT, streamed};
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
    if let Err(err) = app.supervisor.session_open(&session_id, VERSION, serde_json::json!({})).await {
        let status = session::failure_status(&err);
        return McpReply::error(status, &Value::Null, &RpcError::internal(err.message)).into_response();
    }
    let (events, receiver) = mpsc::channel(16);
    tokio::spawn(feed(app.supervisor.clone(), session_id, events));
    streamed(receiver, "text/event-stream")
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
                () = tokio::time::sleep(KEEP_ALIVE) => Bytes::from_static(KEEP_ALIVE_COMMENT),
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
    let Some(answer) = reply.body else { return McpReply::accepted() };
    let answer = serde_json::to_value(&answer).unwrap_or_default();
    match app.supervisor.session_post(&session_id, answer).await {
        Ok(()) => McpReply::accepted(),
        Err(err) => McpReply::error(session::failure_status(&err), &Value::Null, &session_not_found()),
    }
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

/// The request's headers as a legacy `/mcp` request in the session, answered as plain JSON.
fn in_session(headers: &HeaderMap, session_id: &str) -> HeaderMap {
    let mut headers = headers.clone();
    if let Ok(value) = HeaderValue::from_str(session_id) {
        headers.insert(HEADER_SESSION_ID, value);
    }
    headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
    headers
}
