//! The control-socket requests about calls besides the call itself ([`crate::call::CallSpec`]):
//! resolving a front-door name before a streamed call, the tasks a call became, and a legacy
//! client's cancels and answers. Each is one `ipc::Request` variant's body, so the supervisor
//! answers each with a handler of its own.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::call::Stance;
use crate::custom_headers::ParamCheck;

/// Where a front-door tool name leads, as a call by that name would go: answers
/// [`Reply::Resolved`](crate::ipc::Reply::Resolved), or [`ErrorKind::UnknownTool`](crate::ipc::ErrorKind::UnknownTool).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resolve {
    pub name: String,
    /// `Mcp-Param-*` headers to check, as [`CallSpec::param_headers`](crate::call::CallSpec::param_headers), against the tool the
    /// name leads to and the arguments the call will carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub param_check: Option<Box<ParamCheck>>,
    /// Before a streamed front-door call: its client's stance, so a tool that declares
    /// `taskSupport: required` is refused here ([`ErrorKind::MissingCapability`](crate::ipc::ErrorKind::MissingCapability)) to a
    /// [`CallEra::Modern`](crate::call::CallEra::Modern) client that takes no tasks, before the stream starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stance: Option<Stance>,
}

/// `tasks/get`: the task as its creator sees it (a `DetailedTask`); another caller's or an
/// unknown or expired id is [`ErrorKind::NotFound`](crate::ipc::ErrorKind::NotFound).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskGet {
    pub task_id: String,
}

/// `tasks/update`: answers to a task's `inputRequests`; the task resumes once all are in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskUpdate {
    pub task_id: String,
    pub input_responses: Value,
}

/// `tasks/cancel`: stops the task's call (the upstream hears `notifications/cancelled`);
/// a task already finished is left as it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskCancel {
    pub task_id: String,
}

/// A legacy client's `notifications/cancelled`: stops the caller's own call whose
/// [`Stance::cancel_by`] names that session and request id, if it still runs. Answers
/// [`Reply::ClientCancelled`](crate::ipc::Reply::ClientCancelled).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CancelClientCall {
    pub session: String,
    pub request_id: Value,
}

/// Waits for the client's answer to a server-to-client request (id `request_id`) that the
/// caller sent on a stream of `session`: a [`ServerFrame::Notice`](crate::ipc::ServerFrame::Notice) (`{}`) once the wait is
/// registered, then [`Reply::ClientAnswered`](crate::ipc::Reply::ClientAnswered), whichever API instance the answer reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AwaitClientAnswer {
    pub session: String,
    pub request_id: String,
}

/// A client's JSON-RPC response (the message: `result` or `error`) to a server-to-client
/// request, handed to the caller's own [`Request::AwaitClientAnswer`](crate::ipc::Request::AwaitClientAnswer). Answers
/// [`Reply::ClientAnswerDelivered`](crate::ipc::Reply::ClientAnswerDelivered).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientAnswer {
    pub session: String,
    pub request_id: String,
    pub response: Value,
}

/// The client's response message (`result` or `error`) to an upstream's own request that a
/// call relayed with [`Relay::asks`](crate::ipc::Relay::asks), by the `id` it was relayed with. Answers
/// [`Reply::UpstreamAnswered`](crate::ipc::Reply::UpstreamAnswered).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerUpstream {
    pub mcp_server: String,
    pub ask_id: String,
    pub response: Value,
}

/// Status notifications of the caller's own tasks among `task_ids` (a 2026-07-28
/// `subscriptions/listen` with `taskIds`): a first [`ServerFrame::Notice`](crate::ipc::ServerFrame::Notice) names the ones
/// it will hear of (`{"taskIds": [...]}`: the caller's, live; at most [`MAX_FOLLOWED_TASKS`](crate::ipc::MAX_FOLLOWED_TASKS)),
/// then each such task as it stands (a `DetailedTask`), then again at every status change,
/// until all of them are finished (answered [`Reply::Task`](crate::ipc::Reply::Task) `{}`) or the caller cancels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskFollow {
    pub task_ids: Vec<String>,
}
