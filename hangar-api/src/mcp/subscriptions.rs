//! Long-lived notification streams: 2026-07-28's `subscriptions/listen` (a POST answered with
//! SSE that stays open) and the legacy session's GET stream.
//!
//! The hangar knows when an upstream's tool list changes (the supervisor tells the API), so
//! `toolsListChanged` is honoured; prompts, resources and resource subscriptions are not yet
//! tracked, and the acknowledgement says so rather than promising what would never come.

use axum::body::Bytes;
use hangar_core::mcp::META_SUBSCRIPTION_ID;
use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::id::Id;
use super::reply::{McpReply, sse_event};
use crate::state::{Calling, ListChanged};
use crate::streamed::{KEEP_ALIVE, KEEP_ALIVE_COMMENT};
use crate::supervisor::{AsCaller, BoxFuture};
use hangar_core::ipc::{IpcError, Reply};

/// A notification of a subscription; its `_meta` names the subscription by the request's id, as
/// the client wrote it.
#[derive(Serialize)]
struct Notification<'a> {
    jsonrpc: &'static str,
    method: &'static str,
    params: Params<'a>,
}

#[derive(Serialize)]
struct Params<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    notifications: Option<Value>,
    #[serde(rename = "_meta")]
    meta: SubscriptionMeta<'a>,
}

struct SubscriptionMeta<'a> {
    subscription_id: &'a Id,
}

impl Serialize for SubscriptionMeta<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(META_SUBSCRIPTION_ID, self.subscription_id)?;
        map.end()
    }
}

/// `subscriptions/listen`: acknowledges the filter it honours, then streams what was asked for.
pub fn listen(app: &Calling, id: &Id, params: Option<&Value>, front_door: bool) -> McpReply {
    let asked = params.and_then(|p| p.get("notifications"));
    let tools = front_door && asked.and_then(|n| n.get("toolsListChanged")).and_then(Value::as_bool) == Some(true);
    let honoured = json!({
        "toolsListChanged": tools,
        "promptsListChanged": false,
        "resourcesListChanged": false,
        "resourceSubscriptions": [],
    });
    let notification = |method, notifications| Notification {
        jsonrpc: "2.0",
        method,
        params: Params { notifications, meta: SubscriptionMeta { subscription_id: id } },
    };
    let acknowledged = sse_event(&notification("notifications/subscriptions/acknowledged", Some(honoured)));
    let changed = sse_event(&notification("notifications/tools/list_changed", None));
    stream(app, Some(acknowledged), tools.then_some(changed), None)
}

/// The legacy GET stream of a session: `notifications/tools/list_changed` as tools change, and
/// whatever the supervisor has for the session (it holds the session's stream meanwhile).
pub fn legacy_stream(app: &Calling, session_id: String) -> McpReply {
    let changed = sse_event(&json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    stream(app, None, Some(changed), Some(session_id))
}

/// `first`, then `on_tools` whenever the tools of a server the caller sees change: each one
/// whole SSE event, encoded once. Whether the caller sees the server is the supervisor's answer
/// (a caller with a profile asks for it; one without sees every server), so a caller is not
/// told about servers outside its view. With a `session`, its messages too, until it ends.
fn stream(app: &Calling, first: Option<Bytes>, on_tools: Option<Bytes>, session: Option<String>) -> McpReply {
    let mut changes = app.changes.subscribe();
    let supervisor = app.supervisor.clone();
    let (events, receiver) = mpsc::channel(16);
    tokio::spawn(async move {
        if let Some(first) = first
            && events.send(first).await.is_err()
        {
            return;
        }
        let (mut messages, followed) = match &session {
            Some(session) => {
                let (messages, followed) = supervisor.follow_session(session);
                (Some(messages), Some(followed))
            }
            None => (None, None),
        };
        let mut followed = followed;
        loop {
            let event = tokio::select! {
                message = next_message(&mut messages) => match message {
                    Some(message) => sse_event(&message),
                    None => return,
                },
                () = session_over(&mut followed) => return,
                change = changes.recv() => match (change, &on_tools) {
                    (Ok(ListChanged::Tools(mcp_server)), Some(notification)) => {
                        if !sees(&supervisor, &mcp_server).await {
                            continue;
                        }
                        notification.clone()
                    }
                    (Err(broadcast::error::RecvError::Lagged(_)), Some(notification)) => notification.clone(),
                    (Err(broadcast::error::RecvError::Closed), _) => return,
                    _ => continue,
                },
                () = tokio::time::sleep(KEEP_ALIVE) => Bytes::from_static(KEEP_ALIVE_COMMENT),
                () = events.closed() => return,
            };
            if events.send(event).await.is_err() {
                return;
            }
        }
    });
    McpReply::events(receiver)
}

/// The next message for the followed session; never, without one.
async fn next_message(messages: &mut Option<mpsc::UnboundedReceiver<Value>>) -> Option<Value> {
    match messages {
        Some(messages) => messages.recv().await,
        None => std::future::pending().await,
    }
}

/// Resolves when the followed session is over (ended, or its stream taken by another GET);
/// never, without one.
async fn session_over(followed: &mut Option<BoxFuture<'_, Result<Reply, IpcError>>>) {
    match followed {
        Some(followed) => {
            let _ = followed.await;
        }
        None => std::future::pending().await,
    }
}

/// Whether the caller sees `mcp_server` (the supervisor answers an unseen server as unknown).
async fn sees(supervisor: &AsCaller, mcp_server: &str) -> bool {
    supervisor.caller().profile.is_none() || supervisor.get(mcp_server).await.is_ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::testing::FakeSupervisor;

    #[tokio::test]
    async fn the_subscription_is_named_by_the_request_id_as_written() {
        let app = Calling::anonymous(&crate::state::AppState::new(FakeSupervisor::new()));
        let id = super::super::id::Incoming::decode(br#"{"id": 18446744073709551616}"#).unwrap().id.unwrap();
        let mut reply = listen(&app, &id, None, true);
        let first = reply.events.as_mut().unwrap().recv().await.unwrap();
        let text = std::str::from_utf8(&first).unwrap();
        assert!(text.contains(r#""io.modelcontextprotocol/subscriptionId":18446744073709551616"#), "{text}");
        assert!(text.contains("notifications/subscriptions/acknowledged"), "{text}");
    }
}
