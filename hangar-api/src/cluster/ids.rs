//! Which id of a request names the hangar that holds its state: the legacy `Mcp-Session-Id`,
//! else a journal stream's `Last-Event-ID` (on `GET /api/events` only: on any other request the
//! header names no state, so it cannot send a start, a stop or a reload to a pod of the
//! client's choosing), else the `taskId` of a `tasks/*` request (or the
//! first of a `subscriptions/listen`'s `taskIds`: a client follows the tasks it made through one
//! hangar, so they share their owner), else the `requestState` of a call or a `hangar_call`
//! batch retried after `input_required` when it names one the hangar holds (SEP-2322).

use axum::body::Bytes;
use axum::http::HeaderMap;
use hangar_core::cluster::{Cluster, Owner};
use hangar_core::mcp::{
    HEADER_SESSION_ID, HELD_BATCH_STATE_PREFIX, HELD_CALL_STATE_PREFIX, METHOD_SUBSCRIPTIONS_LISTEN, REQUEST_STATE,
};
use serde::Deserialize;

/// What kind of state an id names (said in the error when its owner is unavailable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    Session,
    Task,
    /// A call held for its client's answer.
    Call,
    /// A journal event stream resumed with `Last-Event-ID`.
    Events,
}

impl Held {
    pub fn as_str(self) -> &'static str {
        match self {
            Held::Session => "session",
            Held::Task => "task",
            Held::Call => "call",
            Held::Events => "event stream",
        }
    }
}

/// Where a journal event stream is served: the one request `Last-Event-ID` routes.
pub const EVENTS_PATH: &str = "/api/events";

/// The owner of the state a request to `path` names, and what that state is, if an id names one.
pub fn owner(cluster: &Cluster, path: &str, headers: &HeaderMap, body: &Bytes) -> Option<(Owner, Held)> {
    if let Some(session) = headers.get(HEADER_SESSION_ID).and_then(|v| v.to_str().ok()) {
        let owner = cluster.owner_of(session);
        if owner != Owner::Untagged {
            return Some((owner, Held::Session));
        }
    }
    if path == EVENTS_PATH
        && let Some(last) = headers.get("last-event-id").and_then(|v| v.to_str().ok())
    {
        let owner = cluster.owner_of(last.trim());
        if owner != Owner::Untagged {
            return Some((owner, Held::Events));
        }
    }
    let (id, held) = body_id(body)?;
    Some((cluster.owner_of(&id), held)).filter(|(owner, _)| *owner != Owner::Untagged)
}

