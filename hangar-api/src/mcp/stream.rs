//! A front-door `tools/call` answered as an event stream: the upstream's progress and log
//! notifications for the call as they happen, then the response.
//!
//! Used when the client accepts `text/event-stream` and asked for notifications (a
//! `progressToken`, or a `logLevel` in `_meta`). If the client closes the stream, the call is
//! dropped, which cancels it at the supervisor and, from there, upstream.
//!
//! It is the same call as a plain one, answered otherwise: a tool that runs only as a task is
//! refused (-32021, as JSON, before the stream starts) to a client that does not take tasks; a
//! legacy upstream's own request to the client ends the stream with `input_required` (the call
//! is held for the retry, whose own stream carries the rest of its notifications); and for a
//! client that takes tasks, a call still running when the shortcut (`stance::SHORTCUT_MS`) is
//! over ends the stream with its `CreateTaskResult`: its notifications until then came on the
//! stream, the task runs on unheard, and the client polls `tasks/get`.

use axum::body::Bytes;
use axum::http::HeaderMap;
use hangar_core::batch::BatchSpec;
use hangar_core::custom_headers::ParamCheck;
use hangar_core::ipc::{CallSpec, Called, Relay, Target};
use hangar_core::jsonrpc::RpcError;
use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::era::Era;
use super::front_door;
use super::id::Id;
use super::params::{ToolCall, Wanted};
use super::reply::{Answer, McpReply, sse_event};
use super::{stance, tools};
use crate::supervisor::{AsCaller, BoxFuture};

/// One upstream tool call: which tool, its arguments, the client's other params to pass on,
/// and whether its client takes tasks.
pub struct UpstreamCall {
    pub target: Target,
    pub arguments: Value,
    pub extra: Option<Value>,
    pub opted_in: bool,
}

pub fn relay(wanted: &Wanted) -> Relay {
    Relay { progress: wanted.progress_token.is_some(), logs: wanted.wants_logs(), asks: false }
}

