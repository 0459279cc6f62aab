//! The control-socket requests of a legacy (2025-11-25 and older) session, kept by the
//! supervisor so every API instance sees it, owned by the identity that opened it. Each is one
//! `ipc::Request` variant's body, answered by a handler of its own.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The session begins, owned by the caller's identity. Answers
/// [`Reply::Session`](crate::ipc::Reply::Session).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionOpen {
    pub session_id: String,
    pub version: String,
    /// The client's `initialize` capabilities.
    pub capabilities: Value,
    /// Its `clientInfo` name and version, as it said them (for `GET /api/clients`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

/// A request in a session: answers its state ([`Reply::Session`](crate::ipc::Reply::Session))
/// and counts as use; [`ErrorKind::NotFound`](crate::ipc::ErrorKind::NotFound) when it ended,
/// expired, never was, or is another identity's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionUse {
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<SessionChange>,
}

/// `DELETE /mcp`: the session ends (its stream with it). Answers
/// [`Reply::SessionEnded`](crate::ipc::Reply::SessionEnded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionEnd {
    pub session_id: String,
}

/// A message for the session's stream (its GET stream, or the old transport's `/sse`),
/// whichever API instance holds it. Answers [`Reply::Posted`](crate::ipc::Reply::Posted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionPost {
    pub session_id: String,
    pub message: Value,
}

/// Holds the session's stream: each message for it (posted answers, unsolicited upstream log
/// lines at its level, updates of resources it subscribed to) comes as a
/// [`ServerFrame::Notice`](crate::ipc::ServerFrame::Notice), until the caller cancels, the
/// session ends, or another stream takes it over. Answers
/// [`Reply::SessionEnded`](crate::ipc::Reply::SessionEnded) then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionFollow {
    pub session_id: String,
}

/// What a request in a session changes in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionChange {
    /// `logging/setLevel`.
    LogLevel(String),
    /// `resources/subscribe`.
    Subscribe(String),
    /// `resources/unsubscribe`.
    Unsubscribe(String),
    /// `initialize` inside a session that exists before it (the 2024-11-05 HTTP+SSE transport).
    Initialize { version: String, capabilities: Value },
    /// Where the session's subscription to `uri` (as the client wrote it) lives upstream: the
    /// server that has it and the URI that server knows it by, so the supervisor holds that
    /// server's `subscriptions/listen` for it (2026-07-28) and names its updates as the client
    /// wrote the URI. Subscribes to `uri` too if the session had not.
    SubscribeUpstream { uri: String, mcp_server: String, upstream_uri: String },
}
