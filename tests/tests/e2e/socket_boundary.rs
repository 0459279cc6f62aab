//! The control socket from where a hostile upstream stands (issue 29, §1). An upstream runs as
//! the hangar's user, and nothing in a box stops `connect(2)` to a pathname socket, so the
//! socket itself must tell the hangar's own processes from everyone else.
//!
//! A `sandbox: strict` upstream (`tests/fixtures/socket_intruder.py`) of a root hangar and of a
//! non-root one, with the socket in a 0700 directory outside `/tmp`, connects to the socket by
//! its path, says a hello of every protocol version (1 to one past the current) without a key,
//! with a guessed one, and as `api` and `prober`, claims to be the hangar itself, and asks for
//! the API keys, another server's logs, the audit trail and a call on an unsandboxed upstream
//! whose environment holds a secret; it also tries to read the control key. An unsandboxed
//! upstream, which can read the key (it is not in a box), tries the same with the real key, and
//! so does an orphan it detaches (setsid, double fork). None gets a session, the other upstream
//! is never started or called, and the box reads no key.
//!
//! A peer with the key that says it is the prober may send what probing needs and nothing else;
//! the hangar's own API and prober, and an API started apart with the key file, work as before.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hangar_core::access::Caller;
use hangar_core::ipc::{
    CallSpec, ClientFrame, ErrorKind, Logs, Outcome, PROTOCOL_VERSION, Reply, Request, ServerFrame, Start, Target,
};
use hangar_core::journal::AuditQuery;
use hangar_tests::serde_json::{self, Value, json};
use hangar_tests::{Hangar, poll, skip};

/// The intruder in a strict box, the same intruder unboxed (its process tree is still an
/// upstream's), and the victim: an unsandboxed upstream with a secret in its environment.
const CONFIG: &str = r#"
mcp_servers:
  boxed:
    command: ["/usr/bin/python3", "{fixtures}/socket_intruder.py"]
    sandbox: strict
  loose:
    command: ["/usr/bin/python3", "{fixtures}/socket_intruder.py"]
  victim:
    command: ["{fake}", "--tools", "add"]
    env: {VICTIM_SECRET: "victim-secret-0xBEEF"}
    health_check_interval_s: 0.2
"#;

/// A 0700 directory outside `/tmp` (under `/run`, where systemd and Kubernetes put the socket,
/// else `/var/tmp`), owned by `owner` when given; removed with the test.
fn socket_dir(owner: Option<(u32, u32)>) -> tempfile::TempDir {
    let made = |base: &str| tempfile::Builder::new().prefix("hangar-socket-").tempdir_in(base);
    let dir = made("/run").or_else(|_| made("/var/tmp")).expect("a directory outside /tmp");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
    }
    dir
}

/// The key file beside `socket`, as the supervisor writes it and its clients look for it.
fn key_file(socket: &Path) -> PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(".key");
    PathBuf::from(name)
}

/// What the intruder sends after each hello: as the hangar itself, the API keys, the victim's
/// logs, the audit trail, a call on the victim, and the list of servers.
fn attack_frames() -> Vec<Value> {
    let call = CallSpec::one(Target::tool("victim", "add"), json!({"a": 1, "b": 2}), Some(10_000));
    let call = Request::Call(Box::new(call));
    let ops = [
        Request::Auth,
        Request::Logs(Logs { mcp_server: "victim".into(), lines: 100 }),
        Request::Audit(AuditQuery::default()),
        call,
        Request::List,
    ];
    ops.into_iter()
        .zip(1u64..)
        .map(|(op, id)| serde_json::to_value(ClientFrame::Request { id, op, caller: Caller::hangar() }).unwrap())
        .collect()
}

/// Every hello the intruder tries: each protocol version from 1 to one past the current, as `api`
/// and as `prober`, without a key, with a guessed one, and with the real one ("$KEY", used only
/// if the intruder could read it).
fn hellos() -> Vec<Value> {
    let guessed = "5".repeat(64);
    let mut hellos = Vec::new();
    for protocol in 1..=PROTOCOL_VERSION + 1 {
        for role in ["api", "prober"] {
            hellos.push(json!({"hello": {"protocol": protocol, "role": role, "version": "0"}}));
            hellos.push(json!({"hello": {"protocol": protocol, "role": role, "version": "0", "key": guessed}}));
            hellos.push(json!({"hello": {"protocol": protocol, "role": role, "version": "0", "key": "$KEY"}}));
        }
    }
    hellos
}