/// The notification as the client should see it (one SSE event), or `None` if it did not ask
/// for it.
pub fn rewrite(wanted: &Wanted, notification: Value) -> Option<Bytes> {
    match notification.get("method").and_then(Value::as_str)? {
        "notifications/progress" => {
            let token = wanted.progress_token.as_ref()?;
            let Value::Object(notification) = notification else { return None };
            Some(sse_event(&WithToken { notification: &notification, token }))
        }
        "notifications/message" => {
            let level = notification.pointer("/params/level").and_then(Value::as_str);
            wanted.wants_log_at(level).then(|| sse_event(&notification))
        }
        _ => None,
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

/// Starts the call and answers with its event stream; the final result is shaped by `era`.
pub fn relayed_call(supervisor: AsCaller, id: Id, call: UpstreamCall, wanted: Wanted, era: &'static Era) -> McpReply {
    let (events, stream) = mpsc::channel(64);
    tokio::spawn(async move {
        let UpstreamCall { target, arguments, extra, opted_in } = call;
        let resumes = extra.as_ref().and_then(Value::as_object).is_some_and(front_door::resumes_held_call);
        // The call's headers (and its tool's task support) were checked when its name was resolved.
        let stance = stance::modern(extra.as_ref(), opted_in);
        let called = Called::One { target, arguments, timeout_ms: None };
        let spec = CallSpec::new(called, stance, relay(&wanted), extra);
        let (mut notices, reply) = supervisor.call(spec);
        tokio::pin!(reply);
        let outcome = loop {
            tokio::select! {
                Some(notice) = notices.recv() => {
                    if let Some(notice) = rewrite(&wanted, notice)
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
            if let Some(notice) = rewrite(&wanted, notice) {
                let _ = events.send(notice).await;
            }
        }
        let outcome = front_door::call_answer(outcome, resumes).map(|result| (era.finish)("tools/call", result));
        let _ = events.send(sse_event(&Answer { id, outcome })).await;
    });
    McpReply::events(stream)
}

/// A front-door `tools/call` to an upstream, streamed. `opted_in`: its client takes tasks
/// (and may poll for them: a legacy session's client may not).
pub async fn front_door_call(
    supervisor: &AsCaller,
    id: &Id,
    call: &ToolCall,
    wanted: Wanted,
    era: &'static Era,
    opted_in: bool,
) -> Result<McpReply, RpcError> {
    // Resolved (and its headers checked) first: an unknown name or a header mismatch is a plain
    // JSON answer, and an event stream, once started, cannot turn into one.
    let arguments = front_door::upstream_arguments(call.arguments.clone());
    let check = match (&arguments, &call.param_headers) {
        (Ok(arguments), Some(headers)) => {
            Some(Box::new(ParamCheck { headers: headers.clone(), arguments: arguments.clone() }))
        }
        _ => None,
    };
    let stance = stance::modern(None, opted_in);
    let target = front_door::resolve(supervisor, &call.name, check, Some(stance)).await?;
    let arguments = arguments?;
    let call = UpstreamCall { target, arguments, extra: front_door::pass_on(call.extra.clone()), opted_in };
    Ok(relayed_call(supervisor.clone(), id.clone(), call, wanted, era))
}

/// Who runs a streamed `hangar_call`.
#[derive(Clone, Copy)]
pub enum BatchRun {
    /// The supervisor, as a task if it outlasts the shortcut (a client that takes tasks).
    Task,
    /// The supervisor, its calls' questions answered as one `input_required` (a 2026-07-28
    /// client that can be asked something).
    Held,
    /// The API, each call a request to the supervisor.
    Here,
}

/// `hangar_call` for a client that gave a progress token or a log level: its calls' upstream
/// progress and log lines (at the client's level) as they happen (progress with the client's
/// token, each notification further along than the last, as calls in parallel report their own
/// counts), then the result. For a client that takes tasks ([`BatchRun::Task`]), the supervisor
/// runs the batch: notifications come until the shortcut is over, and the stream then ends with
/// the `CreateTaskResult` (the task runs on unheard). `spec`: its arguments, read.
pub fn hangar_call(
    supervisor: &AsCaller,
    id: &Id,
    call: &ToolCall,
    spec: BatchSpec,
    wanted: Wanted,
    era: &'static Era,
    runs: BatchRun,
) -> McpReply {
    let (supervisor, id, params) = (supervisor.clone(), id.clone(), call.extra.clone());
    let (events, stream) = mpsc::channel(64);
    tokio::spawn(async move {
        let relay = relay(&wanted);
        let (mut notices, result): (_, BoxFuture<'_, Result<Value, RpcError>>) = match runs {
            BatchRun::Task => tools::hangar_call_task_watched(&supervisor, spec, &params, relay),
            BatchRun::Held => tools::hangar_call_held_watched(&supervisor, spec, &params, relay),
            BatchRun::Here => {
                let (sink, notices) = mpsc::unbounded_channel();
                let (supervisor, params) = (&supervisor, &params);
                let result = async move { Ok(tools::hangar_call_watched(supervisor, spec, params, sink, relay).await) };
                (notices, Box::pin(result))
            }
        };
        let mut furthest = Furthest::default();
        tokio::pin!(result);
        let result = loop {
            tokio::select! {
                Some(notice) = notices.recv() => {
                    if furthest.passes(&notice)
                        && let Some(event) = rewrite(&wanted, notice)
                        && events.send(event).await.is_err()
                    {
                        return; // the client left: dropping `result` cancels the calls
                    }
                }
                result = &mut result => break result,
                () = events.closed() => return,
            }
        };
        while let Ok(notice) = notices.try_recv() {
            if furthest.passes(&notice)
                && let Some(event) = rewrite(&wanted, notice)
            {
                let _ = events.send(event).await;
            }
        }
        let outcome = result.map(|result| (era.finish)("tools/call", result));
        let _ = events.send(sse_event(&Answer { id, outcome })).await;
    });
    McpReply::events(stream)
}

/// Which notifications of a batch's calls go on to the client: a log line always, progress only
/// when further along than any before it (the calls report their own progress each).
pub struct Furthest(f64);

impl Default for Furthest {
    fn default() -> Self {
        Furthest(f64::NEG_INFINITY)
    }
}

impl Furthest {
    pub fn passes(&mut self, notice: &Value) -> bool {
        let Some(progress) = notice.pointer("/params/progress") else { return true };
        let progress = progress.as_f64().unwrap_or(f64::NEG_INFINITY);
        let ahead = progress > self.0;
        self.0 = self.0.max(progress);
        ahead
    }
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
    use crate::mcp::id::Echo;
    use hangar_core::mcp::META_LOG_LEVEL;
    use serde_json::json;

    #[test]
    fn only_what_the_client_asked_for_reaches_it() {
        let params = json!({"_meta": {"progressToken": "t-1", META_LOG_LEVEL: "warning"}});
        let wanted = Wanted::from_params(Some(&params), None).unwrap();
        let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 17, "progress": 1}});
        let event = rewrite(&wanted, progress.clone()).unwrap();
        let data: Value = serde_json::from_slice(event.strip_prefix(b"event: message\ndata: ").unwrap()).unwrap();
        assert_eq!(data["params"], json!({"progressToken": "t-1", "progress": 1}), "the client's own token");
        let exact =
            Wanted::from_params(Some(&json!({"_meta": {"progressToken": 100.0}})), Some(json!(1).echo())).unwrap();
        let event = String::from_utf8(rewrite(&exact, progress).unwrap().to_vec()).unwrap();
        assert!(event.contains(r#""params":{"progressToken":1,"progress":1}"#), "the token as written: {event}");
        let log = |level: &str| json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": level, "data": "x"}});
        assert!(rewrite(&wanted, log("info")).is_none(), "below the asked level");
        assert!(rewrite(&wanted, log("error")).is_some());
        assert!(Wanted::from_params(Some(&json!({"_meta": {}})), None).is_none());
        let progress_only = Wanted::from_params(Some(&json!({"_meta": {"progressToken": 3}})), None).unwrap();
        assert!(rewrite(&progress_only, log("emergency")).is_none(), "no logLevel, no log notifications");
    }
}
