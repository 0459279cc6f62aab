//! Tasks (SEP-2663) through the front door: a slow call becomes a task the supervisor owns, so
//! another API instance answers `tasks/get` for it, the death of the instance that made it loses
//! nothing, `tasks/cancel` reaches the upstream as `notifications/cancelled`, a client that did
//! not declare the extension gets -32021, and another identity does not see the task. A slow
//! `hangar_call` is a task too, streamed (progress until the shortcut is over) or not.

use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, cancellations_in, key_hash, poll};

pub(crate) const ALICE: &str = "alice-key-0123456789";
pub(crate) const BOB: &str = "bob-key-0123456789";
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A hangar on a config with two keys and a slow upstream.
pub(crate) fn hangar() -> Hangar {
    Hangar::start(&format!(
        "tool_access: {{mode: front_door}}\nauth:\n  api_keys:\n    - {{name: alice, hash: \"{}\"}}\n    - {{name: bob, hash: \"{}\"}}\n\
         mcp_servers:\n  slow:\n    command: [\"{{fake}}\", \"--tools\", \"sleep,echo\"]\n",
        key_hash(ALICE),
        key_hash(BOB),
    ))
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).build().into()
}

/// A 2026-07-28 request as `key`'s holder; `takes_tasks` declares the extension. Answers the
/// HTTP status and the JSON-RPC body.
pub(crate) fn mcp(base: &str, key: &str, method: &str, params: Value, takes_tasks: bool) -> (u16, Value) {
    let (status, _, body) = mcp_with(&agent(), base, key, method, params, takes_tasks);
    (status, body)
}