/// Runs the intruder `server` against `socket` (from an orphan it detaches with setsid and a
/// double fork when `detached`): its report.
fn intrude(hangar: &Hangar, server: &str, socket: &Path, detached: bool) -> Value {
    let arguments = json!({
        "socket": socket.display().to_string(),
        "key_file": key_file(socket).display().to_string(),
        "hellos": hellos(),
        "frames": attack_frames(),
        "wait_ms": 1500,
        "detached": detached,
    });
    let call = json!({"calls": [{"mcp_server": server, "tool": "intrude", "arguments": arguments}], "timeout": 600});
    let batch = hangar.tool_ok("hangar_call", call);
    let result = &batch["results"][0];
    assert_eq!(result["success"], true, "{server}'s intrusion failed as a call: {batch}");
    result["result"]["structuredContent"].clone()
}

/// Asserts that no attempt in `report` got a session: no request was answered, not even with an
/// error, and nothing else came back but, at most, a refusal of the hello itself (id 0).
fn assert_no_session(report: &Value, who: &str) {
    let attempts = report["attempts"].as_array().unwrap_or_else(|| panic!("{who}: no attempts in {report}"));
    assert!(!attempts.is_empty(), "{who}: {report}");
    let lines = |attempt: &Value| -> Vec<String> {
        let lines = attempt["lines"].as_array().into_iter().flatten();
        lines.map(|line| line.as_str().unwrap_or_default().to_owned()).collect()
    };
    for attempt in attempts {
        let answered: Vec<String> = lines(attempt)
            .into_iter()
            .filter(|line| matches!(serde_json::from_str(line), Ok(ServerFrame::Reply { id, .. }) if id != 0))
            .map(|line| line.chars().take(300).collect())
            .collect();
        assert!(
            answered.is_empty(),
            "{who} got a session on the control socket with {}: {} request(s) answered: {answered:#?}",
            attempt["hello"],
            answered.len()
        );
    }
    for attempt in attempts {
        for line in lines(attempt) {
            let refusal =
                matches!(serde_json::from_str(&line), Ok(ServerFrame::Reply { id: 0, outcome: Outcome::Err(_) }));
            assert!(refusal, "{who} was served with {}: it was sent {line}", attempt["hello"]);
        }
    }
}

/// The victim was never started, called or audited.
fn assert_victim_untouched(hangar: &Hangar) {
    let victim = hangar.details("victim");
    assert_eq!(victim["state"], "cold", "the victim was started by someone: {victim}");
    assert_eq!(victim["health"]["total_invocations"], 0, "{victim}");
    let audit = hangar.get("/api/audit?mcp_server=victim");
    assert_eq!(audit.status, 200, "{}", audit.text);
    assert_eq!(audit.body["entries"], json!([]), "{}", audit.text);
    hangar.assert_no_body_contains("victim-secret-0xBEEF");
}

