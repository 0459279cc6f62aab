//! The tasks extension (SEP-2663) at the front door: whether a request takes tasks, a
//! front-door `tools/call` that may become a task, and `tasks/get`, `tasks/update`,
//! `tasks/cancel`. The tasks themselves are the supervisor's (any API instance answers).
//!
//! Only a client that takes tasks has its calls sent with a stance that takes them
//! (`Stance::tasks`); any other's is a plain call, so it pays for nothing it cannot use.

use hangar_core::ipc::{
    CallSpec, Called, ErrorKind, IpcError, Relay, Request, Target, TaskCancel, TaskGet, TaskUpdate,
};
use hangar_core::jsonrpc::RpcError;
use hangar_core::mcp::{
    EXTENSION_TASKS, HELD_CALL_STATE_PREFIX, META_CLIENT_CAPABILITIES, MISSING_CAPABILITY, REQUEST_STATE,
};
use serde_json::{Map, Value, json};

use super::front_door::{pass_on, refused_call, upstream_arguments};
use super::params::ToolCall;
use super::stance;
use crate::supervisor::AsCaller;

/// What the server declares under `capabilities.extensions`.
pub fn extensions() -> Value {
    json!({EXTENSION_TASKS: {}})
}

/// Whether this request's client takes tasks: the extension among the client capabilities of
/// its `_meta` (on 2026-07-28 every request says so; the per-request opt-in is the same thing).
pub fn opted_in(params: Option<&Value>) -> bool {
    params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(META_CLIENT_CAPABILITIES))
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(EXTENSION_TASKS))
        .is_some()
}

/// -32021 for a client that did not declare the extension.
pub(super) fn missing_extension(method: &str) -> RpcError {
    RpcError::new(
        MISSING_CAPABILITY,
        format!("{method} needs the {EXTENSION_TASKS} extension, which this request did not declare"),
    )
    .with_data(json!({"requiredCapabilities": {"extensions": {EXTENSION_TASKS: {}}}}))
}

/// A front-door `tools/call` of an upstream tool: for a client that takes tasks, one the
/// supervisor answers as it is or turns into a task; for any other, a plain call.
pub async fn front_door_call(supervisor: &AsCaller, call: ToolCall, opted_in: bool) -> Result<Value, RpcError> {
    let ToolCall { name, arguments, extra, param_headers } = call;
    let arguments = match upstream_arguments(arguments) {
        Ok(arguments) => arguments,
        Err(bad) => {
            super::front_door::resolve(supervisor, &name, None, None).await?;
            return Err(bad);
        }
    };
    let resumes = resumes_held_call(&extra);
    let extra = pass_on(extra);
    let stance = stance::modern(extra.as_ref(), opted_in);
    let called = Called::One { target: Target::Exposed { name }, arguments, timeout_ms: None };
    let param_headers = param_headers.map(Box::new);
    let spec = CallSpec { called, stance, relay: Relay::default(), trace: None, param_headers, extra };
    let answer = supervisor.call(spec).1.await;
    call_answer(answer, resumes)
}

/// Whether a call's params retry a call the hangar holds (its `requestState` is the hangar's).
pub fn resumes_held_call(params: &Map<String, Value>) -> bool {
    params.get(REQUEST_STATE).and_then(Value::as_str).is_some_and(|state| state.starts_with(HELD_CALL_STATE_PREFIX))
}

/// A front-door call's answer as its client sees it (`resumes`: it retried a held call).
pub fn call_answer(answer: Result<Value, IpcError>, resumes: bool) -> Result<Value, RpcError> {
    match answer {
        // A retry naming no call the hangar holds (unknown, expired, spent or another's).
        Err(err) if err.kind == ErrorKind::InvalidArgument && resumes => Err(RpcError::invalid_params(err.message)),
        Err(err) => refused_call(err),
        Ok(result) => Ok(result),
    }
}