/// As [`mcp`], sent by `agent`; also answers the `Retry-After` header.
pub(crate) fn mcp_with(
    agent: &ureq::Agent,
    base: &str,
    key: &str,
    method: &str,
    mut params: Value,
    takes_tasks: bool,
) -> (u16, Option<String>, Value) {
    let capabilities = if takes_tasks { json!({"extensions": {TASKS: {}}}) } else { json!({}) };
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let name = params.get("name").or_else(|| params.get("taskId")).and_then(Value::as_str).map(str::to_owned);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut request = agent
        .post(&format!("{base}/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method)
        .header("X-API-Key", key);
    if let Some(name) = &name {
        request = request.header("Mcp-Name", name.as_str());
    }
    let mut response = request.send(body.to_string().as_bytes()).unwrap();
    let status = response.status().as_u16();
    let retry_after = response.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
    (status, retry_after, response.body_mut().read_json().unwrap_or(Value::Null))
}

fn task_get(base: &str, key: &str, task_id: &str) -> (u16, Value) {
    mcp(base, key, "tasks/get", json!({"taskId": task_id}), true)
}

/// How many `notifications/cancelled` the `slow` upstream behind `base` has received (as Alice).
fn cancellations(base: &str) -> usize {
    let mut response =
        agent().get(&format!("{base}/api/mcp_servers/slow/logs?lines=1000")).header("X-API-Key", ALICE).call().unwrap();
    cancellations_in(&response.body_mut().read_json().unwrap_or(Value::Null))
}

#[test]
fn a_task_outlives_the_api_that_made_it_and_only_its_creator_sees_it() {
    let hangar = hangar();
    let first = hangar.extra_api(&[]);
    let first_base = format!("http://{}", first.addr);
    let second_base = hangar.base.clone();

    // Without the extension the same call is answered as it is, however long it takes.
    let (status, plain) =
        mcp(&first_base, ALICE, "tools/call", json!({"name": "sleep", "arguments": {"ms": 400}}), false);
    assert_eq!((status, plain["result"]["resultType"].as_str()), (200, Some("complete")), "{plain}");
    assert!(plain["result"].get("taskId").is_none(), "{plain}");

    // With it, a call slower than the shortcut becomes a task.
    let (status, created) =
        mcp(&first_base, ALICE, "tools/call", json!({"name": "sleep", "arguments": {"ms": 1500}}), true);
    assert_eq!(status, 200, "{created}");
    let created = &created["result"];
    assert_eq!(
        (created["resultType"].as_str(), created["status"].as_str()),
        (Some("task"), Some("working")),
        "{created}"
    );
    let task_id = created["taskId"].as_str().unwrap().to_owned();

    // The instance that made it dies; the other answers for the task, which runs on.
    drop(first); // SIGKILL
    let done = poll("the task to complete", Duration::from_secs(20), || {
        let (status, body) = task_get(&second_base, ALICE, &task_id);
        assert_eq!(status, 200, "{body}");
        (body["result"]["status"] == "completed").then_some(body)
    });
    assert_eq!(done["result"]["result"]["content"][0]["text"], "slept 1500 ms", "{done}");

    // Another identity: no such task.
    let (status, other) = task_get(&second_base, BOB, &task_id);
    assert_eq!((status, other["error"]["code"].as_i64()), (200, Some(-32602)), "{other}");
    // A request that does not declare the extension: -32021, naming it.
    let (status, gated) = mcp(&second_base, ALICE, "tasks/get", json!({"taskId": task_id}), false);
    assert_eq!((status, gated["error"]["code"].as_i64()), (400, Some(-32021)), "{gated}");
    assert!(gated["error"]["data"]["requiredCapabilities"]["extensions"].get(TASKS).is_some(), "{gated}");
    // Mcp-Name must mirror the task id.
    let (status, _) = mcp(&second_base, ALICE, "tasks/get", json!({"taskId": "not-it"}), true);
    assert_eq!(status, 200, "an unknown id with a matching header is a -32602 answer");
}

#[test]
fn cancelling_a_task_cancels_its_call_upstream() {
    let hangar = hangar();
    let base = hangar.base.clone();
    let (_, created) = mcp(&base, ALICE, "tools/call", json!({"name": "sleep", "arguments": {"ms": 60000}}), true);
    let task_id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {created}")).to_owned();
    assert_eq!(cancellations(&base), 0);

    // Bob cannot cancel Alice's task.
    let (_, refused) = mcp(&base, BOB, "tasks/cancel", json!({"taskId": task_id}), true);
    assert_eq!(refused["error"]["code"].as_i64(), Some(-32602), "{refused}");

    let (status, ack) = mcp(&base, ALICE, "tasks/cancel", json!({"taskId": task_id}), true);
    assert_eq!(status, 200, "{ack}");
    assert_eq!(ack["result"]["resultType"], "complete");
    assert!(ack["result"].get("status").is_none() && ack["result"].get("taskId").is_none(), "an empty ack: {ack}");
    let (_, cancelled) = task_get(&base, ALICE, &task_id);
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    poll("the upstream to hear the call is cancelled", Duration::from_secs(10), || {
        (cancellations(&base) == 1).then_some(())
    });
    // Cancelling again is the same empty ack.
    let (_, again) = mcp(&base, ALICE, "tasks/cancel", json!({"taskId": task_id}), true);
    assert_eq!(again["result"]["resultType"], "complete", "{again}");
}

#[test]
fn an_upstream_asking_for_input_parks_the_task_until_every_answer_is_in() {
    let hangar = Hangar::start(
        "tool_access: {mode: front_door}\nmcp_servers:\n  conf: {command: [\"{fake}\", \"--conformance\"]}\n",
    );
    let takes_tasks =
        json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {TASKS: {}}}});
    let task = |method: &str, params: Value, id: &str| {
        let response = hangar.mcp_with(method, params, takes_tasks.clone(), &[("Mcp-Name", id)]);
        assert_eq!(response.status, 200, "{method}: {}", response.text);
        response.body["result"].clone()
    };
    // multi_input asks two questions at once, after a pause: the call is a task by then.
    let created =
        hangar.mcp_with("tools/call", json!({"name": "multi_input", "arguments": {}}), takes_tasks.clone(), &[]);
    let id =
        created.body["result"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {}", created.text)).to_owned();
    let parked = poll("the task to ask", Duration::from_secs(10), || {
        let got = task("tasks/get", json!({"taskId": id}), &id);
        (got["status"] == "input_required").then_some(got)
    });
    let keys: Vec<String> = parked["inputRequests"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys.len(), 2, "{parked}");
    assert_eq!(parked["inputRequests"][&keys[0]]["method"], "elicitation/create");

    // One answer: still waiting, for the other question only.
    let answer = json!({"action": "accept", "content": {"name": "Ada"}});
    let ack = task("tasks/update", json!({"taskId": id, "inputResponses": {keys[0].clone(): answer}}), &id);
    assert_eq!(ack["resultType"], "complete");
    assert!(ack.get("status").is_none(), "an empty ack: {ack}");
    let waiting = task("tasks/get", json!({"taskId": id}), &id);
    assert_eq!(waiting["status"], "input_required");
    assert_eq!(waiting["inputRequests"].as_object().unwrap().keys().cloned().collect::<Vec<_>>(), [keys[1].clone()]);

    // The last answer resumes the call upstream with both answers.
    task("tasks/update", json!({"taskId": id, "inputResponses": {keys[1].clone(): answer}}), &id);
    let done = poll("the task to complete", Duration::from_secs(10), || {
        let got = task("tasks/get", json!({"taskId": id}), &id);
        (got["status"] == "completed").then_some(got)
    });
    assert_eq!(done["result"]["content"][0]["text"], "Got 2 answers.", "{done}");

    // A tool error completes the task with isError; the status `failed` is for protocol errors.
    for (tool, status) in [("failing_job", "completed"), ("protocol_error_job", "failed")] {
        let created = hangar.mcp_with("tools/call", json!({"name": tool, "arguments": {}}), takes_tasks.clone(), &[]);
        let id =
            created.body["result"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {}", created.text)).to_owned();
        let done = poll("the task to finish", Duration::from_secs(10), || {
            let got = task("tasks/get", json!({"taskId": id}), &id);
            (got["status"] != "working").then_some(got)
        });
        assert_eq!(done["status"], status, "{tool}: {done}");
        if status == "completed" {
            assert_eq!(done["result"]["isError"], true, "{done}");
        } else {
            assert!(done["error"]["code"].is_i64() && done.get("result").is_none(), "{done}");
        }
    }
    // failing_job needs tasks: a client that does not take them is refused with -32021.
    let refused = hangar.mcp("tools/call", json!({"name": "failing_job", "arguments": {}}));
    assert_eq!((refused.status, refused.body["error"]["code"].as_i64()), (400, Some(-32021)), "{}", refused.text);
}

#[test]
fn an_upstreams_own_task_is_passed_through_under_an_id_of_the_hangars() {
    let hangar = Hangar::start(
        "tool_access: {mode: front_door}\nmcp_servers:\n  conf: {command: [\"{fake}\", \"--conformance\"]}\n",
    );
    let takes_tasks = json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}});
    let get = |id: &str| {
        let response = hangar.mcp_with("tasks/get", json!({"taskId": id}), takes_tasks.clone(), &[("Mcp-Name", id)]);
        assert_eq!(response.status, 200, "{}", response.text);
        response.body["result"].clone()
    };
    // The upstream answers at once with a task of its own; the client gets the hangar's.
    let created =
        hangar.mcp_with("tools/call", json!({"name": "native_task_job", "arguments": {}}), takes_tasks.clone(), &[]);
    let result = &created.body["result"];
    assert_eq!(result["resultType"], "task", "{}", created.text);
    let id = result["taskId"].as_str().unwrap().to_owned();
    assert!(!id.starts_with("native-"), "the upstream's id is not handed out: {id}");
    let done = poll("the upstream's task to complete", Duration::from_secs(10), || {
        let got = get(&id);
        (got["status"] == "completed").then_some(got)
    });
    assert_eq!(
        (done["taskId"].as_str(), &done["result"]["content"][0]["text"]),
        (Some(id.as_str()), &json!("The native task is done."))
    );
    // The upstream's own id means nothing here.
    let response =
        hangar.mcp_with("tasks/get", json!({"taskId": "native-1"}), takes_tasks.clone(), &[("Mcp-Name", "native-1")]);
    assert_eq!(response.body["error"]["code"].as_i64(), Some(-32602), "{}", response.text);
    // Without the extension the upstream makes no task, and neither does the hangar.
    let plain = hangar.mcp("tools/call", json!({"name": "native_task_job", "arguments": {}}));
    assert_eq!(plain.body["result"]["content"][0]["text"], "The native task is done.", "{}", plain.text);
    // Cancelled under the hangar's id, the upstream's own task (a long one) hears `tasks/cancel`
    // for the upstream's id, and reads cancelled.
    let long = json!({"name": "native_task_job", "arguments": {"seconds": 600}});
    let created = hangar.mcp_with("tools/call", long, takes_tasks.clone(), &[]);
    let id =
        created.body["result"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {}", created.text)).to_owned();
    assert_eq!(get(&id)["status"], "working");
    let upstream_cancels = || {
        let logs = hangar.get("/api/mcp_servers/conf/logs?lines=1000");
        logs.body["logs"].as_array().map_or(0, |lines| {
            lines
                .iter()
                .filter(|l| l["content"].as_str().is_some_and(|c| c.contains("tasks/cancel for native-2")))
                .count()
        })
    };
    assert_eq!(upstream_cancels(), 0);
    let cancel = hangar.mcp_with("tasks/cancel", json!({"taskId": id}), takes_tasks.clone(), &[("Mcp-Name", &id)]);
    assert_eq!(cancel.body["result"]["resultType"], "complete", "{}", cancel.text);
    poll("the upstream to hear tasks/cancel for its own id", Duration::from_secs(10), || {
        (upstream_cancels() == 1).then_some(())
    });
    assert_eq!(get(&id)["status"], "cancelled");
}

