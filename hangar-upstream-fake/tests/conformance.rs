//! Runs the built fake with --conformance over real pipes: notifications
//! come before the answer they belong to, the legacy wire's requests of ours
//! round-trip, and closing stdin still answers what was read.

use serde_json::json;
use support::{Res, StdioFake, request, wait_bounded};

mod support;

#[test]
fn progress_notifications_come_before_the_answer() -> Res<()> {
    let mut fake = StdioFake::start(&["--conformance"])?;
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "progressToken": "progress-test-1",
    });
    fake.send(&request(1, "tools/call", json!({"name": "test_tool_with_progress", "_meta": meta})))?;
    let mut progress = Vec::new();
    loop {
        let msg = fake.recv()?;
        if msg.get("id").is_some() {
            assert_eq!(msg["id"], 1);
            assert_eq!(msg["result"]["resultType"], "complete");
            break;
        }
        assert_eq!(msg["params"]["progressToken"], "progress-test-1");
        progress.push(msg["params"]["progress"].as_i64().ok_or("no progress")?);
    }
    assert_eq!(progress, [0, 50, 100]);
    Ok(())
}

#[test]
fn legacy_sampling_is_asked_of_the_client_and_answered_with_its_text() -> Res<()> {
    let mut fake = StdioFake::start(&["--conformance"])?;
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}},
                      "clientInfo": {"name": "t", "version": "1"}});
    fake.send(&request(1, "initialize", init))?;
    assert_eq!(fake.recv()?["result"]["protocolVersion"], "2025-11-25");
    fake.send(&request(2, "tools/call", json!({"name": "test_sampling", "arguments": {"prompt": "Hi"}})))?;
    let asked = fake.recv()?;
    assert_eq!(asked["method"], "sampling/createMessage");
    let answer = json!({"role": "assistant", "content": {"type": "text", "text": "Hello"}, "model": "m"});
    fake.send(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": answer}))?;
    let done = fake.recv()?;
    assert_eq!(
        (done["id"].as_i64(), done["result"]["content"][0]["text"].as_str()),
        (Some(2), Some("LLM response: Hello"))
    );
    Ok(())
}

#[test]
fn closing_stdin_while_a_request_waits_still_answers_it() -> Res<()> {
    let mut fake = StdioFake::start(&["--conformance"])?;
    fake.send(&request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}}),
    ))?;
    fake.recv()?;
    fake.send(&request(2, "tools/call", json!({"name": "test_elicitation", "arguments": {"message": "?"}})))?;
    assert_eq!(fake.recv()?["method"], "elicitation/create");
    fake.close_stdin();
    let answer = fake.recv()?;
    assert_eq!((answer["id"].as_i64(), answer["error"]["code"].as_i64()), (Some(2), Some(-32603)));
    assert!(wait_bounded(&mut fake.child)?.success(), "the fake exits cleanly after stdin closed");
    Ok(())
}
