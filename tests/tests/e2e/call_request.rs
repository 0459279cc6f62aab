//! A tool call is one request on the control socket (issue 30, §1): `Request::Call` with its
//! client's stance. A peer that holds the control key and speaks for callers (the API's role)
//! cannot route a `tools/call` around the call pipeline by sending it as a `Forward`, the way
//! other MCP requests pass to an upstream: the supervisor refuses it, and the same call sent as
//! a `Call` is made.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use hangar_core::access::Caller;
use hangar_core::ipc::{
    CallSpec, ClientFrame, ErrorKind, Forward, Outcome, PROTOCOL_VERSION, Reply, Request, ServerFrame, Target,
};
use hangar_tests::Hangar;
use hangar_tests::serde_json::{self, json};

const CONFIG: &str = r#"
mcp_servers:
  math:
    command: ["{fake}", "--tools", "add"]
"#;

/// Sends `ops` in turn on one control connection, as the API's role with the control key, on
/// behalf of the hangar itself; the outcome of each.
fn ask_as_the_api(hangar: &Hangar, ops: Vec<Request>) -> Vec<Outcome> {
    let mut key_path = hangar.socket.clone().into_os_string();
    key_path.push(".key");
    let key = std::fs::read_to_string(&key_path).expect("the key beside the socket");
    let mut writer = UnixStream::connect(&hangar.socket).unwrap();
    writer.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut reader = BufReader::new(writer.try_clone().unwrap());
    let hello = json!({"hello": {"protocol": PROTOCOL_VERSION, "role": "api", "version": "0", "key": key.trim()}});
    let frames = std::iter::once(hello).chain(
        ops.into_iter()
            .zip(1u64..)
            .map(|(op, id)| serde_json::to_value(ClientFrame::Request { id, op, caller: Caller::hangar() }).unwrap()),
    );
    let mut outcomes = Vec::new();
    for frame in frames {
        writer.write_all(format!("{frame}\n").as_bytes()).unwrap();
        loop {
            let mut line = String::new();
            assert!(reader.read_line(&mut line).unwrap() > 0, "the supervisor hung up");
            match serde_json::from_str::<ServerFrame>(&line).unwrap() {
                ServerFrame::Hello(_) => break,
                ServerFrame::Reply { outcome, .. } => {
                    outcomes.push(outcome);
                    break;
                }
                _ => {}
            }
        }
    }
    outcomes
}

#[test]
fn a_tool_call_forwarded_around_the_call_pipeline_is_refused_and_a_call_is_made() {
    let hangar = Hangar::start(CONFIG);
    let arguments = json!({"a": 1, "b": 2});
    let forward = Request::Forward(Forward {
        mcp_server: "math".into(),
        method: "tools/call".into(),
        params: json!({"name": "add", "arguments": arguments}),
        timeout_ms: Some(10_000),
        session: None,
    });
    let call = Request::Call(Box::new(CallSpec::one(Target::tool("math", "add"), arguments, Some(10_000))));
    let outcomes = ask_as_the_api(&hangar, vec![forward, call]);
    match &outcomes[0] {
        Outcome::Err(err) if err.kind == ErrorKind::InvalidArgument => {
            assert!(err.message.contains("`call` request"), "{}", err.message)
        }
        other => panic!("a forwarded tools/call: expected invalid_argument, got {other:?}"),
    }
    match &outcomes[1] {
        Outcome::Ok(Reply::Called(result)) => assert_eq!(result["structuredContent"], json!({"result": 3}), "{result}"),
        other => panic!("the call: expected its result, got {other:?}"),
    }
}