/// A task parked on a legacy upstream's own question (its call held for the client's answer)
/// ends at once when cancelled: the upstream hears `notifications/cancelled` then, not when the
/// hold runs out.
#[test]
fn cancelling_a_task_parked_on_a_legacy_upstreams_question_cancels_its_call_upstream() {
    let hangar = Hangar::start(
        "tool_access: {mode: front_door}\nmcp_servers:\n  asker: {command: [\"{fake}\", \"--legacy\", \"--tools\", \"ask_sleep\"]}\n",
    );
    let meta = json!({"io.modelcontextprotocol/clientCapabilities": {"sampling": {}, "extensions": {TASKS: {}}}});
    let task = |method: &str, id: &str| {
        let response = hangar.mcp_with(method, json!({"taskId": id}), meta.clone(), &[("Mcp-Name", id)]);
        assert_eq!(response.status, 200, "{method}: {}", response.text);
        response.body["result"].clone()
    };
    let call = json!({"name": "ask_sleep", "arguments": {"ms": 120000, "after_ms": 1000}});
    let created = hangar.mcp_with("tools/call", call, meta.clone(), &[]);
    let id =
        created.body["result"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {}", created.text)).to_owned();
    let parked = poll("the task to ask", Duration::from_secs(10), || {
        let got = task("tasks/get", &id);
        (got["status"] == "input_required").then_some(got)
    });
    let question = parked["inputRequests"].as_object().and_then(|q| q.values().next()).cloned().unwrap_or_default();
    assert_eq!(question["method"], "sampling/createMessage", "{parked}");
    assert_eq!(hangar.cancellations("asker"), 0);
    assert_eq!(task("tasks/cancel", &id)["resultType"], "complete");
    assert_eq!(task("tasks/get", &id)["status"], "cancelled");
    // Well within the 60 s hold.
    poll("the upstream to hear the call is cancelled", Duration::from_secs(10), || {
        (hangar.cancellations("asker") == 1).then_some(())
    });
}

// `hangar_call` as a task: the supervisor runs the batch, so it is a task like a front-door call.

/// `hangar_call` of `calls` as `key`'s holder.
fn hangar_call(base: &str, key: &str, calls: Value, takes_tasks: bool) -> (u16, Value) {
    mcp(base, key, "tools/call", json!({"name": "hangar_call", "arguments": {"calls": calls}}), takes_tasks)
}

/// The id of the working task a call's answer created.
fn working_task((status, answer): (u16, Value)) -> String {
    let created = &answer["result"];
    let made = (status, created["resultType"].as_str(), created["status"].as_str());
    assert_eq!(made, (200, Some("task"), Some("working")), "{answer}");
    created["taskId"].as_str().unwrap_or_default().to_owned()
}

/// Alice's task `task_id` once it is no longer working, as `tasks/get` answers it at `base`.
fn finished(base: &str, task_id: &str) -> Value {
    poll("the task to finish", Duration::from_secs(20), || {
        let (status, body) = task_get(base, ALICE, task_id);
        assert_eq!(status, 200, "{body}");
        (body["result"]["status"] != "working").then_some(body)
    })
}

fn sleep_call(ms: u64) -> Value {
    json!({"mcp_server": "slow", "tool": "sleep", "arguments": {"ms": ms}})
}

#[test]
fn a_slow_hangar_call_becomes_a_task_that_outlives_the_api_that_made_it() {
    let hangar = hangar();
    let first = hangar.extra_api(&[]);
    let first_base = format!("http://{}", first.addr);
    let second_base = hangar.base.clone();

    // Two calls, one of them to no such server: the batch is slower than the shortcut.
    let calls = json!([sleep_call(1500), {"mcp_server": "nowhere", "tool": "x"}]);
    let task_id = working_task(hangar_call(&first_base, ALICE, calls, true));

    // The instance that made it dies; the other answers for the task, which runs on.
    drop(first); // SIGKILL
    let done = finished(&second_base, &task_id);
    let done = &done["result"];
    assert_eq!(done["status"], "completed", "a failed call is the report's business: {done}");
    let result = &done["result"];
    assert_eq!(result["isError"], false, "{done}");
    let report = &result["structuredContent"];
    assert_eq!((report["total"].as_u64(), report["succeeded"].as_u64()), (Some(2), Some(1)), "{report}");
    assert_eq!(report["results"][0]["result"]["content"][0]["text"], "slept 1500 ms", "{report}");
    assert_eq!(
        (report["results"][1]["success"].as_bool(), report["results"][1]["error_type"].as_str()),
        (Some(false), Some("not_found")),
        "the report says which call failed: {report}"
    );
    let text: Value = hangar_tests::serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(&text, report, "the report as text too");
    assert_eq!(result["content"][1]["text"], "slept 1500 ms", "the call's own blocks follow: {result}");

    // Another identity: no such task.
    let (status, other) = task_get(&second_base, BOB, &task_id);
    assert_eq!((status, other["error"]["code"].as_i64()), (200, Some(-32602)), "{other}");
}

#[test]
fn a_fast_hangar_call_is_answered_as_it_is_and_cancelling_a_batch_task_cancels_every_call() {
    let hangar = hangar();
    let base = hangar.base.clone();

    // Within the shortcut: the same answer as without tasks, ids and times aside.
    let (_, opted) = hangar_call(&base, ALICE, json!([sleep_call(5), sleep_call(6)]), true);
    let (_, plain) = hangar_call(&base, ALICE, json!([sleep_call(5), sleep_call(6)]), false);
    let shape = |answer: &Value| {
        let mut result = answer["result"].clone();
        let report = result["structuredContent"].as_object_mut().unwrap();
        for key in ["batch_id", "elapsed_ms"] {
            report.remove(key);
        }
        for call in report["results"].as_array_mut().unwrap() {
            let call = call.as_object_mut().unwrap();
            call.remove("call_id");
            call.remove("elapsed_ms");
        }
        let content = result["content"].as_array_mut().unwrap();
        content.remove(0); // the report's text, with its ids
        result
    };
    assert_eq!(opted["result"]["resultType"], "complete", "{opted}");
    assert_eq!(shape(&opted), shape(&plain), "{opted}\n{plain}");

    // A slow batch is a task; cancelling it stops both of its calls upstream.
    let calls = json!([sleep_call(60_000), sleep_call(60_000)]);
    let task_id = working_task(hangar_call(&base, ALICE, calls, true));
    assert_eq!(cancellations(&base), 0);
    let (_, refused) = mcp(&base, BOB, "tasks/cancel", json!({"taskId": task_id}), true);
    assert_eq!(refused["error"]["code"].as_i64(), Some(-32602), "Bob cannot cancel it: {refused}");

    let (status, ack) = mcp(&base, ALICE, "tasks/cancel", json!({"taskId": task_id}), true);
    assert_eq!((status, &ack["result"]["resultType"]), (200, &json!("complete")), "{ack}");
    let (_, cancelled) = task_get(&base, ALICE, &task_id);
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    poll("the upstream to hear both calls are cancelled", Duration::from_secs(10), || {
        (cancellations(&base) == 2).then_some(())
    });
}

#[test]
fn a_batch_call_asking_for_input_parks_the_batch_task_until_it_is_answered() {
    let hangar =
        Hangar::start(&format!("tool_access: {{mode: front_door}}\nmcp_servers:\n  conf: {CONFORMANCE_FAKE}\n"));
    // A client that takes tasks and can be asked to fill in a form.
    let takes_tasks =
        json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {TASKS: {}}}});
    let task = |method: &str, params: Value, id: &str| about_task(&hangar, &takes_tasks, method, params, id);
    // multi_input asks two questions; failing_job ends with a tool error meanwhile.
    let calls = json!([
        {"mcp_server": "conf", "tool": "failing_job"},
        {"mcp_server": "conf", "tool": "multi_input"},
    ]);
    let arguments = json!({"name": "hangar_call", "arguments": {"calls": calls}});
    let created = hangar.mcp_with("tools/call", arguments, takes_tasks.clone(), &[]);
    let id =
        created.body["result"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {}", created.text)).to_owned();
    let parked = poll("the batch's task to ask", Duration::from_secs(10), || {
        let got = task("tasks/get", json!({"taskId": id}), &id);
        (got["status"] == "input_required").then_some(got)
    });
    let mut keys: Vec<String> = parked["inputRequests"].as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(keys, ["1/first_name", "1/second_name"], "the questions of call 1, by its index: {parked}");
    assert_eq!(parked["inputRequests"]["1/first_name"]["method"], "elicitation/create", "{parked}");
    assert!(parked.get("requestState").is_none(), "the batch's state stays in the hangar: {parked}");

    let answer = json!({"action": "accept", "content": {"name": "Ada"}});
    let answers = json!({"1/first_name": answer, "1/second_name": answer});
    task("tasks/update", json!({"taskId": id, "inputResponses": answers}), &id);
    let done = poll("the batch's task to complete", Duration::from_secs(10), || {
        let got = task("tasks/get", json!({"taskId": id}), &id);
        (got["status"] != "working").then_some(got)
    });
    assert_eq!(done["status"], "completed", "{done}");
    let report = &done["result"]["structuredContent"];
    assert_eq!(report["results"][1]["result"]["content"][0]["text"], "Got 2 answers.", "{done}");
    assert_eq!(report["results"][0]["result"]["isError"], true, "the tool error is the call's: {done}");
    assert_eq!((report["succeeded"].as_u64(), report["success"].as_bool()), (Some(2), Some(true)), "{report}");
    assert_eq!(done["result"]["content"][2]["text"], "Got 2 answers.", "{done}");
}

