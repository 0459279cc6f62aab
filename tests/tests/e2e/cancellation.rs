//! A client that goes away mid-call cancels the call upstream: the upstream receives
//! `notifications/cancelled`, and nothing keeps running for nobody.

use std::io::Read;
use std::time::Duration;

use hangar_tests::serde_json::json;
use hangar_tests::{Hangar, poll};

const CONFIG: &str = r#"
tool_access: {mode: front_door}
mcp_servers:
  slow:
    command: ["{fake}", "--tools", "sleep,echo"]
"#;

#[test]
fn closing_an_event_stream_cancels_the_call_upstream() {
    let hangar = Hangar::start(CONFIG);
    hangar.tool_ok("hangar_start", json!({"mcp_server": "slow"}));
    let mut stream = hangar.open_sleep_call("sleep", json!({"progressToken": "p-1"}));
    // The event stream's head arrives at once; the call is running.
    let mut head = [0u8; 64];
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let read = stream.read(&mut head).unwrap();
    assert!(
        String::from_utf8_lossy(&head[..read]).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&head[..read])
    );
    assert_eq!(hangar.cancellations("slow"), 0);
    drop(stream);
    poll("the upstream to be told the call is cancelled", Duration::from_secs(10), || {
        (hangar.cancellations("slow") == 1).then_some(())
    });
    // The server is fine and serves the next call.
    assert_eq!(hangar.call("slow", "echo", json!({"after": true})), Some(json!({"after": true})));
}

#[test]
fn a_client_dropping_a_plain_request_cancels_the_call_upstream() {
    let hangar = Hangar::start(CONFIG);
    hangar.tool_ok("hangar_start", json!({"mcp_server": "slow"}));
    let stream = hangar.open_sleep_call("sleep", json!({}));
    poll("the call to reach the upstream", Duration::from_secs(10), || {
        (hangar.details("slow")["health"]["total_invocations"] == 1).then_some(())
    });
    drop(stream);
    poll("the upstream to be told the call is cancelled", Duration::from_secs(10), || {
        (hangar.cancellations("slow") == 1).then_some(())
    });
    assert_eq!(hangar.details("slow")["state"], "ready");
}
