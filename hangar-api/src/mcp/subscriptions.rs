//! Long-lived notification streams: 2026-07-28's `subscriptions/listen` (a POST answered with
//! SSE that stays open) and the legacy session's GET stream.
//!
//! The hangar knows when an upstream's tool list changes (the supervisor tells the API), so
//! `toolsListChanged` is honoured. `resourceSubscriptions` are honoured through the front door
//! for every URI a server the caller sees has: the listen is a session of its own at the
//! supervisor (as a legacy session is), subscribed to each URI as a legacy session's
//! `resources/subscribe` is (a legacy upstream is asked `resources/subscribe`, a 2026-07-28 one
//! is held a listen of its own), and it ends with the stream. Each update comes as
//! `notifications/resources/updated`, naming the URI as the client wrote it. Prompt and resource
//! list changes are not tracked, and the acknowledgement says so rather than promising what would
//! never come.
//! `taskIds` (the tasks extension, SEP-2663) is honoured for the caller's own live tasks: each
//! comes as `notifications/tasks` (a `DetailedTask`) as it stands and at every status change.

use axum::body::Bytes;
use hangar_core::ipc::MAX_FOLLOWED_TASKS;
use hangar_core::jsonrpc::RpcError;
use hangar_core::mcp::{META_SUBSCRIPTION_ID, NOTIFICATION_TASKS};
use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::id::Id;
use super::reply::{McpReply, sse_event};
use crate::state::{Calling, ListChanged};
use crate::supervisor::{AsCaller, BoxFuture};
use hangar_core::ipc::{IpcError, Reply, SessionChange};

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
    /// A task notification's `DetailedTask`, inline.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    task: Option<Value>,
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

/// One notification of the subscription `id`: `notifications` (an acknowledgement's), or a
/// task inline.
fn notification(id: &Id, method: &'static str, notifications: Option<Value>, task: Option<Value>) -> Bytes {
    sse_event(&Notification {
        jsonrpc: "2.0",
        method,
        params: Params { notifications, task, meta: SubscriptionMeta { subscription_id: id } },
    })
}

/// `subscriptions/listen`: acknowledges the filter it honours, then streams what was asked for.
/// Asking for `taskIds` without declaring the tasks extension is refused (-32021), as SEP-2663
/// says.
pub fn listen(app: &Calling, id: &Id, params: Option<&Value>, front_door: bool) -> Result<McpReply, RpcError> {
    let asked = params.and_then(|p| p.get("notifications"));
    let tools = front_door && asked.and_then(|n| n.get("toolsListChanged")).and_then(Value::as_bool) == Some(true);
    let task_ids = asked_task_ids(asked)?;
    if task_ids.is_some() && !super::tasks::opted_in(params) {
        return Err(super::tasks::missing_extension("subscriptions/listen with `taskIds`"));
    }
    let honoured = json!({
        "toolsListChanged": tools,
        "promptsListChanged": false,
        "resourcesListChanged": false,
        "resourceSubscriptions": [],
    });
    let changed = notification(id, "notifications/tools/list_changed", None, None);
    let resources = if front_door { asked_resources(asked)? } else { Vec::new() };
    let acknowledge = Acknowledge { id: id.clone(), honoured, task_ids, resources };
    Ok(stream(app, Some(acknowledge), tools.then_some(changed), None))
}

/// The most resources one listen subscribes to.
const MAX_RESOURCE_SUBSCRIPTIONS: usize = 64;

/// The `resourceSubscriptions` a listen asks for: at most [`MAX_RESOURCE_SUBSCRIPTIONS`] URIs,
/// else -32602.
fn asked_resources(asked: Option<&Value>) -> Result<Vec<String>, RpcError> {
    let Some(uris) = asked.and_then(|n| n.get("resourceSubscriptions")) else { return Ok(Vec::new()) };
    let uris = uris.as_array().filter(|uris| uris.len() <= MAX_RESOURCE_SUBSCRIPTIONS).ok_or_else(|| {
        RpcError::invalid_params(format!(
            "`resourceSubscriptions` must be a list of at most {MAX_RESOURCE_SUBSCRIPTIONS} URIs"
        ))
    })?;
    let uris: Option<Vec<String>> = uris.iter().map(|uri| uri.as_str().map(str::to_owned)).collect();
    uris.ok_or_else(|| RpcError::invalid_params("`resourceSubscriptions` must hold URIs (strings)"))
}

