//! The tasks extension (SEP-2663) at the front door: whether a request takes tasks, and
//! `tasks/get`, `tasks/update`, `tasks/cancel` (a front-door `tools/call` that may become a task
//! is `front_door::call`'s). The tasks themselves are the supervisor's (any API instance answers).
//!
//! Only a client that takes tasks has its calls sent with a stance that takes them
//! (`Stance::tasks`); any other's is a plain call, so it pays for nothing it cannot use.

use hangar_core::ipc::{ErrorKind, Request, TaskCancel, TaskGet, TaskUpdate};
use hangar_core::jsonrpc::RpcError;
use hangar_core::mcp::{EXTENSION_TASKS, META_CLIENT_CAPABILITIES, MISSING_CAPABILITY};
use serde_json::{Value, json};

use crate::supervisor::AsCaller;

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

    #[test]
    fn the_gate_answers_missing_capability_naming_the_extension() {
        let err = missing_extension("tasks/get");
        assert_eq!(err.code, MISSING_CAPABILITY);
        assert!(err.to_json()["data"]["requiredCapabilities"]["extensions"].get(EXTENSION_TASKS).is_some());
    }
}