/// The whole attack, from a box and from an unboxed upstream, against a hangar whose socket is
/// `socket`; then the hangar still serves.
fn the_attack_gets_nowhere(hangar: &Hangar, socket: &Path) {
    let boxed = intrude(hangar, "boxed", socket, false);
    assert_eq!(boxed["key_read"], false, "the box read the control key: {boxed}");
    assert_no_session(&boxed, "a strict box");

    let loose = intrude(hangar, "loose", socket, false);
    assert_eq!(loose["key_read"], true, "an unboxed upstream can read the key (only a box cannot): {loose}");
    assert_no_session(&loose, "an unboxed upstream with the real key");
    // Its orphan, out of its session and process group and reparented to the supervisor, too.
    let orphan = intrude(hangar, "loose", socket, true);
    assert_eq!((&orphan["orphaned"], &orphan["key_read"]), (&json!(true), &json!(true)), "{orphan}");
    assert_no_session(&orphan, "an unboxed upstream's orphan with the real key");
    assert_victim_untouched(hangar);
    let log = hangar.log();
    assert!(log.contains("control connection refused"), "the refusals are logged:\n{log}");
    // The unboxed upstream had the key: what turned it away is its place in an upstream's tree.
    assert!(log.contains("a process in an upstream's tree"), "{log}");
    let key = std::fs::read_to_string(key_file(socket)).unwrap();
    assert!(!log.contains(key.trim()), "the key reached the log");

    // The hangar's own API and prober still work.
    assert!(hangar.call("victim", "add", json!({"a": 2, "b": 3})).is_some(), "a call through the API failed");
    assert_eq!(hangar.get("/health/ready").status, 200);
    poll("a health check by the hangar's own prober", Duration::from_secs(10), || {
        hangar.metric(r#"hangar_health_checks_total{mcp_server="victim",result="ok"}"#).filter(|n| *n > 0.0)
    });
}

#[test]
fn a_strict_box_of_a_root_hangar_gets_no_session_and_no_key() {
    let dir = socket_dir(None);
    let socket = dir.path().join("supervisor.sock");
    let hangar = Hangar::start_with(CONFIG, &["--socket", socket.to_str().unwrap()]);
    the_attack_gets_nowhere(&hangar, &socket);
}

#[test]
fn a_strict_box_of_a_non_root_hangar_gets_no_session_and_no_key() {
    if !nix::unistd::Uid::effective().is_root() && skip("starting a hangar as another user needs root") {
        return;
    }
    let dir = socket_dir(Some((4242, 4242)));
    let socket = dir.path().join("supervisor.sock");
    let hangar = Hangar::start_as_user_with_args(CONFIG, 4242, 4242, &["--socket", socket.to_str().unwrap()]);
    the_attack_gets_nowhere(&hangar, &socket);
}

/// From this test's own process (the hangar's user, outside every upstream's tree, so only the
/// key stands in the way): every hello the intruder tries, without the real key, gets no session.
#[test]
fn a_peer_outside_every_upstream_still_needs_the_key() {
    let hangar = Hangar::start(CONFIG);
    let mut attempts = Vec::new();
    for hello in hellos().into_iter().filter(|hello| hello["hello"]["key"] != "$KEY") {
        let mut stream = UnixStream::connect(&hangar.socket).unwrap();
        stream.set_read_timeout(Some(Duration::from_millis(1500))).unwrap();
        let mut out = format!("{hello}\n");
        for frame in attack_frames() {
            out.push_str(&format!("{frame}\n"));
        }
        // The supervisor may close before reading it all: a failed write is a refusal too.
        let _ = stream.write_all(out.as_bytes());
        let lines: Vec<String> = BufReader::new(stream).lines().map_while(Result::ok).collect();
        attempts.push(json!({"hello": hello, "lines": lines}));
    }
    assert_no_session(&json!({"attempts": attempts}), "a peer without the key");
    assert_victim_untouched(&hangar);
    let log = hangar.log();
    assert!(
        log.contains("the hello carries no control key") && log.contains("the hello's control key is wrong"),
        "{log}"
    );
}

/// A raw control connection from this test (a process of the hangar's user outside every
/// upstream's tree), after a hello as `role` with `key`.
struct Peer {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next: u64,
}

impl Peer {
    fn connect(socket: &Path, role: &str, key: &str) -> Peer {
        let writer = UnixStream::connect(socket).unwrap();
        writer.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut peer = Peer { reader: BufReader::new(writer.try_clone().unwrap()), writer, next: 1 };
        let hello = json!({"hello": {"protocol": PROTOCOL_VERSION, "role": role, "version": "0", "key": key}});
        peer.send(&hello);
        match peer.frame() {
            Some(ServerFrame::Hello(hello)) => assert_eq!(hello.role, "supervisor"),
            other => panic!("expected the supervisor's hello, got {other:?}"),
        }
        peer
    }

    fn send(&mut self, frame: &Value) {
        let mut line = serde_json::to_vec(frame).unwrap();
        line.push(b'\n');
        self.writer.write_all(&line).unwrap();
    }

    fn frame(&mut self) -> Option<ServerFrame> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(serde_json::from_str(&line).unwrap_or_else(|err| panic!("{err}: {line}"))),
        }
    }

    /// `op` as `caller`: the outcome of its reply (events and notices in between are skipped).
    fn ask(&mut self, caller: &Caller, op: Request) -> Outcome {
        let id = self.next;
        self.next += 1;
        self.send(&serde_json::to_value(ClientFrame::Request { id, op, caller: caller.clone() }).unwrap());
        loop {
            match self.frame() {
                Some(ServerFrame::Reply { id: got, outcome }) if got == id => return outcome,
                Some(_) => {}
                None => panic!("the connection ended before the reply to request {id}"),
            }
        }
    }
}

fn forbidden(outcome: &Outcome, what: &str) {
    match outcome {
        Outcome::Err(err) if err.kind == ErrorKind::Forbidden => {}
        other => panic!("{what}: expected forbidden, got {other:?}"),
    }
}