/// Opens the listen's own session at the supervisor and subscribes it to each of `uris` a
/// server the caller sees has; the session's id and the URIs subscribed. Nothing is opened when
/// none is asked for, or none could be.
async fn subscribe_resources(supervisor: &AsCaller, uris: Vec<String>) -> Option<(String, Vec<String>)> {
    if uris.is_empty() {
        return None;
    }
    let version = hangar_core::mcp::LATEST_LEGACY_REVISION;
    let session = super::session::mint(version);
    if let Err(err) = supervisor.session_open(&session, version, json!({}), None).await {
        tracing::debug!(kind = err.kind.as_str(), "a listen's resource subscriptions were not opened");
        return None;
    }
    let mut subscribed = Vec::new();
    for uri in uris {
        let Some((mcp_server, upstream_uri)) = super::front_door::resource_owner_of(supervisor, &uri).await else {
            continue;
        };
        let recorded = supervisor.session_use(&session, Some(SessionChange::Subscribe(uri.clone()))).await;
        // As a legacy session's `resources/subscribe`: asked of the owner, a legacy upstream
        // (one that cannot take it does not fail it), held as a listen for a 2026-07-28 one.
        let _ = supervisor.forward(&mcp_server, "resources/subscribe", json!({"uri": upstream_uri})).await;
        let bridged = SessionChange::SubscribeUpstream { uri: uri.clone(), mcp_server, upstream_uri };
        if recorded.is_ok() && supervisor.session_use(&session, Some(bridged)).await.is_ok() {
            subscribed.push(uri);
        }
    }
    Some((session, subscribed))
}

/// The `taskIds` a listen asks for: `None` when absent; a list of at most
/// [`MAX_FOLLOWED_TASKS`] strings, else -32602.
fn asked_task_ids(asked: Option<&Value>) -> Result<Option<Vec<String>>, RpcError> {
    let Some(ids) = asked.and_then(|n| n.get("taskIds")) else { return Ok(None) };
    let ids = ids.as_array().filter(|ids| ids.len() <= MAX_FOLLOWED_TASKS).ok_or_else(|| {
        RpcError::invalid_params(format!("`taskIds` must be a list of at most {MAX_FOLLOWED_TASKS} task ids"))
    })?;
    let ids: Option<Vec<String>> = ids.iter().map(|id| id.as_str().map(str::to_owned)).collect();
    ids.map(Some).ok_or_else(|| RpcError::invalid_params("`taskIds` must hold task ids (strings)"))
}

/// The acknowledgement a listen starts with: what it honours, and the tasks asked for (the
/// supervisor says which of them it will hear of before the acknowledgement goes).
struct Acknowledge {
    id: Id,
    honoured: Value,
    task_ids: Option<Vec<String>>,
    /// The resource URIs asked for (honoured only through the front door).
    resources: Vec<String>,
}

/// The legacy GET stream of a session: `notifications/tools/list_changed` as tools change (only
/// behind the front door: an egress client's list, the `hangar_*` tools, never changes), and
/// whatever the supervisor has for the session (it holds the session's stream meanwhile).
pub fn legacy_stream(app: &Calling, session_id: String, front_door: bool) -> McpReply {
    let changed = sse_event(&json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    stream(app, None, front_door.then_some(changed), Some(session_id))
}

/// The caller's tasks a listen follows: the acknowledgement's `taskIds`, the stream of their
/// states and the follow itself (over once every task is finished).
async fn follow_tasks<'a>(
    supervisor: &'a AsCaller,
    acknowledge: &mut Acknowledge,
) -> (Option<mpsc::UnboundedReceiver<Value>>, Option<BoxFuture<'a, Result<Reply, IpcError>>>) {
    let Some(task_ids) = acknowledge.task_ids.take() else { return (None, None) };
    let (mut states, mut followed) = supervisor.follow_tasks(task_ids);
    let accepted = tokio::select! {
        first = states.recv() => first.and_then(|first| first.get("taskIds").cloned()),
        over = &mut followed => {
            if let Err(err) = over {
                tracing::debug!(error = %err.message, "the supervisor follows none of a listen's tasks");
            }
            acknowledge.honoured["taskIds"] = json!([]);
            return (None, None);
        }
    };
    acknowledge.honoured["taskIds"] = accepted.unwrap_or_else(|| json!([]));
    (Some(states), Some(followed))
}

