//! Runs the built fake over real pipes.

use serde_json::json;
use support::{Res, StdioFake, wait_bounded};

mod support;

#[test]
fn serves_discover_list_and_call_then_exits_on_eof() -> Res<()> {
    let mut fake = StdioFake::start(&[])?;

    let r = fake.call(1, "server/discover", json!({}))?;
    assert_eq!(r["id"], 1);
    assert_eq!(r["result"]["supportedVersions"][0], "2026-07-28");

    let r = fake.call(2, "tools/list", json!({}))?;
    assert_eq!(r["result"]["tools"][0]["name"], "add");
    assert_eq!(r["result"]["tools"][1]["name"], "echo");

    let r = fake.call(3, "tools/call", json!({"name": "add", "arguments": {"a": 2, "b": 3}}))?;
    assert_eq!(r["id"], 3);
    assert_eq!(r["result"]["content"][0]["text"], "5");
    assert_eq!(r["result"]["structuredContent"]["result"], 5);

    fake.send(&json!("not a request"))?;
    assert_eq!(fake.recv()?["error"]["code"], -32600);

    assert_eq!(fake.finish()?.code(), Some(0));
    Ok(())
}

#[test]
fn sleep_does_not_block_other_requests() -> Res<()> {
    let mut fake = StdioFake::start(&["--tools", "sleep,add"])?;
    fake.send(&json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"ms": 1500}}}))?;
    let r = fake.call(2, "ping", json!({}))?;
    assert_eq!(r["id"], 2, "ping must overtake the sleeping call");
    let r = fake.recv()?;
    assert_eq!(r["id"], "slow");
    assert_eq!(r["result"]["content"][0]["text"], "slept 1500 ms");
    assert_eq!(fake.finish()?.code(), Some(0));
    Ok(())
}

#[test]
fn crash_after_exits_101() -> Res<()> {
    let mut fake = StdioFake::start(&["--crash-after", "1"])?;
    let r = fake.call(1, "tools/call", json!({"name": "echo", "arguments": {"k": "v"}}))?;
    assert_eq!(r["result"]["structuredContent"], json!({"k": "v"}));
    let status = wait_bounded(&mut fake.child)?;
    assert_eq!(status.code(), Some(101));
    Ok(())
}
