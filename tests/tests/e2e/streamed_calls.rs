//! Streamed front-door calls (a progress token or a log level, answered as an event stream) are
//! the same calls as plain ones: a tool that runs only as a task is refused to a client that does
//! not take tasks, before any stream starts; for one that does, a slow call's stream carries its
//! progress until the shortcut is over and then ends with a `CreateTaskResult`, and any API
//! instance answers for the task; and a legacy upstream's own request to the client (sampling)
//! ends the stream `input_required`, the call held until the retry, from another instance, answers.

use std::time::Duration;

use hangar_tests::serde_json::{self, Value, json};
use hangar_tests::{Hangar, node, poll, server_everything};

const TASKS: &str = "io.modelcontextprotocol/tasks";

fn conformance_hangar() -> Hangar {
    Hangar::start("tool_access: {mode: front_door}\nmcp_servers:\n  conf: {command: [\"{fake}\", \"--conformance\"]}\n")
}

/// A 2026-07-28 request to the API at `base` (`http://...`); `meta` joins its `_meta`. Answers
/// the HTTP status, the content type and the body's text.
pub(crate) fn post(base: &str, method: &str, mut params: Value, meta: Value) -> (u16, String, String) {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    if let Value::Object(meta) = meta {
        for (key, value) in meta {
            params["_meta"][key] = value;
        }
    }
    let named = params.get("name").or_else(|| params.get("taskId")).and_then(Value::as_str).map(str::to_owned);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut request = agent
        .post(&format!("{base}/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method);
    if let Some(name) = &named {
        request = request.header("Mcp-Name", name.as_str());
    }
    let mut response = request.send(body.to_string().as_bytes()).unwrap();
    let status = response.status().as_u16();
    let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    (status, content_type, response.body_mut().read_to_string().unwrap_or_default())
}

/// The JSON-RPC messages of an event-stream answer, in order.
pub(crate) fn events(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

/// A streamed `tools/call` (it gives a progress token) with the client's `capabilities`: the
/// stream's messages, the last one the response.
pub(crate) fn streamed(base: &str, call: Value, capabilities: Value) -> Vec<Value> {
    let meta = json!({"progressToken": "p-1", "io.modelcontextprotocol/clientCapabilities": capabilities});
    let (status, content_type, text) = post(base, "tools/call", call, meta);
    assert_eq!((status, content_type.as_str()), (200, "text/event-stream"), "{text}");
    let events = events(&text);
    assert!(events.last().is_some_and(|last| last.get("id").is_some()), "the stream ends with the response: {text}");
    events
}

#[test]
fn a_streamed_call_of_a_task_only_tool_is_refused_to_a_client_without_tasks() {
    let hangar = conformance_hangar();
    let meta = json!({"progressToken": "p-1"});
    let (status, content_type, text) =
        post(&hangar.base, "tools/call", json!({"name": "failing_job", "arguments": {}}), meta);
    // Refused before any stream starts: a plain JSON error naming the extension.
    assert_eq!((status, content_type.as_str()), (400, "application/json"), "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["error"]["code"], -32021, "{body}");
    assert!(body["error"]["data"]["requiredCapabilities"]["extensions"].get(TASKS).is_some(), "{body}");
    // A tool that does not need tasks streams as before.
    let events = streamed(&hangar.base, json!({"name": "test_tool_with_progress", "arguments": {}}), json!({}));
    let progress: Vec<&Value> = events.iter().filter(|e| e["method"] == "notifications/progress").collect();
    assert_eq!(progress.len(), 3, "{events:?}");
    assert!(progress.iter().all(|p| p["params"]["progressToken"] == "p-1"), "{events:?}");
    // (The upstream was given a token of the supervisor's own.)
    let text = events.last().unwrap()["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    assert!(text.starts_with("Progress reported to token"), "{events:?}");
}

#[test]
fn a_streamed_slow_call_becomes_a_task_that_another_api_instance_answers_for() {
    let hangar = conformance_hangar();
    let other = hangar.extra_api(&[]);
    let other_base = format!("http://{}", other.addr);
    let takes_tasks = json!({"extensions": {TASKS: {}}});

    // Quicker than the shortcut: answered on the stream as it is, progress first.
    let quick =
        streamed(&hangar.base, json!({"name": "test_tool_with_progress", "arguments": {}}), takes_tasks.clone());
    assert_eq!(quick.iter().filter(|e| e["method"] == "notifications/progress").count(), 3, "{quick:?}");
    assert_eq!(quick.last().unwrap()["result"]["resultType"], "complete", "{quick:?}");

    // Slower: its progress until then, then the task.
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 1.5, "label": "pi"}});
    let slow = streamed(&hangar.base, call, takes_tasks.clone());
    let progress = slow.iter().find(|e| e["method"] == "notifications/progress").expect("progress before the task");
    assert_eq!((&progress["params"]["progressToken"], &progress["params"]["progress"]), (&json!("p-1"), &json!(0)));
    let created = &slow.last().unwrap()["result"];
    assert_eq!(
        (created["resultType"].as_str(), created["status"].as_str()),
        (Some("task"), Some("working")),
        "{slow:?}"
    );
    let task_id = created["taskId"].as_str().unwrap().to_owned();

    // Polled to completion through the other instance.
    let meta = json!({"io.modelcontextprotocol/clientCapabilities": takes_tasks});
    let done = poll("the task to complete", Duration::from_secs(20), || {
        let (status, _, text) = post(&other_base, "tasks/get", json!({"taskId": task_id}), meta.clone());
        assert_eq!(status, 200, "{text}");
        let body: Value = serde_json::from_str(&text).unwrap();
        (body["result"]["status"] == "completed").then_some(body)
    });
    assert_eq!(done["result"]["result"]["content"][0]["text"], "Computed pi in 1.5 s", "{done}");

    // A task-only tool streams as a task too, for a client that takes tasks.
    let job = streamed(&hangar.base, json!({"name": "failing_job", "arguments": {}}), takes_tasks);
    assert_eq!(job.last().unwrap()["result"]["resultType"], "task", "{job:?}");
}

#[test]
fn a_streamed_call_whose_legacy_upstream_asks_for_sampling_is_held_for_the_answer() {
    let hangar = Hangar::start(&format!(
        "tool_access: {{mode: front_door}}\nmcp_servers:\n  everything:\n    command: [\"{}\", \"{}\", \"stdio\"]\n",
        node().display(),
        server_everything().display()
    ));
    let other = hangar.extra_api(&[]);
    let other_base = format!("http://{}", other.addr);
    let sampling = json!({"sampling": {}});
    let call = json!({"name": "trigger-sampling-request", "arguments": {"prompt": "hi"}});

    // The stream ends `input_required`: the upstream's question, and a state naming the held call.
    let asked = streamed(&hangar.base, call.clone(), sampling.clone());
    let result = &asked.last().unwrap()["result"];
    assert_eq!(result["resultType"], "input_required", "{asked:?}");
    let (key, question) = result["inputRequests"].as_object().and_then(|q| q.iter().next()).expect("a question");
    assert_eq!(question["method"], "sampling/createMessage", "{question}");

    // The retry, streamed through the other instance, answers it and gets the same call's result.
    let answer = json!({"role": "assistant", "content": {"type": "text", "text": "sampled: hi"}, "model": "m"});
    let mut retry = call;
    retry["inputResponses"] = json!({key.as_str(): answer});
    retry["requestState"] = result["requestState"].clone();
    let done = streamed(&other_base, retry, sampling);
    let text = done.last().unwrap()["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    assert!(text.starts_with("LLM sampling result") && text.contains("sampled: hi"), "{done:?}");
}