/// `first`, then `on_tools` whenever the tools of a server the caller sees change: each one
/// whole SSE event, encoded once. Whether the caller sees the server is the supervisor's answer
/// (a caller with a profile asks for it; one without sees every server), so a caller is not
/// told about servers outside its view. With a `session`, its messages too, until it ends.
fn stream(app: &Calling, first: Option<Acknowledge>, on_tools: Option<Bytes>, session: Option<String>) -> McpReply {
    let mut changes = app.changes.subscribe();
    let supervisor = app.supervisor.clone();
    let (events, receiver) = mpsc::channel(16);
    tokio::spawn(async move {
        let mut session = session;
        // The listen's own session, ended with the stream (when this task ends, however).
        let mut _owned = None;
        let (mut tasks, mut tasks_followed, mut subscription) = (None, None, None);
        if let Some(mut acknowledge) = first {
            (tasks, tasks_followed) = follow_tasks(&supervisor, &mut acknowledge).await;
            if let Some((listen_session, subscribed)) =
                subscribe_resources(&supervisor, std::mem::take(&mut acknowledge.resources)).await
            {
                acknowledge.honoured["resourceSubscriptions"] = json!(subscribed);
                session = Some(listen_session.clone());
                _owned = Some(EndsSession { supervisor: supervisor.clone(), session: listen_session });
            }
            let Acknowledge { id, honoured, .. } = acknowledge;
            let acknowledged = notification(&id, "notifications/subscriptions/acknowledged", Some(honoured), None);
            if events.send(acknowledged).await.is_err() {
                return;
            }
            subscription = Some(id);
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
                message = next_message(&mut messages) => match (message, &subscription) {
                    // A listen's resource update names its subscription, as every notification
                    // of a listen does.
                    (Some(message), Some(id)) if message["method"] == "notifications/resources/updated" => {
                        notification(id, "notifications/resources/updated", None, message.get("params").cloned())
                    }
                    (Some(message), _) => sse_event(&message),
                    (None, _) => return,
                },
                () = session_over(&mut followed) => return,
                task = next_message(&mut tasks) => match (task, &subscription) {
                    (Some(task), Some(id)) => notification(id, NOTIFICATION_TASKS, None, Some(task)),
                    _ => {
                        // Every followed task is finished: the stream goes on for the rest.
                        tasks = None;
                        continue;
                    }
                },
                () = session_over(&mut tasks_followed) => {
                    // Its last states may still be queued: they come before the follow is let go.
                    tasks_followed = None;
                    continue;
                },
                change = changes.recv() => match (change, &on_tools) {
                    (Ok(ListChanged::Tools(mcp_server)), Some(notification)) => {
                        // An empty id: a reload changed the servers, or who sees them.
                        if !mcp_server.is_empty() && !sees(&supervisor, &mcp_server).await {
                            continue;
                        }
                        notification.clone()
                    }
                    (Err(broadcast::error::RecvError::Lagged(_)), Some(notification)) => notification.clone(),
                    (Err(broadcast::error::RecvError::Closed), _) => return,
                    _ => continue,
                },
                () = events.closed() => return,
            };
            if events.send(event).await.is_err() {
                return;
            }
        }
    });
    McpReply::events(receiver)
}

/// A listen's own session, ended (from a task of its own) when the stream is dropped.
struct EndsSession {
    supervisor: AsCaller,
    session: String,
}

impl Drop for EndsSession {
    fn drop(&mut self) {
        let (supervisor, session) = (self.supervisor.clone(), std::mem::take(&mut self.session));
        tokio::spawn(async move {
            if let Err(err) = supervisor.session_end(&session).await {
                tracing::debug!(kind = err.kind.as_str(), "a listen's session was not ended; its TTL will");
            }
        });
    }
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
        let mut reply = listen(&app, &id, None, true).unwrap();
        let first = reply.events.as_mut().unwrap().recv().await.unwrap();
        let text = std::str::from_utf8(&first).unwrap();
        assert!(text.contains(r#""io.modelcontextprotocol/subscriptionId":18446744073709551616"#), "{text}");
        assert!(text.contains("notifications/subscriptions/acknowledged"), "{text}");
    }
}