/// The fake serving the suite's fixtures, as an upstream's config.
const CONFORMANCE_FAKE: &str = "{command: [\"{fake}\", \"--conformance\"]}";

/// `method` (`tasks/*`) about task `id` with `meta` (the client's capabilities): its result.
fn about_task(hangar: &Hangar, meta: &Value, method: &str, params: Value, id: &str) -> Value {
    let response = hangar.mcp_with(method, params, meta.clone(), &[("Mcp-Name", id)]);
    assert_eq!(response.status, 200, "{method}: {}", response.text);
    response.body["result"].clone()
}

#[test]
fn a_streamed_hangar_call_hears_progress_until_it_becomes_a_task_another_api_instance_answers_for() {
    use super::streamed_calls::{post, streamed};
    let hangar =
        Hangar::start(&format!("tool_access: {{mode: front_door}}\nmcp_servers:\n  conf: {CONFORMANCE_FAKE}\n"));
    let other = hangar.extra_api(&[]);
    let other_base = format!("http://{}", other.addr);
    let takes_tasks = json!({"extensions": {TASKS: {}}});
    let batch = |seconds: f64| {
        let calls =
            json!([{"mcp_server": "conf", "tool": "slow_compute", "arguments": {"seconds": seconds, "label": "pi"}}]);
        json!({"name": "hangar_call", "arguments": {"calls": calls}})
    };
    let progress_of = |events: &[Value]| {
        let progress = events.iter().find(|e| e["method"] == "notifications/progress").cloned();
        progress.map(|p| (p["params"]["progressToken"].clone(), p["params"]["progress"].clone()))
    };

    // A client that does not take tasks hears the batch out on the stream, however long it takes.
    let plain = streamed(&hangar.base, batch(0.4), json!({}));
    assert_eq!(progress_of(&plain), Some((json!("p-1"), json!(0))), "{plain:?}");
    let result = &plain.last().unwrap()["result"];
    assert_eq!(result["structuredContent"]["succeeded"], 1, "{plain:?}");

    // One that does hears its progress until the shortcut is over, then gets the task.
    let slow = streamed(&hangar.base, batch(1.5), takes_tasks.clone());
    assert_eq!(progress_of(&slow), Some((json!("p-1"), json!(0))), "progress before the task: {slow:?}");
    let created = &slow.last().unwrap()["result"];
    let made = (created["resultType"].as_str(), created["status"].as_str());
    assert_eq!(made, (Some("task"), Some("working")), "{slow:?}");
    let task_id = created["taskId"].as_str().unwrap().to_owned();

    // The other API instance answers for it, with the batch's report once it is done.
    let meta = json!({"io.modelcontextprotocol/clientCapabilities": takes_tasks});
    let done = poll("the batch's task to complete", Duration::from_secs(20), || {
        let (status, _, text) = post(&other_base, "tasks/get", json!({"taskId": task_id}), meta.clone());
        assert_eq!(status, 200, "{text}");
        let body: Value = hangar_tests::serde_json::from_str(&text).unwrap();
        (body["result"]["status"] != "working").then_some(body)
    });
    let result = &done["result"];
    assert_eq!(result["status"], "completed", "{done}");
    let report = &result["result"]["structuredContent"];
    assert_eq!((report["total"].as_u64(), report["succeeded"].as_u64()), (Some(1), Some(1)), "{done}");
    assert_eq!(report["results"][0]["result"]["content"][0]["text"], "Computed pi in 1.5 s", "{done}");
}
