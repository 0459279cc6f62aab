//! `Last-Event-ID` names the hangar that holds a journal event stream, and nothing else (issue
//! 29, section 9). In a fleet a client resuming `/api/events` through another hangar is sent on
//! to the hangar whose tag its id carries; but a start, a stop, a reload or an MCP call that
//! happens to carry the header is served where it landed, so a client cannot aim an admin
//! action at the pod of its choosing. Two hangars of one fleet (`many_hangars`), each asked
//! directly.

use std::time::Duration;

use hangar_tests::Hangar;
use hangar_tests::serde_json::{Value, json};

use super::many_hangars::{fleet, forwarded, start_slow, stream_lines};
use super::oauth::agent;
use super::tasks::ALICE;

/// `method path` on `hangar` as Alice with `Last-Event-ID: last`: the status and JSON body.
fn with_last_event_id(hangar: &Hangar, path: &str, last: &str, body: Option<&Value>) -> (u16, Value) {
    let url = format!("{}{path}", hangar.base);
    let request = agent()
        .post(&url)
        .header("X-API-Key", ALICE)
        .header("Last-Event-ID", last)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2025-11-25");
    let mut response = match body {
        Some(body) => request.send(body.to_string().as_bytes()),
        None => request.send_empty(),
    }
    .unwrap();
    let status = response.status().as_u16();
    (status, response.body_mut().read_json().unwrap_or(Value::Null))
}

/// `slow`'s state on `hangar`, asked of that hangar's API directly.
fn state(hangar: &Hangar) -> String {
    let url = format!("{}/api/mcp_servers/slow", hangar.base);
    let mut response = agent().get(&url).header("X-API-Key", ALICE).call().unwrap();
    let body: Value = response.body_mut().read_json().unwrap();
    body["state"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn a_last_event_id_routes_an_event_stream_and_never_an_action() {
    let fleet = fleet();
    let (first, second) = (&fleet.hangars[0], &fleet.hangars[1]);
    // An event id of the first hangar (its journal: `slow` starting).
    start_slow(first);
    let wait = Duration::from_secs(20);
    let events = stream_lines(&first.base, "/api/events?since=0", "", "id: ");
    let seen = events.recv_timeout(wait).expect("an event").trim_start_matches("id: ").to_owned();
    let tag = seen.split_once('.').expect("a tagged id").1.to_owned();

    // Actions sent to the second hangar carrying it are the second's own.
    let (status, body) = with_last_event_id(second, "/api/mcp_servers/slow/start", &seen, None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(state(second), "ready", "the start was served where it landed");
    let (status, body) = with_last_event_id(second, "/api/mcp_servers/slow/stop", &seen, None);
    assert_eq!(status, 200, "{body}");
    assert_eq!((state(first).as_str(), state(second).as_str()), ("ready", "cold"), "the second stopped its own");
    let (status, body) = with_last_event_id(second, "/api/config/reload", &seen, None);
    assert_eq!(status, 200, "{body}");
    // An MCP request (answered here, by the second: a legacy request without a session is 400).
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let (status, body) = with_last_event_id(second, "/mcp", &seen, Some(&call));
    assert_eq!(status, 400, "{body}");
    assert_eq!(forwarded(second), 0, "nothing but an event stream follows Last-Event-ID");

    // The event stream itself resumes on the hangar that holds it.
    let resumed = stream_lines(&second.base, "/api/events", &format!("Last-Event-ID: {seen}\r\n"), "id: ");
    let next = resumed.recv_timeout(wait).expect("a replayed event");
    assert!(next.ends_with(&format!(".{tag}")), "the first hangar's events: {next}");
    assert_eq!(forwarded(second), 1, "the resume went on to the first hangar");
}
