//! Many hangars behind one Service (issue 17, section 4): two complete hangars (supervisor,
//! prober, API each) on loopback, one fleet (`cluster:`, one shared secret), behind a real
//! haproxy doing round robin per request. Consecutive requests land on different hangars: a
//! legacy session (the TypeScript SDK 1.x), its event stream reopened with `Last-Event-ID`
//! through the other hangar, its `tools/list_changed` news, a task created on one and polled
//! through the other, a call held for its client's answer (`requestState`) and the journal
//! stream (`/api/events`) resumed through the balancer with exactly the missed events all work,
//! because a hangar forwards a request whose id another one minted to that one. A 2026-07-28
//! `subscriptions/listen` hears the tool changes of the hangar it landed on. Killing one hangar
//! mid-run fails the calls in flight to it with a clear error, never a hang; stateless calls go
//! on; its ids are a clear 503 with `Retry-After`; a forged owner tag is an unknown id, never
//! forwarded. Freezing one (SIGSTOP: its port accepts, nothing answers) makes its ids the same
//! 503 and cuts its streams relayed through the other, never a hang, and they work again once it
//! thaws; a forwarded call slower than the forward's head timeout is still answered whole.

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use command_fds::{CommandFdExt, FdMapping};
use hangar_tests::serde_json::{Value, json};
use hangar_tests::{
    Background, Frozen, Hangar, MODERN, children_named, free_port, key_hash, node, poll, repo_root, server_everything,
    sigkill,
};

use super::oauth::agent;
use super::tasks::{ALICE, mcp, mcp_with};

const SECRET: &str = "fleet-secret-0123456789abcdef-0123456789";
const LEGACY: &str = "2025-11-25";

/// Two hangars of one fleet and the haproxy in front of them.
pub(crate) struct Fleet {
    pub(crate) hangars: Vec<Hangar>,
    /// `http://127.0.0.1:PORT` of the balancer.
    base: String,
    _balancer: Background,
}

/// The fake upstream `slow` (`sleep`, `echo`; `add` too once `{dir}/shift` exists), Alice's key.
pub(crate) fn fleet() -> Fleet {
    fleet_with(&[])
}

/// As [`fleet`], with `env` set for both supervisors (and so for their APIs).
fn fleet_with(env: &[(&str, &str)]) -> Fleet {
    let auth = format!("auth:\n  api_keys:\n    - {{name: alice, hash: \"{}\"}}\n", key_hash(ALICE));
    let slow = "  slow:\n    command: [\"{fake}\", \"--tools\", \"sleep,echo\", \"--alt-tools\", \"sleep,echo,add\", \"--alt-tools-flag\", \"{dir}/shift\"]\n";
    fleet_with_env(&auth, slow, env)
}

/// Two hangars of one fleet with `auth` (YAML, or nothing) and `servers` (the entries of
/// `mcp_servers:`), behind the balancer.
fn fleet_of(auth: &str, servers: &str) -> Fleet {
    fleet_with_env(auth, servers, &[])
}

/// As [`fleet_of`], with `env` set for both supervisors (and so for their APIs).
fn fleet_with_env(auth: &str, servers: &str, env: &[(&str, &str)]) -> Fleet {
    let secret_dir = tempfile::tempdir().unwrap();
    let secret = secret_dir.path().join("secret");
    std::fs::write(&secret, SECRET).unwrap();
    let hangars: Vec<Hangar> = (0..2)
        .map(|_| {
            let port = free_port();
            let yaml = format!(
                "tool_access: {{mode: front_door}}\n{auth}\
                 cluster:\n  advertise: \"http://${{FLEET_HOST}}:{port}\"\n  secret_file: \"{}\"\n\
                 mcp_servers:\n{servers}",
                secret.display(),
            );
            let listen = format!("127.0.0.1:{port}");
            let env: Vec<(&str, &str)> = [("FLEET_HOST", "127.0.0.1")].into_iter().chain(env.iter().copied()).collect();
            Hangar::start_with_env(&yaml, &["--listen", &listen], &env)
        })
        .collect();
    let (base, balancer) = haproxy(&hangars);
    // The secret is read at start; the file may go now.
    drop(secret_dir);
    Fleet { hangars, base, _balancer: balancer }
}

