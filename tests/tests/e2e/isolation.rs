//! Each client its own: two people (alice and bob, each an API key with a profile that sees the
//! server, so neither is an admin) run the TypeScript SDK 1.x as legacy clients, each with a
//! root of their own, against one real `@modelcontextprotocol/server-everything` behind the
//! front door, in each `isolation` mode. Alice asks for log lines and turns on the server's
//! simulated logging; both ask the server for their roots (`get-roots-list`, which the server
//! answers from the roots it last got and keeps).
//!
//! In every mode bob never sees alice's root or one of her log lines, and each sees their own
//! root. With `shared`, one process serves both: the hangar tells it the roots changed before
//! each client's call and answers its `roots/list` from that client. With `per_identity`, each
//! has a process of their own, listed under the server to an admin and to its owner alone, its
//! log the owner's to read, gone after its idle TTL. With `per_session`, two sessions of one
//! person get two processes. Past `max_instances`, with every instance busy, a newcomer is
//! refused with `instances_exhausted`.
//!
//! Needs `scripts/setup-clients` (Node, server-everything, the TypeScript SDK 1.x).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use hangar_tests::serde_json::{self, Value, json};
use hangar_tests::{Hangar, key_hash, node, poll, raw_http, repo_root, server_everything};

use crate::browser::{eventually, in_browser};
use crate::status_page::sign_in;

const ALICE: &str = "alice-key-0123456789";
const BOB: &str = "bob-key-0123456789";
const OPS: &str = "ops-key-0123456789";
const ALICE_ROOT: &str = "file:///home/alice/secret-project";
const BOB_ROOT: &str = "file:///home/bob/other";

/// The front door, three keys (alice and bob with a profile that sees everything but is no
/// admin, ops with none: an admin) and server-everything with `isolation` and `extra` keys.
fn hangar(isolation: &str, extra: &str) -> Hangar {
    Hangar::start(&format!(
        "tool_access: {{mode: front_door}}\n\
         auth:\n  api_keys:\n    - {{name: alice, hash: \"{}\", profile: people}}\n    - {{name: bob, hash: \"{}\", profile: people}}\n    - {{name: ops, hash: \"{}\"}}\n\
         profiles:\n  people: {{servers: [everything]}}\n\
         mcp_servers:\n  everything:\n    command: [\"{}\", \"{}\", \"stdio\"]\n    isolation: {isolation}\n{extra}",
        key_hash(ALICE),
        key_hash(BOB),
        key_hash(OPS),
        node().display(),
        server_everything().display(),
    ))
}

/// One person's TypeScript client (`tests/fixtures/ts_isolation_client.mjs`), driven a command
/// a line.
struct Person {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Person {
    fn connect(hangar: &Hangar, key: &str, root: &str) -> Person {
        let script = repo_root().join("tests/fixtures/ts_isolation_client.mjs");
        let url = format!("{}/mcp", hangar.base);
        let mut child = Command::new(node())
            .args([script.to_str().unwrap_or_default(), url.as_str(), key, root])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run node");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut person = Person { child, stdin, stdout };
        assert_eq!(person.line()["ready"], true);
        person
    }

    /// The client's next line (bounded: a client that hangs is killed, which ends the read).
    fn line(&mut self) -> Value {
        let pid = self.child.id();
        let (done, waiting) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if waiting.recv_timeout(Duration::from_secs(60)) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        });
        let mut line = String::new();
        let read = self.stdout.read_line(&mut line);
        let _ = done.send(());
        assert!(read.is_ok() && !line.is_empty(), "the TypeScript client printed nothing more");
        serde_json::from_str(&line).unwrap_or_else(|err| panic!("{err}: {line}"))
    }

    fn send(&mut self, command: &str) -> Value {
        writeln!(self.stdin, "{command}").expect("write to the client");
        self.line()
    }

    /// What `get-roots-list` answers this person.
    fn roots(&mut self) -> String {
        let answer = self.send("call get-roots-list");
        assert_eq!(answer["isError"], false, "{answer}");
        answer["text"].as_str().unwrap_or_default().to_owned()
    }

    /// The simulated log lines this person heard (server-everything's `<Level>-level message`s;
    /// its other lines, such as "Roots updated", come during the person's own calls).
    fn logs(&mut self) -> Vec<String> {
        let answer = self.send("logs");
        let lines = answer["logs"].as_array().into_iter().flatten().filter_map(Value::as_str);
        lines
            .filter(|line| line.contains("level message") || line.contains("level-message"))
            .map(str::to_owned)
            .collect()
    }

    /// Asks for log lines at `debug` and turns the server's simulated logging on.
    fn start_logging(&mut self) {
        assert_eq!(self.send("level debug")["ok"], true);
        let toggled = self.send("call toggle-simulated-logging");
        assert!(toggled["text"].as_str().unwrap_or_default().contains("Started"), "{toggled}");
    }
}

