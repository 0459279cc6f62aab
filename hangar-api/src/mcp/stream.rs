//! A front-door `tools/call` answered as an event stream: the upstream's progress and log
//! notifications for the call as they happen, then the response.
//!
//! Used when the client accepts `text/event-stream` and asked for notifications (a
//! `progressToken`, or a `logLevel` in `_meta`). If the client closes the stream, the call is
//! dropped, which cancels it at the supervisor and, from there, upstream.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::HeaderMap;
use hangar_core::ipc::{Relay, Target};
use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::errors::RpcError;
use super::front_door::{self, upstream_failure};
use super::id::{Echo, Id};
use super::reply::{Answer, McpReply, sse_event};
use crate::app::AppState;
use crate::supervisor::Supervisor;

const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// Syslog severities, least severe first, as MCP logging uses them.
const LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/// What the client asked to hear about its call, from its `_meta`.
pub struct Wanted {
    /// As the client wrote it: it is echoed in every progress notification.
    progress_token: Option<Id>,
    log_level: Option<usize>,
}

impl Wanted {
    /// `None` when the client asked for no notifications (a plain JSON answer then).
    /// `raw_token` is the progress token as the client wrote it (see `Incoming::progress_token`).
    pub fn from_params(params: Option<&Value>, raw_token: Option<Id>) -> Option<Wanted> {
        let meta = params?.get("_meta")?;
        let token = meta.get("progressToken").filter(|t| t.is_string() || t.is_number());
        let progress_token = token.map(|token| raw_token.unwrap_or_else(|| token.echo()));
        let log_level =
            meta.get(META_LOG_LEVEL).and_then(Value::as_str).and_then(|l| LEVELS.iter().position(|x| *x == l));
        (progress_token.is_some() || log_level.is_some()).then_some(Wanted { progress_token, log_level })
    }

    fn relay(&self) -> Relay {
        Relay { progress: self.progress_token.is_some(), logs: self.log_level.is_some() }
    }

    /// The notification as the client should see it (one SSE event), or `None` if it did not
    /// ask for it.
    fn rewrite(&self, notification: Value) -> Option<Bytes> {
        match notification.get("method").and_then(Value::as_str)? {
            "notifications/progress" => {
                let token = self.progress_token.as_ref()?;
                let Value::Object(notification) = notification else { return None };
                Some(sse_event(&WithToken { notification: &notification, token }))
            }
            "notifications/message" => {
                let wanted = self.log_level?;
                let level = notification.pointer("/params/level").and_then(Value::as_str);
                let severity = level.and_then(|l| LEVELS.iter().position(|x| *x == l)).unwrap_or(LEVELS.len());
                (severity >= wanted).then(|| sse_event(&notification))
            }
            _ => None,
        }
    }
}

/// A progress notification with the client's own token in place of the supervisor's.
struct WithToken<'a> {
    notification: &'a Map<String, Value>,
    token: &'a Id,
}

impl Serialize for WithToken<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (key, value) in self.notification {
            match value {
                Value::Object(params) if key == "params" => {
                    map.serialize_entry(key, &ParamsWithToken { params, token: self.token })?
                }
                _ => map.serialize_entry(key, value)?,
            }
        }
        map.end()
    }
}

struct ParamsWithToken<'a> {
    params: &'a Map<String, Value>,
    token: &'a Id,
}

impl Serialize for ParamsWithToken<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("progressToken", self.token)?;
        for (key, value) in self.params.iter().filter(|(key, _)| *key != "progressToken") {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// Starts the call and answers with its event stream. `finish` shapes the final result (the
/// era's fields) before it is sent.
#[allow(clippy::too_many_arguments)]
pub fn relayed_call(
    supervisor: Arc<dyn Supervisor>,
    id: Id,
    target: Target,
    arguments: Value,
    extra: Option<Value>,
    wanted: Wanted,
    finish: fn(Value) -> Value,
) -> McpReply {
    let (events, stream) = mpsc::channel(64);
    tokio::spawn(async move {
        let (mut notices, reply) = supervisor.call_relayed(target, arguments, extra, wanted.relay());
        tokio::pin!(reply);
        let outcome = loop {
            tokio::select! {
                Some(notice) = notices.recv() => {
                    if let Some(notice) = wanted.rewrite(notice)
                        && events.send(notice).await.is_err()
                    {
                        return; // the client left: dropping `reply` cancels the call
                    }
                }
                outcome = &mut reply => break outcome,
                () = events.closed() => return,
            }
        };
        // Notices that raced the reply still go first.
        while let Ok(notice) = notices.try_recv() {
            if let Some(notice) = wanted.rewrite(notice) {
                let _ = events.send(notice).await;
            }
        }
        let answer = Answer { id, outcome: outcome.or_else(upstream_failure).map(finish) };
        let _ = events.send(sse_event(&answer)).await;
    });
    McpReply::events(stream)
}

/// A front-door `tools/call` to an upstream, streamed; `None` for a hangar tool (answered as
/// JSON). `finish` shapes the result for the client's era.
pub async fn front_door_call(
    app: &AppState,
    id: &Id,
    params: Option<Value>,
    wanted: Wanted,
    finish: fn(Value) -> Value,
) -> Result<Option<McpReply>, RpcError> {
    let mut params = match params {
        Some(Value::Object(map)) => map,
        _ => return Ok(None),
    };
    let Some(name) = params.get("name").and_then(Value::as_str).map(str::to_owned) else { return Ok(None) };
    if front_door::route(&name) == front_door::Route::Hangar {
        return Ok(None);
    }
    let target = front_door::resolve(&app.supervisor, &name).await?;
    let arguments = front_door::upstream_arguments(params.remove("arguments"))?;
    params.remove("name");
    let extra = front_door::pass_on(params);
    Ok(Some(relayed_call(app.supervisor.clone(), id.clone(), target, arguments, extra, wanted, finish)))
}

/// Whether the client takes `text/event-stream` answers.
pub fn accepts_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|t| t.trim().starts_with("text/event-stream")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_what_the_client_asked_for_reaches_it() {
        let params = json!({"_meta": {"progressToken": "t-1", META_LOG_LEVEL: "warning"}});
        let wanted = Wanted::from_params(Some(&params), None).unwrap();
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 17, "progress": 1}});
        let event = wanted.rewrite(progress.clone()).unwrap();
        let data: Value = serde_json::from_slice(event.strip_prefix(b"event: message\ndata: ").unwrap()).unwrap();
        assert_eq!(data["params"], json!({"progressToken": "t-1", "progress": 1}), "the client's own token");
        let exact =
            Wanted::from_params(Some(&json!({"_meta": {"progressToken": 100.0}})), Some(json!(1).echo())).unwrap();
        let event = String::from_utf8(exact.rewrite(progress).unwrap().to_vec()).unwrap();
        assert!(event.contains(r#""params":{"progressToken":1,"progress":1}"#), "the token as written: {event}");
        let log = |level: &str| json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": level, "data": "x"}});
        assert!(wanted.rewrite(log("info")).is_none(), "below the asked level");
        assert!(wanted.rewrite(log("error")).is_some());
        assert!(Wanted::from_params(Some(&json!({"_meta": {}})), None).is_none());
        let progress_only = Wanted::from_params(Some(&json!({"_meta": {"progressToken": 3}})), None).unwrap();
        assert!(progress_only.rewrite(log("emergency")).is_none(), "no logLevel, no log notifications");
    }
}
