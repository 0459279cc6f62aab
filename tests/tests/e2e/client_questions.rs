//! A question an upstream asks a client mid-call waits for the answer at most
//! `tool_access.client_answer_timeout_s`: then the upstream's request is answered with a clear
//! JSON-RPC error and the call ends as that upstream ends it, instead of hanging for ten minutes.

use std::io::BufReader;

use hangar_tests::serde_json::json;
use hangar_tests::{Hangar, node, server_everything};

use crate::legacy_relay::{next_event, open_post};

#[test]
fn a_question_the_legacy_client_never_answers_ends_at_the_configured_timeout() {
    // server-everything (a legacy stdio upstream) asks for sampling inside its tool call.
    let hangar = Hangar::start(&format!(
        r#"
tool_access:
  mode: front_door
  client_answer_timeout_s: 1
mcp_servers:
  everything:
    command: ["{node}", "{everything}", "stdio"]
"#,
        node = node().display(),
        everything = server_everything().display()
    ));
    let session = hangar.legacy_session();
    let own = hangar.base.trim_start_matches("http://").to_owned();
    let call = json!({"jsonrpc": "2.0", "id": "call-1", "method": "tools/call",
        "params": {"name": "trigger-sampling-request", "arguments": {"prompt": "hi"}}});
    // The stream's reads wait at most 30 s: far less than the old fixed 600 s.
    let mut events = BufReader::new(open_post(&own, &session, "application/json, text/event-stream", &call));
    let question = next_event(&mut events);
    assert_eq!(question["method"], "sampling/createMessage", "{question}");
    // Never answered: after a second the upstream hears why, and its call ends. (Its own
    // `roots/list` after `initialized` may be asked on the way, and is not answered either.)
    let done = loop {
        let event = next_event(&mut events);
        if event.get("method").is_none() {
            break event;
        }
        assert_eq!(event["method"], "roots/list", "{event}");
    };
    assert_eq!(done["id"], "call-1", "{done}");
    assert!(done.to_string().contains("did not answer within 1 s"), "the upstream was told why: {done}");
}