/// A haproxy doing round robin over `hangars` (its answers name the hangar that served them in
/// `X-Served-By`: `hangar0`, `hangar1`), on a loopback port bound here (port 0) and handed
/// to it as a file descriptor: haproxy cannot report a port it picked itself.
fn haproxy(hangars: &[Hangar]) -> (String, Background) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let servers: String = hangars
        .iter()
        .enumerate()
        .map(|(i, h)| format!("  server hangar{i} {}\n", h.base.trim_start_matches("http://")))
        .collect();
    let config = format!(
        "global\n  maxconn 256\n\
         defaults\n  mode http\n  option http-server-close\n  retries 1\n  option redispatch\n\
         \x20 timeout connect 2s\n  timeout client 60s\n  timeout server 60s\n\
         frontend fleet\n  bind fd@3\n  default_backend hangars\n\
         backend hangars\n  balance roundrobin\n  http-response set-header X-Served-By %[srv_name]\n{servers}"
    );
    let path = hangars[0].path("haproxy.cfg");
    std::fs::write(&path, config).unwrap();
    let mut command = Command::new("haproxy");
    command.args(["-db", "-f"]).arg(&path).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    command.fd_mappings(vec![FdMapping { parent_fd: OwnedFd::from(listener), child_fd: 3 }]).unwrap();
    let balancer = Background { child: command.spawn().expect("haproxy (apt-get install haproxy)") };
    // Answered by some hangar through the balancer: it is up.
    poll("haproxy to serve", Duration::from_secs(20), || {
        hangar_tests::raw_http(
            base.trim_start_matches("http://"),
            "GET /health/live HTTP/1.1\r\nHost: 127.0.0.1\r\n",
            b"",
        )
        .ok()
        .filter(|(status, _)| *status == 200)
    });
    (base, balancer)
}

