//! `GET /api/events`: the journal as Server-Sent Events. A SIGKILLed upstream shows as its `state`
//! event with the dead record; a client that reconnects with `Last-Event-ID` gets exactly the
//! events it missed (contiguous, none twice); a non-admin sees only events about its own servers
//! and no audit events.

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hangar_tests::serde_json::{self, Value};
use hangar_tests::{Hangar, read_pid, sigkill};

use crate::journal_audit::{entries, journal_of, wait_for};

const WAIT: Duration = Duration::from_secs(15);

/// One SSE event as read off the wire.
#[derive(Debug, Clone)]
pub struct Event {
    pub id: u64,
    pub kind: String,
    pub data: Value,
}

/// An open `/api/events` stream over a raw socket (so the test can hang up at will).
pub struct EventStream {
    socket: TcpStream,
    events: mpsc::Receiver<Event>,
}

impl EventStream {
    /// Opens `/api/events{query}` with the extra `headers`, and waits for the stream to open.
    pub fn open(hangar: &Hangar, query: &str, headers: &[(&str, &str)]) -> EventStream {
        let addr = hangar.base.trim_start_matches("http://").to_owned();
        let mut socket = TcpStream::connect(&addr).unwrap();
        let mut head = format!("GET /api/events{query} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n");
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        socket.write_all(head.as_bytes()).unwrap();
        let reader = socket.try_clone().unwrap();
        let (tx, events) = mpsc::channel();
        let (opened_tx, opened) = mpsc::channel();
        std::thread::spawn(move || read_events(reader, &tx, &opened_tx));
        let status = opened.recv_timeout(WAIT).expect("the event stream did not open");
        assert_eq!(status, 200, "GET /api/events{query}");
        EventStream { socket, events }
    }

    /// The next event, if one comes within the bound.
    pub fn next(&self, within: Duration) -> Option<Event> {
        self.events.recv_timeout(within).ok()
    }

    /// Events until `last` picks one out (that one included); panics past the bound.
    pub fn until(&self, what: &str, last: impl Fn(&Event) -> bool) -> Vec<Event> {
        let deadline = Instant::now() + WAIT;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next(left) {
                Some(event) => {
                    let done = last(&event);
                    seen.push(event);
                    if done {
                        return seen;
                    }
                }
                None => panic!("no {what} within {WAIT:?}; saw {seen:#?}"),
            }
        }
    }

    /// Hangs up.
    pub fn close(self) {
        let _ = self.socket.shutdown(Shutdown::Both);
    }
}

/// Reads the response: its status (sent on `opened`), then SSE events. The body is chunked, one
/// event a chunk, so a chunk-size line (hex digits only) never falls inside an event.
fn read_events(socket: TcpStream, events: &mpsc::Sender<Event>, opened: &mpsc::Sender<u16>) {
    let mut lines = BufReader::new(socket).lines().map_while(Result::ok);
    let status = lines.next().and_then(|l| l.split_whitespace().nth(1).and_then(|s| s.parse().ok())).unwrap_or(0);
    for line in lines.by_ref() {
        if line.trim_end_matches('\r').is_empty() {
            break;
        }
    }
    let _ = opened.send(status);
    let (mut id, mut kind) = (None, None);
    for line in lines {
        let line = line.trim_end_matches('\r');
        if let Some(value) = line.strip_prefix("id: ") {
            id = value.parse::<u64>().ok();
        } else if let Some(value) = line.strip_prefix("event: ") {
            kind = Some(value.to_owned());
        } else if let Some(value) = line.strip_prefix("data: ") {
            let data: Value = serde_json::from_str(value).unwrap_or_else(|e| panic!("data not JSON ({e}): {value}"));
            let event = Event { id: id.take().expect("an id before data"), kind: kind.take().expect("an event"), data };
            if events.send(event).is_err() {
                return;
            }
        }
    }
}

const CONFIG: &str = r#"
mcp_servers:
  math: {command: ["{fake}", "--tools", "add", "--pid-file", "{dir}/math.pid"]}
"#;

#[test]
fn a_sigkilled_upstream_shows_as_its_state_event_with_the_dead_record() {
    let hangar = Hangar::start(CONFIG);
    assert_eq!(hangar.post("/api/mcp_servers/math/start", None).status, 200);
    let stream = EventStream::open(&hangar, "?since=0", &[]);
    let ready = stream.until("math's ready", |e| e.kind == "state" && e.data["to"] == "ready");
    assert!(ready.iter().all(|e| e.data["id"] == e.id), "each event's data carries its id: {ready:#?}");
    sigkill(read_pid(&hangar.path("math.pid")));
    let died = stream.until("math's death", |e| e.kind == "state" && e.data["to"] == "dead");
    let dead = &died.last().unwrap().data;
    assert_eq!(dead["mcp_server_id"], "math", "{dead}");
    assert_eq!(dead["dead"]["reason"], "crashed", "{dead}");
    // The same record as every other surface shows.
    assert_eq!(dead["dead"], hangar.details("math")["dead"], "{dead}");
    stream.close();
}

#[test]
fn a_reconnect_with_last_event_id_gets_exactly_the_missed_events() {
    let hangar = Hangar::start(CONFIG);
    assert_eq!(hangar.post("/api/mcp_servers/math/start", None).status, 200);
    let journal = journal_of(&hangar);
    let started = wait_for(&journal, "math's start", |all| {
        all.iter().find(|e| e["kind"] == "audit" && e["method"] == "start").and_then(|e| e["id"].as_u64())
    });
    let stream = EventStream::open(&hangar, &format!("?since={started}"), &[]);
    assert_eq!(hangar.post("/api/mcp_servers/math/stop", None).status, 200);
    let first = stream.until("math's stop", |e| e.kind == "state" && e.data["to"] == "cold");
    assert!(first.iter().all(|e| e.id > started), "nothing from before: {first:#?}");
    let last_seen = first.last().unwrap().id;
    stream.close();
    // The client went: the API cancels its request, and the supervisor stops following for it.
    hangar_tests::poll("the follow cancelled", Duration::from_secs(20), || {
        hangar.log().contains("request cancelled by its caller").then_some(())
    });

    // Missed while disconnected: two starts and a stop, with their actions and audit entries.
    for action in ["start", "stop", "start"] {
        assert_eq!(hangar.post(&format!("/api/mcp_servers/math/{action}"), None).status, 200);
    }
    let missed: Vec<u64> = wait_for(&journal, "the last start's audit entry", |all| {
        let after: Vec<&Value> = all.iter().filter(|e| e["id"].as_u64() > Some(last_seen)).collect();
        let starts = after.iter().filter(|e| e["kind"] == "audit" && e["method"] == "start").count();
        (starts == 2).then(|| after.iter().filter_map(|e| e["id"].as_u64()).collect())
    });
    assert!(missed.len() >= 6, "{:#?}", entries(&journal));
    let newest = *missed.last().unwrap();
    assert_eq!(missed, (last_seen + 1..=newest).collect::<Vec<_>>(), "the journal's ids are contiguous");

    let again = EventStream::open(&hangar, "", &[("Last-Event-ID", &last_seen.to_string())]);
    let replayed = again.until("the newest missed event", |e| e.id == newest);
    let ids: Vec<u64> = replayed.iter().map(|e| e.id).collect();
    assert_eq!(ids, missed, "exactly the missed events, in order, none twice");
    // And nothing more is replayed after them (the next event is live, with a higher id).
    assert_eq!(hangar.post("/api/mcp_servers/math/stop", None).status, 200);
    let next = again.next(WAIT).expect("the live stop");
    assert!(next.id > newest, "{next:?}");
    again.close();
}