/// `tasks/get`, `tasks/update` or `tasks/cancel`.
pub async fn handle(supervisor: &AsCaller, method: &str, params: Option<Value>) -> Result<Value, RpcError> {
    if !opted_in(params.as_ref()) {
        return Err(missing_extension(method));
    }
    let task_id = params.as_ref().and_then(|p| p.get("taskId")).and_then(Value::as_str).map(str::to_owned);
    let task_id =
        task_id.ok_or_else(|| RpcError::invalid_params(format!("Invalid params: {method} needs a string `taskId`")))?;
    let request = match method {
        "tasks/get" => Request::TaskGet(TaskGet { task_id }),
        "tasks/cancel" => Request::TaskCancel(TaskCancel { task_id }),
        _ => {
            let responses = params.as_ref().and_then(|p| p.get("inputResponses")).cloned();
            let responses = responses.filter(Value::is_object).ok_or_else(|| {
                RpcError::invalid_params("Invalid params: tasks/update needs an object `inputResponses`")
            })?;
            Request::TaskUpdate(TaskUpdate { task_id, input_responses: responses })
        }
    };
    supervisor.task(request).await.map_err(|err| match err.kind {
        ErrorKind::NotFound | ErrorKind::InvalidArgument => RpcError::invalid_params(err.message),
        _ => RpcError::internal(err.message),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_takes_tasks_only_when_its_meta_declares_the_extension() {
        let with = json!({"_meta": {META_CLIENT_CAPABILITIES: {"extensions": {EXTENSION_TASKS: {}}}}});
        let without = json!({"_meta": {META_CLIENT_CAPABILITIES: {"extensions": {}}}});
        assert!(opted_in(Some(&with)));
        assert!(!opted_in(Some(&without)));
        assert!(!opted_in(Some(&json!({}))));
        assert!(!opted_in(None));
    }

    #[tokio::test]
    async fn only_a_client_that_takes_tasks_has_its_call_sent_as_a_task_call() {
        use hangar_core::access::Caller;
        use hangar_core::ipc::{CallEra, TakesTasks};
        use std::sync::Arc;

        let fake = crate::testing::FakeSupervisor::new();
        let supervisor = AsCaller::new(fake.clone() as Arc<dyn crate::supervisor::Supervisor>, Caller::anonymous());
        let call = |extensions: Value| {
            let meta = json!({META_CLIENT_CAPABILITIES: {"extensions": extensions}});
            ToolCall::from_params(Some(json!({"name": "echo", "arguments": {"x": 1}, "_meta": meta}))).unwrap()
        };
        // The fake knows no front-door name: each answer is a refusal; what was sent counts.
        let _ = front_door_call(&supervisor, call(json!({})), false).await;
        let _ = front_door_call(&supervisor, call(json!({EXTENSION_TASKS: {}})), true).await;
        let sent = fake.requests.lock().unwrap().clone();
        assert_eq!(sent.len(), 2, "one request a call, no resolve before it: {sent:?}");
        let stance = |request: &Request| match request {
            Request::Call(spec) => match &spec.called {
                Called::One { target: Target::Exposed { name }, .. } if name == "echo" => Some(spec.stance.clone()),
                _ => None,
            },
            _ => None,
        };
        let plain = stance(&sent[0]).expect("a call by front-door name");
        assert_eq!((plain.era, plain.tasks), (CallEra::Modern, None), "a plain call: {:?}", sent[0]);
        let task = stance(&sent[1]).expect("a call by front-door name");
        assert_eq!(task.tasks, Some(TakesTasks { shortcut_ms: stance::SHORTCUT_MS }), "a task call: {:?}", sent[1]);
    }

    #[test]
    fn the_gate_answers_missing_capability_naming_the_extension() {
        let err = missing_extension("tasks/get");
        assert_eq!(err.code, MISSING_CAPABILITY);
        assert!(err.to_json()["data"]["requiredCapabilities"]["extensions"].get(EXTENSION_TASKS).is_some());
    }
}