#[test]
fn a_prober_with_the_key_may_send_only_what_probing_needs() {
    let hangar = Hangar::start(CONFIG);
    let key = std::fs::read_to_string(key_file(&hangar.socket)).expect("the key beside the socket");
    let mode = std::fs::metadata(key_file(&hangar.socket)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the key is the supervisor's user's alone");
    let key = key.trim();
    let alice = Caller { identity: "alice".into(), profile: None };

    let mut prober = Peer::connect(&hangar.socket, "prober", key);
    assert!(matches!(prober.ask(&Caller::hangar(), Request::Ping), Outcome::Ok(Reply::Pong)));
    assert!(matches!(prober.ask(&Caller::hangar(), Request::Targets), Outcome::Ok(Reply::Targets(_))));
    forbidden(&prober.ask(&alice, Request::Ping), "a prober sending another caller");
    forbidden(&prober.ask(&alice, Request::List), "a prober listing as alice");
    forbidden(&prober.ask(&Caller::hangar(), Request::Auth), "a prober asking for the API keys");
    forbidden(&prober.ask(&Caller::hangar(), Request::Audit(AuditQuery::default())), "a prober reading the audit");
    forbidden(
        &prober.ask(&Caller::hangar(), Request::Logs(Logs { mcp_server: "victim".into(), lines: 10 })),
        "a prober reading logs",
    );
    forbidden(
        &prober.ask(&Caller::hangar(), Request::Start(Start { mcp_server: "victim".into() })),
        "a prober starting",
    );
    assert_victim_untouched(&hangar);

    // The same key as `api` may speak for a caller.
    let mut api = Peer::connect(&hangar.socket, "api", key);
    assert!(matches!(api.ask(&alice, Request::List), Outcome::Ok(Reply::Servers(_))));
    // A hello naming no role the hangar has is refused like a wrong key.
    let mut stranger = UnixStream::connect(&hangar.socket).unwrap();
    stranger.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let hello = json!({"hello": {"protocol": PROTOCOL_VERSION, "role": "operator", "version": "0", "key": key}});
    stranger.write_all(format!("{hello}\n").as_bytes()).unwrap();
    let mut said = String::new();
    let _ = BufReader::new(stranger).read_line(&mut said);
    assert!(!said.contains("\"hello\""), "an unknown role was greeted: {said}");
}

#[test]
fn an_api_started_apart_proves_the_key_from_its_file() {
    let hangar = Hangar::start(CONFIG);
    // Beside the socket, as the systemd units run it.
    let beside = hangar.extra_api(&[]);
    let (status, body) = hangar_tests::raw_http(
        &beside.addr,
        &format!("GET /api/mcp_servers HTTP/1.1\r\nHost: {}\r\n", beside.addr),
        b"",
    )
    .unwrap();
    assert_eq!(status, 200, "{body}");
    // A copy elsewhere, named with --control-key.
    let copy = hangar.path("copied.key");
    std::fs::copy(key_file(&hangar.socket), &copy).unwrap();
    let named = hangar.extra_api(&["--control-key".as_ref(), copy.as_os_str()]);
    let (status, _) =
        hangar_tests::raw_http(&named.addr, &format!("GET /health/ready HTTP/1.1\r\nHost: {}\r\n", named.addr), b"")
            .unwrap();
    assert_eq!(status, 200);

    // A wrong key: the API never gets a session, says why, and the supervisor logs the refusal.
    let wrong = hangar.path("wrong.key");
    std::fs::write(&wrong, format!("{}\n", "7".repeat(64))).unwrap();
    let mut child = std::process::Command::new(hangar_tests::bin("hangar-api"))
        .arg("--socket")
        .arg(&hangar.socket)
        .args(["--listen", "127.0.0.1:0", "--control-key"])
        .arg(&wrong)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let addr = hangar_tests::api_listening_address(&mut child);
    let refused = poll("the wrong key's refusal in the log", Duration::from_secs(10), || {
        hangar.log().lines().find(|l| l.contains("control connection refused") && l.contains("key")).map(str::to_owned)
    });
    assert!(!refused.contains(&"7".repeat(64)), "{refused}");
    let (status, body) =
        hangar_tests::raw_http(&addr, &format!("GET /api/mcp_servers HTTP/1.1\r\nHost: {addr}\r\n"), b"").unwrap();
    assert_eq!(status, 503, "{body}");
    let _ = child.kill();
    let _ = child.wait();

    // A new supervisor writes a new key; the API started apart reads it when it reconnects.
    let old = std::fs::read_to_string(key_file(&hangar.socket)).unwrap();
    let hangar = hangar.restart(nix::sys::signal::Signal::SIGTERM, &[]);
    assert_ne!(std::fs::read_to_string(key_file(&hangar.socket)).unwrap(), old, "a fresh key at each start");
    poll("the API started apart to be ready again", Duration::from_secs(20), || {
        let head = format!("GET /api/mcp_servers HTTP/1.1\r\nHost: {}\r\n", beside.addr);
        hangar_tests::raw_http(&beside.addr, &head, b"").ok().filter(|(status, _)| *status == 200)
    });
}