/// A legacy request on `session` (none: `initialize`): its status, headers and JSON body.
fn legacy(base: &str, session: Option<&str>, method: &str, params: Value) -> (u16, Option<String>, Value) {
    let mut body = json!({"jsonrpc": "2.0", "method": method, "params": params});
    if !method.starts_with("notifications/") {
        body["id"] = json!(7);
    }
    let mut request = agent()
        .post(&format!("{base}/mcp"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", LEGACY)
        .header("X-API-Key", ALICE);
    if let Some(session) = session {
        request = request.header("Mcp-Session-Id", session);
    }
    let mut response = request.send(body.to_string().as_bytes()).unwrap();
    let status = response.status().as_u16();
    let session = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let text = response.body_mut().read_to_string().unwrap_or_default();
    // A JSON answer, or the `data:` of an event stream's one message.
    let json = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap_or(&text);
    (status, session, serde_json::from_str(json).unwrap_or(Value::Null))
}

fn initialize(base: &str) -> String {
    let params =
        json!({"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "fleet", "version": "0"}});
    let (status, session, body) = legacy(base, None, "initialize", params);
    assert_eq!(status, 200, "{body}");
    let session = session.expect("a session id");
    let (status, _, _) = legacy(base, Some(&session), "notifications/initialized", json!({}));
    assert_eq!(status, 202);
    session
}

/// How many requests `hangar` forwarded to another hangar of the fleet.
pub(crate) fn forwarded(hangar: &Hangar) -> usize {
    hangar.log().matches("forwarded to the hangar holding this id").count()
}

#[test]
fn a_legacy_session_of_the_typescript_sdk_works_through_round_robin() {
    let fleet = fleet();
    let script = repo_root().join("tests/fixtures/ts_fleet_client.mjs");
    let output =
        Command::new(node()).arg(&script).args([&format!("{}/mcp", fleet.base), ALICE, "6"]).output().expect("node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let seen: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|_| panic!("{stdout}"));
    assert_eq!(seen["echoes"], json!([0, 1, 2, 3, 4, 5]), "{seen}");
    // The id names its owner only sealed.
    let session = seen["sessionId"].as_str().unwrap();
    assert!(session.starts_with("hgr1-") && !session.contains("127.0.0.1"), "{session}");
    let hops: usize = fleet.hangars.iter().map(forwarded).sum();
    assert!(hops >= 3, "round robin sent about half of the session's requests to the other hangar: {hops}");
}

#[test]
fn a_task_made_on_one_hangar_is_polled_through_the_other() {
    let fleet = fleet();
    let (status, created) =
        mcp(&fleet.base, ALICE, "tools/call", json!({"name": "sleep", "arguments": {"ms": 1500}}), true);
    assert_eq!(status, 200, "{created}");
    let task_id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {created}")).to_owned();
    let mut polls = 0;
    let done = poll("the task to complete", Duration::from_secs(20), || {
        polls += 1;
        let (status, body) = mcp(&fleet.base, ALICE, "tasks/get", json!({"taskId": task_id}), true);
        assert_eq!(status, 200, "poll {polls}: {body}");
        (body["result"]["status"] == "completed").then_some(body)
    });
    assert_eq!(done["result"]["result"]["content"][0]["text"], "slept 1500 ms", "{done}");
    // Twice more, so both hangars answered for it whatever the count so far.
    for _ in 0..2 {
        let (status, body) = mcp(&fleet.base, ALICE, "tasks/get", json!({"taskId": task_id}), true);
        assert_eq!((status, body["result"]["status"].as_str()), (200, Some("completed")), "{body}");
    }
    assert!(fleet.hangars.iter().map(forwarded).sum::<usize>() >= 1);
}

#[test]
fn a_tasks_status_notifications_reach_a_listen_on_either_hangar() {
    use crate::task_news::{listen, messages, read_some};
    let fleet = fleet();
    let (status, created) =
        mcp(&fleet.base, ALICE, "tools/call", json!({"name": "sleep", "arguments": {"ms": 2500}}), true);
    assert_eq!(status, 200, "{created}");
    let task_id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {created}")).to_owned();
    // Two listens in a row: the balancer sends one to each hangar; the one that landed on the
    // other hangar is forwarded to the owner, so both hear the task complete.
    let mut listens = [listen(&fleet.base, ALICE, json!([task_id])), listen(&fleet.base, ALICE, json!([task_id]))];
    let mut heard = [String::new(), String::new()];
    poll("both listens to hear the task complete", Duration::from_secs(30), || {
        for (stream, seen) in listens.iter_mut().zip(heard.iter_mut()) {
            read_some(stream, seen);
        }
        heard
            .iter()
            .all(|seen| {
                messages(seen).iter().any(|m| {
                    m["method"] == "notifications/tasks"
                        && m["params"]["taskId"] == task_id.as_str()
                        && m["params"]["status"] == "completed"
                })
            })
            .then_some(())
    });
    assert!(fleet.hangars.iter().map(forwarded).sum::<usize>() >= 1);
}

#[test]
fn a_sessions_stream_and_its_list_changed_news_follow_it_to_its_owner() {
    let fleet = fleet();
    let session = initialize(&fleet.base);
    // Reopened three times with `Last-Event-ID` (the balancer alternates): always the owner's
    // stream, never "session not found" from the other hangar.
    for attempt in 0..3 {
        let (status, head) = hangar_tests::raw_http(
            fleet.base.trim_start_matches("http://"),
            &format!(
                "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nX-API-Key: {ALICE}\r\n\
                 MCP-Protocol-Version: {LEGACY}\r\nMcp-Session-Id: {session}\r\nLast-Event-ID: {attempt}\r\n"
            ),
            b"",
        )
        .unwrap();
        assert_eq!(status, 200, "attempt {attempt}: {head}");
        assert!(head.to_ascii_lowercase().contains("content-type: text/event-stream"), "{head}");
    }
    // A held stream hears the owner's tools/list_changed: the upstream's tools change (on
    // every hangar, as a new version rolled out would).
    let stream = open_stream(&fleet.base, &session);
    for hangar in &fleet.hangars {
        std::fs::write(hangar.path("shift"), "").unwrap();
    }
    let news = stream.recv_timeout(Duration::from_secs(20)).expect("the owner's list_changed news");
    assert!(news.contains("notifications/tools/list_changed"), "{news}");
}

#[test]
fn a_2026_listen_through_the_balancer_hears_the_tool_changes_of_the_hangar_holding_it() {
    use crate::task_news::{messages, read_some};
    let fleet = fleet();
    // `slow` runs on each hangar, so its tools can change there.
    for hangar in &fleet.hangars {
        start_slow(hangar);
    }
    // Two listens in a row: the balancer sends one to each hangar. Each announces only its own
    // changes (2026-07-28 is stateless: nothing is forwarded), so each stream is checked against
    // the hangar that holds it.
    let mut listens: Vec<(TcpStream, String)> =
        (0..2).map(|_| (listen_for_tools(&fleet.base), String::new())).collect();
    for (stream, seen) in &mut listens {
        let acknowledged = poll("the listen's acknowledgement", Duration::from_secs(20), || {
            read_some(stream, seen);
            messages(seen).into_iter().find(|m| m["method"] == "notifications/subscriptions/acknowledged")
        });
        assert_eq!(acknowledged["params"]["notifications"]["toolsListChanged"], true, "{seen}");
    }
    let holders: Vec<String> = listens.iter().map(|(_, seen)| served_by(seen)).collect();
    assert_ne!(holders[0], holders[1], "round robin: one listen on each hangar");
    let changed = |seen: &str| messages(seen).iter().any(|m| m["method"] == "notifications/tools/list_changed");
    for (i, hangar) in fleet.hangars.iter().enumerate() {
        // This hangar's upstream changes its tools: the stream this hangar holds hears it.
        std::fs::write(hangar.path("shift"), "").unwrap();
        let holder = holders.iter().position(|h| *h == format!("hangar{i}")).expect("a listen on each hangar");
        let (stream, seen) = &mut listens[holder];
        poll("the holding hangar's list_changed", Duration::from_secs(20), || {
            read_some(stream, seen);
            changed(seen.as_str()).then_some(())
        });
        let notice = messages(seen).into_iter().find(|m| m["method"] == "notifications/tools/list_changed").unwrap();
        assert_eq!(notice["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "listen-tools", "{seen}");
        if i == 0 {
            // The other hangar's tools have not changed: its stream heard nothing (so far).
            let (other, heard) = &mut listens[1 - holder];
            read_some(other, heard);
            assert!(!changed(heard.as_str()), "{heard}");
        }
    }
    // The new tools are served through the balancer, by both hangars.
    for _ in 0..2 {
        let (status, listed) = mcp(&fleet.base, ALICE, "tools/list", json!({}), false);
        let names: Vec<&str> =
            listed["result"]["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
        assert!(status == 200 && names.contains(&"add"), "{listed}");
    }
}

/// Starts `slow` on `hangar` (its API, directly), asserting it was.
pub(crate) fn start_slow(hangar: &Hangar) {
    let started = agent().post(&format!("{}/api/mcp_servers/slow/start", hangar.base)).header("X-API-Key", ALICE);
    assert_eq!(started.header("Content-Type", "application/json").send_empty().unwrap().status().as_u16(), 200);
}

/// A 2026-07-28 `subscriptions/listen` for tool-list changes through `base`, as Alice, on a
/// connection of its own, read without blocking for long (`task_news::read_some`).
fn listen_for_tools(base: &str) -> TcpStream {
    use std::io::Write;
    let addr = base.trim_start_matches("http://");
    let body = json!({"jsonrpc": "2.0", "id": "listen-tools", "method": "subscriptions/listen", "params": {
        "notifications": {"toolsListChanged": true},
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}},
    }})
    .to_string();
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {MODERN}\r\n\
         Mcp-Method: subscriptions/listen\r\nX-API-Key: {ALICE}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    stream
}

/// The hangar the balancer sent a request to, from its answer's head (`X-Served-By`).
fn served_by(answer: &str) -> String {
    let head = answer.split("\r\n\r\n").next().unwrap_or_default();
    head.lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("x-served-by:").map(|v| v.trim().to_owned()))
        .unwrap_or_else(|| panic!("no X-Served-By: {answer}"))
}

/// A legacy session's GET stream through `base`, its `data:` lines sent on as they come.
fn open_stream(base: &str, session: &str) -> mpsc::Receiver<String> {
    let headers = format!("MCP-Protocol-Version: {LEGACY}\r\nMcp-Session-Id: {session}\r\n");
    stream_lines(base, "/mcp", &headers, "data: ")
}

/// `GET path` with `headers` (each line ending in CRLF) through `base` as an event stream: its
/// lines starting with `prefix`, sent on as they come.
pub(crate) fn stream_lines(base: &str, path: &str, headers: &str, prefix: &'static str) -> mpsc::Receiver<String> {
    use std::io::Write;
    let mut socket = std::net::TcpStream::connect(base.trim_start_matches("http://")).unwrap();
    write!(
        socket,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nX-API-Key: {ALICE}\r\n{headers}\r\n"
    )
    .unwrap();
    let (tx, rx) = mpsc::channel();
    let (opened_tx, opened) = mpsc::channel();
    std::thread::spawn(move || {
        let mut in_head = true;
        for line in BufReader::new(socket).lines().map_while(Result::ok) {
            // The end of the head: the owner holds the stream now, so what happens next reaches it.
            if in_head && line.is_empty() {
                in_head = false;
                let _ = opened_tx.send(());
            }
            if line.starts_with(prefix) && tx.send(line).is_err() {
                return;
            }
        }
    });
    opened.recv_timeout(Duration::from_secs(20)).expect("the event stream's head");
    rx
}

#[test]
fn the_journal_stream_resumes_through_the_balancer_with_exactly_the_missed_events() {
    let fleet = fleet();
    let (first, second) = (&fleet.hangars[0], &fleet.hangars[1]);
    // Journal events on the first: its start, then `slow` started, stopped and started again.
    start_slow(first);
    let stopped = agent().post(&format!("{}/api/mcp_servers/slow/stop", first.base)).header("X-API-Key", ALICE);
    assert_eq!(stopped.header("Content-Type", "application/json").send_empty().unwrap().status().as_u16(), 200);
    start_slow(first);
    // A client of the first saw its journal up to the second event, then lost its stream.
    let wait = Duration::from_secs(20);
    let from_first = stream_lines(&first.base, "/api/events?since=0", "", "id: ");
    let journal: Vec<String> = (0..5).map(|_| from_first.recv_timeout(wait).expect("an event")).collect();
    let seen = journal[1].trim_start_matches("id: ");
    let tag = seen.split_once('.').expect("a tagged id").1;
    // It resumes through the balancer, twice (so once through each hangar): each time the first
    // hangar's journal from the next event on, none skipped, none repeated.
    for attempt in 0..2 {
        let resumed = stream_lines(&fleet.base, "/api/events", &format!("Last-Event-ID: {seen}\r\n"), "id: ");
        let replayed: Vec<String> = (2..5).map(|_| resumed.recv_timeout(wait).expect("a replayed event")).collect();
        assert_eq!(replayed, journal[2..], "attempt {attempt}: exactly the events after {seen}");
        assert!(replayed.iter().all(|id| id.ends_with(&format!(".{tag}"))), "the first hangar's events: {replayed:?}");
    }
    assert_eq!(forwarded(second), 1, "the resume that reached the second hangar went on to the first");
}

#[test]
fn a_dead_hangars_ids_are_a_clear_retryable_error_and_a_forged_owner_is_unknown() {
    let mut fleet = fleet();
    // One session owned by each hangar.
    let sessions: Vec<String> = fleet.hangars.iter().map(|h| initialize(&h.base)).collect();
    assert_ne!(sessions[0], sessions[1]);

    // A forged tag (a URL of the client's choosing) is an unknown session, answered where it lands.
    let bare = sessions[0].split_once('.').unwrap().0;
    let forged = format!("{bare}.{}", "aHR0cDovLzEyNy4wLjAuMTo5Cg");
    let (status, _, body) = legacy(&fleet.base, Some(&forged), "ping", json!({}));
    assert_eq!(status, 404, "{body}");

    // The second hangar dies whole (supervisor, API, prober, upstreams).
    let dead = fleet.hangars.pop().unwrap();
    let pid = dead.pid();
    for helper in children_named(pid, "hangar-api").into_iter().chain(children_named(pid, "hangar-prober")) {
        sigkill(helper);
    }
    sigkill(pid);
    poll("the dead hangar's port to refuse", Duration::from_secs(10), || {
        std::net::TcpStream::connect(dead.base.trim_start_matches("http://")).is_err().then_some(())
    });

    // Its session: 503 with Retry-After, from the live hangar (or the balancer), at once.
    let mut answers = Vec::new();
    for session in &sessions {
        for _ in 0..2 {
            let (status, _, body) = legacy(&fleet.base, Some(session), "ping", json!({}));
            answers.push((status, body));
        }
    }
    let served = answers[..2].iter().all(|(status, body)| *status == 200 && body.get("result").is_some());
    assert!(served, "the live hangar's session works: {answers:?}");
    for (status, body) in &answers[2..] {
        assert_eq!(*status, 503, "the dead hangar's session: {body}");
        assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("unavailable")), "a clear error: {body}");
    }
    let retry = raw_status_and_retry(&fleet.base, &sessions, &fleet.hangars[0]);
    assert_eq!(retry.as_deref(), Some("1"));
    drop(dead);
}

#[test]
fn killing_a_hangar_mid_run_fails_its_calls_in_flight_clearly_and_the_fleet_serves_on() {
    let mut fleet = fleet();
    let dead = fleet.hangars.pop().unwrap();
    let live = &fleet.hangars[0];
    // State the doomed hangar holds: a legacy session and a task (a minute's sleep).
    let session = initialize(&dead.base);
    let sleep = json!({"name": "sleep", "arguments": {"ms": 60000}});
    let (status, _, created) = modern(&dead.base, "tools/call", sleep, true);
    let task_id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {created}")).to_owned();
    assert_eq!(status, 200, "{created}");
    // Two slow calls in the session through the balancer: one reaches the doomed hangar
    // itself, the other the live one, which forwards it. Each client gives up after 30 s
    // (`oauth::agent`), so a hang fails the test.
    let calls: Vec<_> = (0..2)
        .map(|_| {
            let (base, session) = (fleet.base.clone(), session.clone());
            std::thread::spawn(move || {
                legacy(&base, Some(&session), "tools/call", json!({"name": "sleep", "arguments": {"ms": 60000}}))
            })
        })
        .collect();
    poll("the task and both calls in flight on the doomed hangar", Duration::from_secs(20), || {
        (calls_sent(&dead) >= 3.0).then_some(())
    });

    // It dies whole: supervisor, API, prober.
    let pid = dead.pid();
    for helper in children_named(pid, "hangar-api").into_iter().chain(children_named(pid, "hangar-prober")) {
        sigkill(helper);
    }
    sigkill(pid);

    // (a) Both calls end with a clear error: the forwarded one a 503 from the live hangar, the
    // other whatever error the balancer gives for a backend that died mid-answer.
    let answers: Vec<(u16, Option<String>, Value)> = calls.into_iter().map(|call| call.join().unwrap()).collect();
    for (status, _, body) in &answers {
        assert!(*status >= 500 || body.get("error").is_some(), "a clear error, not an answer: {status} {body}");
    }
    let unavailable = answers.iter().any(|(status, _, body)| {
        *status == 503 && body["error"]["message"].as_str().is_some_and(|m| m.contains("session is unavailable"))
    });
    assert!(unavailable, "the call forwarded through the live hangar: {answers:?}");
    assert!(live.log().contains("the hangar holding this id is unavailable"), "the live hangar saw its owner go");

    // (b) Stateless 2026-07-28 calls through the balancer go on: once one is answered (the
    // balancer may take a moment to pass over the dead backend), every one is.
    let echo = || modern(&fleet.base, "tools/call", json!({"name": "echo", "arguments": {"n": 1}}), false);
    poll("a stateless call answered through the balancer", Duration::from_secs(20), || {
        let (status, _, body) = echo();
        (status == 200 && body["result"]["structuredContent"] == json!({"n": 1})).then_some(())
    });
    for attempt in 0..4 {
        let (status, _, body) = echo();
        assert_eq!(
            (status, &body["result"]["structuredContent"]),
            (200, &json!({"n": 1})),
            "attempt {attempt}: {body}"
        );
    }

    // (c) The dead hangar's task, polled through the balancer (so through either backend): a
    // clear 503 with `Retry-After`, never a hang.
    for attempt in 0..2 {
        let (status, retry_after, body) = modern(&fleet.base, "tasks/get", json!({"taskId": task_id}), true);
        assert_eq!(status, 503, "attempt {attempt}: {body}");
        assert_eq!(retry_after.as_deref(), Some("1"), "attempt {attempt}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("task is unavailable"), "attempt {attempt}: {body}");
    }
    drop(dead);
}

#[test]
fn a_frozen_hangars_ids_are_a_clear_retryable_error_and_work_again_once_it_thaws() {
    // Event streams keep alive every second, not 15 s, so a forward takes 3 s of silence, not
    // 45 s, for a frozen owner (`cluster::idle_timeout`, three keep-alives).
    let fleet = fleet_with(&[("HANGAR_TEST_KEEP_ALIVE_S", "1")]);
    let idle = Duration::from_secs(3);
    let (owner, other) = (&fleet.hangars[0], &fleet.hangars[1]);
    // State the owner holds: a legacy session with its event stream (held through the other
    // hangar, which forwards it), and a short task.
    let session = initialize(&owner.base);
    let stream = open_stream(&other.base, &session);
    // While the owner is well, its quiet stream outlives the idle timeout twice over: keep-alives
    // pass through, so the cut below is the freeze, not the quiet.
    let quiet = stream.recv_timeout(2 * idle);
    assert_eq!(quiet, Err(mpsc::RecvTimeoutError::Timeout), "a healthy quiet stream stays open");
    let sleep = json!({"name": "sleep", "arguments": {"ms": 1500}});
    let (status, _, created) = modern(&owner.base, "tools/call", sleep, true);
    let task_id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {created}")).to_owned();
    assert_eq!(status, 200, "{created}");

    // The owner's API freezes: its port still accepts connections, nothing answers them.
    let api = children_named(owner.pid(), "hangar-api");
    assert_eq!(api.len(), 1, "{api:?}");
    let frozen = Frozen::stop(api[0]);
    let frozen_at = Instant::now();

    // Its ids, asked of the other hangar (as the balancer would send them): a clear 503 with
    // `Retry-After`, never a hang (each client gives up after 30 s, `oauth::agent`, so a hang
    // fails the test).
    let (status, _, body) = legacy(&other.base, Some(&session), "ping", json!({}));
    assert_eq!(status, 503, "the frozen hangar's session: {body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("session is unavailable"), "a clear error: {body}");
    assert_eq!(body["id"], 7, "{body}");
    let (status, retry_after, body) = modern(&other.base, "tasks/get", json!({"taskId": task_id}), true);
    assert_eq!((status, retry_after.as_deref()), (503, Some("1")), "the frozen hangar's task: {body}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("task is unavailable")), "{body}");
    // The stream held through the other hangar is cut (its client reconnects and resumes) after
    // the idle timeout: within 30 s of the freeze, well before the 45 s of silence it would take
    // without the shortened keep-alive.
    let cut = stream.recv_timeout(Duration::from_secs(30).saturating_sub(frozen_at.elapsed()));
    assert_eq!(cut, Err(mpsc::RecvTimeoutError::Disconnected), "the stream ends after the idle timeout");
    let log = other.log();
    assert!(log.contains("the hangar holding this id is unavailable"), "the other hangar says why");
    assert!(log.contains("the answer of the hangar holding this id was cut"), "the other hangar says why");

    // Thawed, it serves its session and its task again, through the other hangar.
    drop(frozen);
    poll("the thawed hangar's session to answer", Duration::from_secs(20), || {
        let (status, _, body) = legacy(&other.base, Some(&session), "ping", json!({}));
        (status == 200 && body.get("result").is_some()).then_some(())
    });
    let done = poll("the thawed hangar's task to answer", Duration::from_secs(20), || {
        let (status, _, body) = modern(&other.base, "tasks/get", json!({"taskId": task_id}), true);
        (status == 200 && body["result"]["status"] == "completed").then_some(body)
    });
    assert_eq!(done["result"]["result"]["content"][0]["text"], "slept 1500 ms", "{done}");
}

#[test]
fn a_forwarded_legacy_call_slower_than_the_head_timeout_is_answered_whole() {
    let fleet = fleet();
    let (owner, other) = (&fleet.hangars[0], &fleet.hangars[1]);
    let session = initialize(&owner.base);
    // A plain JSON call (no progress asked) through the other hangar, which forwards it, taking
    // longer than a forward waits for its answer's head (5 s, `cluster::HEAD_TIMEOUT`): the
    // owner sends a deferred head at once, and the answer when it has it.
    let call = json!({"name": "sleep", "arguments": {"ms": 8000}});
    let (status, _, body) = legacy(&other.base, Some(&session), "tools/call", call);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["content"][0]["text"], "slept 8000 ms", "{body}");
    assert_eq!(forwarded(other), 1);
}

/// How many tool calls `hangar` sent to `slow` (`/metrics`, from its API directly).
fn calls_sent(hangar: &Hangar) -> f64 {
    let mut response = agent().get(&format!("{}/metrics", hangar.base)).header("X-API-Key", ALICE).call().unwrap();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    let sample = "hangar_tool_calls_total{mcp_server=\"slow\"}";
    text.lines().find_map(|l| l.strip_prefix(sample)?.trim().parse().ok()).unwrap_or(0.0)
}

/// A 2026-07-28 request through `base` as Alice (`takes_tasks`: declaring the tasks extension),
/// by an agent with a timeout: its status, `Retry-After` and JSON body.
fn modern(base: &str, method: &str, params: Value, takes_tasks: bool) -> (u16, Option<String>, Value) {
    mcp_with(&agent(), base, ALICE, method, params, takes_tasks)
}

/// The `Retry-After` of a ping on the dead hangar's session sent straight to the live hangar.
fn raw_status_and_retry(_base: &str, sessions: &[String], live: &Hangar) -> Option<String> {
    sessions.iter().find_map(|session| {
        let (status, head) = hangar_tests::raw_http(
            live.base.trim_start_matches("http://"),
            &format!(
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\nX-API-Key: {ALICE}\r\n\
                 MCP-Protocol-Version: {LEGACY}\r\nMcp-Session-Id: {session}\r\n"
            ),
            br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
        )
        .ok()?;
        (status == 503).then_some(())?;
        head.lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("retry-after: ").map(|v| v.trim().to_owned()))
    })
}

#[test]
fn a_call_held_for_its_clients_answer_is_resumed_through_the_other_hangar() {
    let everything = format!(
        "  everything:\n    command: [\"{}\", \"{}\", \"stdio\"]\n",
        node().display(),
        server_everything().display()
    );
    let fleet = fleet_of("", &everything);
    let (first, second) = (&fleet.hangars[0], &fleet.hangars[1]);
    // Asked through the first: the call is held there, `input_required` (SEP-2322).
    let sampling = json!({"io.modelcontextprotocol/clientCapabilities": {"sampling": {}}});
    let call = json!({"name": "trigger-sampling-request", "arguments": {"prompt": "hi"}});
    let asked = first.mcp_with("tools/call", call.clone(), sampling.clone(), &[]);
    let result = &asked.body["result"];
    assert_eq!(result["resultType"], "input_required", "{}", asked.body);
    let (key, _) = result["inputRequests"].as_object().and_then(|q| q.iter().next()).expect("a question");
    let answer = json!({"role": "assistant", "content": {"type": "text", "text": "sampled: hi"}, "model": "m"});
    let mut retry = call;
    retry["inputResponses"] = json!({key.as_str(): answer});
    retry["requestState"] = result["requestState"].clone();
    // Retried through the second, which forwards it to the first.
    let done = second.mcp_with("tools/call", retry, sampling, &[]);
    let text = done.body["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("LLM sampling result") && text.contains("sampled: hi"), "{}", done.body);
    assert_eq!(forwarded(second), 1);
}

#[test]
fn a_cluster_block_that_cannot_be_joined_is_a_config_error_naming_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short");
    std::fs::write(&short, "too-short-a-secret").unwrap();
    let good = dir.path().join("good");
    std::fs::write(&good, SECRET).unwrap();
    let cases = [
        ("http://${FLEET_HOST}:8000", &good, "cluster.advertise", "FLEET_HOST is not set"),
        ("http://127.0.0.1:8000/mcp", &good, "cluster.advertise", "no path"),
        ("http://127.0.0.1:8000", &short, "cluster.secret_file", "at least 32 bytes"),
        ("http://127.0.0.1:8000", &dir.path().join("missing"), "cluster.secret_file", "missing"),
    ];
    for (advertise, secret, key, why) in cases {
        let config = dir.path().join("hangar.yaml");
        let yaml = format!("cluster: {{advertise: \"{advertise}\", secret_file: \"{}\"}}\n", secret.display());
        std::fs::write(&config, yaml).unwrap();
        let socket = dir.path().join("s.sock");
        let args = ["--config".as_ref(), config.as_os_str(), "--socket".as_ref(), socket.as_os_str()];
        let (code, stderr) = hangar_tests::supervisor_exit(&args, &[("FLEET_HOST", None)]);
        assert_eq!(code, Some(78), "{advertise}: {stderr}");
        assert!(stderr.contains(key) && stderr.contains(why), "{advertise}: {stderr}");
        assert!(!stderr.contains("too-short-a-secret"), "the secret is never echoed: {stderr}");
    }
}