/// The `taskId` of a `tasks/*` request, or a held call's `requestState`; only bodies that
/// mention one are parsed.
fn body_id(body: &Bytes) -> Option<(String, Held)> {
    #[derive(Deserialize)]
    struct Message {
        method: String,
        params: Params,
    }
    #[derive(Deserialize)]
    struct Params {
        #[serde(rename = "taskId")]
        task_id: Option<String>,
        #[serde(rename = "requestState")]
        request_state: Option<String>,
        #[serde(default)]
        notifications: Option<Notifications>,
    }
    #[derive(Deserialize)]
    struct Notifications {
        #[serde(rename = "taskIds", default)]
        task_ids: Vec<String>,
    }
    let mentions = |key: &str| body.windows(key.len()).any(|w| w == key.as_bytes());
    if !mentions("taskId") && !mentions(REQUEST_STATE) {
        return None;
    }
    let message: Message = serde_json::from_slice(body).ok()?;
    if message.method.starts_with("tasks/") {
        return message.params.task_id.map(|id| (id, Held::Task));
    }
    if message.method == METHOD_SUBSCRIPTIONS_LISTEN {
        let first = message.params.notifications.and_then(|n| n.task_ids.into_iter().next());
        return first.map(|id| (id, Held::Task));
    }
    let ours = |s: &String| s.starts_with(HELD_CALL_STATE_PREFIX) || s.starts_with(HELD_BATCH_STATE_PREFIX);
    let state = message.params.request_state.filter(ours)?;
    Some((state, Held::Call))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(url: &str) -> Cluster {
        Cluster::with_secret(url.into(), b"0123456789abcdef0123456789abcdef").unwrap()
    }

    #[test]
    fn the_session_header_then_the_task_id_name_the_owner() {
        let (a, b) = (member("http://10.0.0.1:8000"), member("http://10.0.0.2:8000"));
        let elsewhere = Owner::Elsewhere("http://10.0.0.1:8000".into());
        let mut headers = HeaderMap::new();
        headers.insert(HEADER_SESSION_ID, a.tagged("hgr1-2025-11-25-00").parse().unwrap());
        assert_eq!(owner(&b, "/mcp", &headers, &Bytes::new()), Some((elsewhere.clone(), Held::Session)));
        let task = Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{{"taskId":"{}"}}}}"#,
            a.tagged("0f")
        ));
        assert_eq!(owner(&b, "/mcp", &HeaderMap::new(), &task), Some((elsewhere, Held::Task)));
        assert_eq!(owner(&a, "/mcp", &HeaderMap::new(), &task), Some((Owner::Here, Held::Task)));
        let untagged = Bytes::from(r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"0f"}}"#);
        assert_eq!(owner(&b, "/mcp", &HeaderMap::new(), &untagged), None);
        let not_a_task = Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"taskId":"{}"}}}}"#,
            a.tagged("0f")
        ));
        assert_eq!(owner(&b, "/mcp", &HeaderMap::new(), &not_a_task), None);
        assert_eq!(owner(&b, "/mcp", &HeaderMap::new(), &Bytes::from_static(b"taskId{not json")), None);
        let retry = Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"x","requestState":"{}"}}}}"#,
            a.tagged("hangar-held-0f")
        ));
        assert_eq!(
            owner(&b, "/mcp", &HeaderMap::new(), &retry),
            Some((Owner::Elsewhere("http://10.0.0.1:8000".into()), Held::Call))
        );
        let upstreams_own = Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"x","requestState":"{}"}}}}"#,
            a.tagged("opaque")
        ));
        assert_eq!(owner(&b, "/mcp", &HeaderMap::new(), &upstreams_own), None, "an upstream's own state is not ours");
        let batch_retry = Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"hangar_call","requestState":"{}"}}}}"#,
            a.tagged("hangar-batch-0f")
        ));
        assert_eq!(
            owner(&b, "/mcp", &HeaderMap::new(), &batch_retry),
            Some((Owner::Elsewhere("http://10.0.0.1:8000".into()), Held::Call))
        );
        let listen = Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{{"notifications":{{"taskIds":["{}"]}}}}}}"#,
            a.tagged("0f")
        ));
        assert_eq!(
            owner(&b, "/mcp", &HeaderMap::new(), &listen),
            Some((Owner::Elsewhere("http://10.0.0.1:8000".into()), Held::Task))
        );
        let listen_untagged = Bytes::from(
            r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["0f"]}}}"#,
        );
        assert_eq!(owner(&b, "/mcp", &HeaderMap::new(), &listen_untagged), None);
    }

    #[test]
    fn a_last_event_id_names_the_owner_of_an_event_stream_only() {
        let (a, b) = (member("http://10.0.0.1:8000"), member("http://10.0.0.2:8000"));
        let mut headers = HeaderMap::new();
        headers.insert("last-event-id", a.tagged("42").parse().unwrap());
        let elsewhere = Owner::Elsewhere("http://10.0.0.1:8000".into());
        assert_eq!(owner(&b, EVENTS_PATH, &headers, &Bytes::new()), Some((elsewhere, Held::Events)));
        for path in ["/api/config/reload", "/api/mcp_servers/x/start", "/mcp", "/api/events/", "/"] {
            assert_eq!(owner(&b, path, &headers, &Bytes::new()), None, "{path}");
        }
    }
}