impl Drop for Person {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET path` as `key`: the status and the JSON body.
fn get_as(hangar: &Hangar, key: &str, path: &str) -> (u16, Value) {
    let addr = hangar.base.trim_start_matches("http://");
    let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\n");
    let (status, text) = raw_http(addr, &head, b"").expect("the API answers");
    let body = text.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// The instances the server's record shows `key`.
fn instances_seen_by(hangar: &Hangar, key: &str) -> Vec<Value> {
    let (status, details) = get_as(hangar, key, "/api/mcp_servers/everything");
    assert_eq!(status, 200, "{details}");
    details["instances"].as_array().cloned().unwrap_or_default()
}

/// Alice's roots and log lines stay hers: bob, asking after her, sees his own root, never hers,
/// and none of her log lines, however long her logging runs.
fn alice_and_bob_keep_their_own(alice: &mut Person, bob: &mut Person, mode: &str) {
    alice.start_logging();
    let hers = alice.roots();
    assert!(hers.contains(ALICE_ROOT), "{mode}: alice sees her root: {hers}");
    let his = bob.roots();
    assert!(!his.contains(ALICE_ROOT), "{mode}: bob never sees alice's root: {his}");
    assert!(his.contains(BOB_ROOT), "{mode}: bob sees his own root: {his}");
    let hers = alice.roots();
    assert!(hers.contains(ALICE_ROOT) && !hers.contains(BOB_ROOT), "{mode}: alice still sees hers alone: {hers}");
    // The server logs every few seconds for alice; her lines reach her.
    poll(&format!("{mode}: alice's log lines"), Duration::from_secs(30), || {
        let lines = alice.logs();
        (!lines.is_empty()).then_some(())
    });
    let heard = bob.logs();
    assert!(heard.is_empty(), "{mode}: bob hears none of alice's log lines: {heard:?}");
}

/// A hangar whose server is isolated as `isolation` says (with `extra` keys), and alice and bob
/// connected to it, each having kept their own ([`alice_and_bob_keep_their_own`]).
fn kept_apart(isolation: &str, extra: &str) -> (Hangar, Person, Person) {
    let hangar = hangar(isolation, extra);
    let mut alice = Person::connect(&hangar, ALICE, ALICE_ROOT);
    let mut bob = Person::connect(&hangar, BOB, BOB_ROOT);
    alice_and_bob_keep_their_own(&mut alice, &mut bob, isolation);
    (hangar, alice, bob)
}

#[test]
fn shared_one_process_answers_each_client_with_its_own_roots_and_keeps_her_logs_hers() {
    let (hangar, _alice, _bob) = kept_apart("shared", "");
    assert!(instances_seen_by(&hangar, OPS).is_empty(), "a shared server has no instances");
}

#[test]
fn per_identity_runs_one_process_each_shown_to_its_owner_and_gone_after_its_idle_ttl() {
    let (hangar, mut alice, mut bob) = kept_apart("per_identity", "    idle_ttl_s: 4\n");
    // Bob asked for log lines too: his own process has none of hers to give him.
    assert_eq!(bob.send("level debug")["ok"], true);
    let _ = bob.roots();

    // Two processes, both listed under the server to an admin; each person sees only theirs.
    let all = instances_seen_by(&hangar, OPS);
    let owners: Vec<&str> = all.iter().filter_map(|i| i["identity"].as_str()).collect();
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(owners.contains(&"alice") && owners.contains(&"bob"), "{owners:?}");
    let pids: Vec<u64> = all.iter().filter_map(|i| i["pid"].as_u64()).collect();
    assert_eq!(pids.len(), 2, "both run: {all:?}");
    assert_ne!(pids[0], pids[1], "two processes");
    let hers = instances_seen_by(&hangar, ALICE);
    assert_eq!(hers.len(), 1, "alice sees her own alone: {hers:?}");
    assert_eq!(hers[0]["identity"], "alice");
    let her_instance = hers[0]["instance"].as_str().expect("an instance name").to_owned();
    assert!(her_instance.starts_with("everything@"), "{her_instance}");
    let his_instance = instances_seen_by(&hangar, BOB)[0]["instance"].as_str().expect("his").to_owned();

    // Her instance's log is hers to read, and not bob's; an admin reads both.
    let logs = |key: &str, instance: &str| get_as(&hangar, key, &format!("/api/mcp_servers/{instance}/logs?lines=50"));
    assert_eq!(logs(ALICE, &her_instance).0, 200);
    assert_eq!(logs(BOB, &her_instance).0, 404, "another's instance does not exist for bob");
    assert_eq!(logs(OPS, &her_instance).0, 200);
    assert_eq!(logs(OPS, &his_instance).0, 200);
    let (status, record) = get_as(&hangar, BOB, &format!("/api/mcp_servers/{her_instance}"));
    assert_eq!(status, 404, "{record}");

    // `/metrics` shows the admin both instances, by name.
    let addr = hangar.base.trim_start_matches("http://");
    let head = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {OPS}\r\n");
    let (_, metrics) = raw_http(addr, &head, b"").expect("metrics");
    assert!(metrics.contains(&her_instance) && metrics.contains(&his_instance), "{metrics}");

    // Alice stops logging; idle, both processes stop after their TTL and leave the list.
    let toggled = alice.send("call toggle-simulated-logging");
    assert!(toggled["text"].as_str().unwrap_or_default().contains("Stopped"), "{toggled}");
    poll("both instances stopped after their idle TTL", Duration::from_secs(40), || {
        instances_seen_by(&hangar, OPS).is_empty().then_some(())
    });
    for pid in pids {
        poll("its process gone", Duration::from_secs(10), || {
            (!std::path::Path::new(&format!("/proc/{pid}")).exists()).then_some(())
        });
    }
    // A call later starts hers again, with her root.
    assert!(alice.roots().contains(ALICE_ROOT));
}

#[test]
fn per_session_gives_each_session_its_own_process() {
    let (hangar, _alice, _bob) = kept_apart("per_session", "");
    // A second session of alice's, with another root, gets a process of its own.
    let mut again = Person::connect(&hangar, ALICE, "file:///home/alice/elsewhere");
    let there = again.roots();
    assert!(there.contains("file:///home/alice/elsewhere") && !there.contains(ALICE_ROOT), "{there}");
    assert!(again.logs().is_empty(), "her other session hears nothing of the first's logging");
    let hers = instances_seen_by(&hangar, ALICE);
    assert_eq!(hers.len(), 2, "two sessions, two processes: {hers:?}");
    assert_eq!(instances_seen_by(&hangar, OPS).len(), 3);

    // The status page lists them under their server: all three to an admin, hers to alice.
    let url = format!("{}/", hangar.base);
    for (key, expected) in [(OPS, 3), (ALICE, 2)] {
        in_browser(async |browser| {
            sign_in(browser, &url, key).await;
            let listed = eventually("the instances under everything", || async {
                let script = "return [...document.querySelectorAll('[data-server=\"everything\"] .instance-list li')].map((li) => li.textContent);";
                let listed = browser.execute(script, vec![]).await.ok()?;
                let listed: Vec<String> = serde_json::from_value(listed).ok()?;
                (listed.len() == expected).then_some(listed)
            })
            .await;
            for line in &listed {
                assert!(line.starts_with("everything@") && line.contains("ready"), "{line}");
            }
            let owners = listed.iter().filter(|line| line.contains("(alice)")).count();
            assert_eq!(owners, 2, "{listed:?}");
        });
    }
}

#[test]
fn past_max_instances_with_every_instance_busy_a_newcomer_is_refused() {
    let hangar = Hangar::start(&format!(
        "tool_access: {{mode: front_door}}\n\
         auth:\n  api_keys:\n    - {{name: alice, hash: \"{}\"}}\n    - {{name: bob, hash: \"{}\"}}\n\
         mcp_servers:\n  slow:\n    command: [\"{{fake}}\", \"--tools\", \"sleep,echo\"]\n    isolation: per_identity\n    max_instances: 1\n",
        key_hash(ALICE),
        key_hash(BOB),
    ));
    // A 2026-07-28 front-door call of `sleep` as `key`, on a thread of its own.
    let call = |key: &'static str, ms: u64| {
        let addr = hangar.base.trim_start_matches("http://").to_owned();
        std::thread::spawn(move || {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "sleep", "arguments": {"ms": ms},
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}},
            }});
            let head = format!(
                "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
                 MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: sleep\r\nAuthorization: Bearer {key}\r\n"
            );
            raw_http(&addr, &head, body.to_string().as_bytes()).expect("the API answers")
        })
    };
    // Alice's call holds her instance, the only one allowed.
    let hers = call(ALICE, 4000);
    poll("alice's instance is busy", Duration::from_secs(20), || {
        let (_, details) = get_as(&hangar, ALICE, "/api/mcp_servers/slow");
        (details["instances"].as_array().is_some_and(|i| i.len() == 1 && i[0]["alive"] == true)).then_some(())
    });
    let (status, text) = call(BOB, 0).join().expect("bob's call");
    assert!(text.contains("instances_exhausted"), "{status}: {text}");
    assert!(text.contains("max_instances"), "the key to raise is named: {text}");
    let (status, text) = hers.join().expect("alice's call");
    assert!(status == 200 && text.contains("slept"), "{status}: {text}");
    // Once hers is idle, bob's call takes its place.
    let (status, text) = call(BOB, 0).join().expect("bob's call");
    assert!(status == 200 && text.contains("slept"), "{status}: {text}");
}
