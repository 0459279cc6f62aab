//! A 2026-07-28 client's `hangar_call` whose calls ask it something: a legacy upstream's own
//! `sampling/createMessage` (server-everything, over stdio) reaches the client as ONE
//! `input_required` carrying every open question, keyed by the call it belongs to; the retry
//! (through any API instance) with the answers resumes the held calls, and the batch completes
//! with its normal report, the calls that had finished kept (run once). A retry answering only
//! some questions is asked the rest; another identity cannot answer; answers to questions nobody
//! asked are refused. And a streamed `hangar_call` (a log level) relays its calls' log lines at
//! the client's level, whoever runs the batch.

use std::time::Duration;

use hangar_tests::serde_json::{self, Value, json};
use hangar_tests::{Hangar, key_hash, node, poll, server_everything};

use crate::streamed_calls::events;

const ALICE: &str = "alice-key-0123456789";
const BOB: &str = "bob-key-0123456789";

/// A `hangar_call` as `key`'s holder at 2026-07-28: `meta` joins its `_meta`, `more` its params
/// (`requestState`, `inputResponses`). Answers the HTTP status and the messages (one for a JSON
/// answer; an event stream's, in order, the response last).
fn hangar_call(base: &str, key: &str, arguments: &Value, meta: Value, more: Value) -> (u16, Vec<Value>) {
    let mut params = json!({"name": "hangar_call", "arguments": arguments, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }});
    for (key, value) in meta.as_object().into_iter().flatten() {
        params["_meta"][key] = value.clone();
    }
    for (key, value) in more.as_object().into_iter().flatten() {
        params[key] = value.clone();
    }
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut response = agent
        .post(&format!("{base}/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "hangar_call")
        .header("X-API-Key", key)
        .send(body.to_string().as_bytes())
        .unwrap();
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    let messages = match serde_json::from_str::<Value>(&text) {
        Ok(message) => vec![message],
        Err(_) => events(&text),
    };
    assert!(messages.last().is_some_and(|m| m.get("id").is_some()), "a response: {text}");
    (status, messages)
}

fn sampled(text: &str) -> Value {
    json!({"role": "assistant", "content": {"type": "text", "text": text}, "model": "m"})
}

#[test]
fn a_batchs_questions_reach_the_client_as_one_input_required_and_its_answers_complete_the_batch() {
    let hangar = Hangar::start(&format!(
        "auth:\n  api_keys:\n    - {{name: alice, hash: \"{alice}\"}}\n    - {{name: bob, hash: \"{bob}\"}}\n\
         mcp_servers:\n  fake:\n    command: [\"{{fake}}\", \"--tools\", \"echo\"]\n\
         \x20 one:\n    command: [\"{node}\", \"{everything}\", \"stdio\"]\n\
         \x20 two:\n    command: [\"{node}\", \"{everything}\", \"stdio\"]\n",
        alice = key_hash(ALICE),
        bob = key_hash(BOB),
        node = node().display(),
        everything = server_everything().display(),
    ));
    let other = hangar.extra_api(&[]);
    let other_base = format!("http://{}", other.addr);
    let batch = json!({"calls": [
        {"mcp_server": "fake", "tool": "echo", "arguments": {"said": "first"}},
        {"mcp_server": "one", "tool": "trigger-sampling-request", "arguments": {"prompt": "one"}},
        {"mcp_server": "two", "tool": "trigger-sampling-request", "arguments": {"prompt": "two"}},
    ]});
    let sampling = json!({"io.modelcontextprotocol/clientCapabilities": {"sampling": {}}});

    // One `input_required`: both upstreams' questions, keyed by their calls.
    let (status, asked) = hangar_call(&hangar.base, ALICE, &batch, sampling.clone(), json!({}));
    let asked = &asked[0]["result"];
    assert_eq!((status, asked["resultType"].as_str()), (200, Some("input_required")), "{asked}");
    let questions = asked["inputRequests"].as_object().expect("questions");
    assert_eq!(questions.keys().collect::<Vec<_>>(), ["1/upstream", "2/upstream"], "{asked}");
    assert!(questions.values().all(|q| q["method"] == "sampling/createMessage"), "{asked}");
    let state = asked["requestState"].clone();
    assert!(state.as_str().is_some_and(|s| s.starts_with("hangar-batch-")), "{asked}");
    let retry = |answers: Value| json!({"requestState": state, "inputResponses": answers});

    // Another identity cannot answer for it; answers to nothing asked, or no object, are refused.
    let answers = json!({"1/upstream": sampled("sampled: one"), "2/upstream": sampled("sampled: two")});
    let refusals = [
        (BOB, retry(answers.clone()), "unknown or expired `requestState`"),
        (ALICE, retry(json!({"0/upstream": sampled("x")})), "answers no open question of the batch: `0/upstream`"),
        (ALICE, retry(json!("yes")), "must be an object"),
    ];
    for (key, more, why) in refusals {
        let (_, refused) = hangar_call(&other_base, key, &batch, sampling.clone(), more);
        let error = &refused[0]["error"];
        assert_eq!(error["code"].as_i64(), Some(-32602), "{refused:?}");
        assert!(error["message"].as_str().is_some_and(|m| m.contains(why)), "{why}: {refused:?}");
    }

    // Half an answer: asked the rest, under the same state.
    let answer = |key: &str, text: &str| {
        hangar_call(&other_base, ALICE, &batch, sampling.clone(), retry(json!({key: sampled(text)})))
    };
    let (_, rest) = answer("1/upstream", "sampled: one");
    let rest = &rest[0]["result"];
    assert_eq!(rest["resultType"], "input_required", "{rest}");
    assert_eq!(rest["inputRequests"].as_object().unwrap().keys().collect::<Vec<_>>(), ["2/upstream"], "{rest}");
    assert_eq!(rest["requestState"], state, "{rest}");

    // The rest answered, through the other instance: the whole report, each upstream's answer
    // reflecting the client's.
    let (status, done) = answer("2/upstream", "sampled: two");
    let done = &done[0]["result"];
    assert_eq!((status, done["resultType"].as_str()), (200, Some("complete")), "{done}");
    let report = &done["structuredContent"];
    assert_eq!((report["total"].as_u64(), report["succeeded"].as_u64()), (Some(3), Some(3)), "{report}");
    let text =
        |index: usize| report["results"][index]["result"]["content"][0]["text"].as_str().unwrap_or("").to_owned();
    assert!(text(0).contains("first"), "{report}");
    for (index, said) in [(1, "sampled: one"), (2, "sampled: two")] {
        assert!(text(index).starts_with("LLM sampling result") && text(index).contains(said), "{report}");
    }
    // The call that had finished ran once, and a spent state answers nothing.
    let invocations = poll("the echo's count", Duration::from_secs(5), || {
        let mut response =
            ureq::get(&format!("{}/api/mcp_servers/fake", hangar.base)).header("X-API-Key", ALICE).call().ok()?;
        response.body_mut().read_json::<Value>().ok()?["health"]["total_invocations"].as_u64()
    });
    assert_eq!(invocations, 1);
    let (_, spent) = hangar_call(&hangar.base, ALICE, &batch, sampling, retry(answers));
    assert_eq!(spent[0]["error"]["code"].as_i64(), Some(-32602), "{spent:?}");
}

#[test]
fn a_streamed_hangar_call_relays_its_calls_log_lines_at_the_clients_level() {
    let hangar = Hangar::start("mcp_servers:\n  conf: {command: [\"{fake}\", \"--conformance\"]}\n");
    let batch = json!({"calls": [{"mcp_server": "conf", "tool": "test_tool_with_logging"}]});
    let logs = |messages: &[Value]| messages.iter().filter(|m| m["method"] == "notifications/message").count();
    // Run by the API (a client that can be asked nothing) and by the supervisor (one that can).
    for capabilities in [json!({}), json!({"sampling": {}})] {
        let meta = |level: &str| json!({"io.modelcontextprotocol/logLevel": level, "io.modelcontextprotocol/clientCapabilities": capabilities});
        let (status, heard) = hangar_call(&hangar.base, ALICE, &batch, meta("info"), json!({}));
        assert_eq!((status, logs(&heard)), (200, 3), "{capabilities}: {heard:?}");
        let result = &heard.last().unwrap()["result"];
        assert_eq!(result["structuredContent"]["succeeded"], 1, "{heard:?}");
        // Above the lines' level: none of them.
        let (_, quiet) = hangar_call(&hangar.base, ALICE, &batch, meta("error"), json!({}));
        assert_eq!((quiet.len(), logs(&quiet)), (1, 0), "{capabilities}: {quiet:?}");
    }
}

#[test]
fn a_legacy_upstreams_question_parks_a_batch_task_until_it_is_answered() {
    let hangar = Hangar::start(&format!(
        "mcp_servers:\n  fake:\n    command: [\"{{fake}}\", \"--tools\", \"echo\"]\n\
         \x20 one:\n    command: [\"{node}\", \"{everything}\", \"stdio\"]\n",
        node = node().display(),
        everything = server_everything().display(),
    ));
    let takes_tasks = json!({"sampling": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}});
    let meta = json!({"io.modelcontextprotocol/clientCapabilities": takes_tasks});
    let task = |method: &str, params: Value, id: &str| {
        let response = hangar.mcp_with(method, params, meta.clone(), &[("Mcp-Name", id)]);
        assert_eq!(response.status, 200, "{method}: {}", response.text);
        response.body["result"].clone()
    };
    let batch = json!({"calls": [
        {"mcp_server": "fake", "tool": "echo", "arguments": {"said": "first"}},
        {"mcp_server": "one", "tool": "trigger-sampling-request", "arguments": {"prompt": "one"}},
    ]});
    let created = hangar.mcp_with("tools/call", json!({"name": "hangar_call", "arguments": batch}), meta.clone(), &[]);
    let id =
        created.body["result"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {}", created.text)).to_owned();
    let parked = poll("the batch's task to ask", Duration::from_secs(10), || {
        let got = task("tasks/get", json!({"taskId": id}), &id);
        (got["status"] == "input_required").then_some(got)
    });
    assert_eq!(parked["inputRequests"]["1/upstream"]["method"], "sampling/createMessage", "{parked}");

    task("tasks/update", json!({"taskId": id, "inputResponses": {"1/upstream": sampled("sampled: one")}}), &id);
    let done = poll("the batch's task to complete", Duration::from_secs(10), || {
        let got = task("tasks/get", json!({"taskId": id}), &id);
        (got["status"] != "working").then_some(got)
    });
    assert_eq!(done["status"], "completed", "{done}");
    let report = &done["result"]["structuredContent"];
    let text = report["results"][1]["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.starts_with("LLM sampling result") && text.contains("sampled: one"), "{done}");
    assert_eq!(report["results"][0]["result"]["structuredContent"]["said"], "first", "{done}");
}
