//! Running under systemd (`deploy/systemd/`): the supervisor speaks the notify protocol
//! (`READY=1` once its socket is up, `WATCHDOG=1` while asked, `STOPPING=1` on SIGTERM) to a
//! socket the test owns as `NOTIFY_SOCKET`; the API takes its listener from `LISTEN_FDS`, and
//! two instances accept on one inherited socket; the unit files pass `systemd-analyze verify`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use hangar_tests::{Background, api_listening_address, bin, free_port, poll, repo_root, skip};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const UNITS: [&str; 4] =
    ["hangar-supervisor.service", "hangar-prober.service", "hangar-api.socket", "hangar-api@.service"];

/// A supervisor with nothing to run and no helpers, notifying the test's datagram socket.
struct Notified {
    dir: tempfile::TempDir,
    notify: UnixDatagram,
    supervisor: Child,
}

impl Notified {
    fn start(env: &[(&str, &str)]) -> Notified {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("hangar.yaml");
        std::fs::write(&config, "mcp_servers: {}\n").unwrap();
        let notify_path = dir.path().join("notify.sock");
        let notify = UnixDatagram::bind(&notify_path).unwrap();
        notify.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let log = std::fs::File::create(dir.path().join("supervisor.log")).unwrap();
        let supervisor = Command::new(bin("hangar-supervisor"))
            .args(["--no-api", "--no-prober", "--config"])
            .arg(&config)
            .arg("--socket")
            .arg(dir.path().join("supervisor.sock"))
            .env("NOTIFY_SOCKET", &notify_path)
            .env("STATE_DIRECTORY", dir.path().join("state"))
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        Notified { dir, notify, supervisor }
    }

    /// The next datagram, waiting at most `limit`.
    fn next(&self, limit: Duration) -> Option<String> {
        let deadline = Instant::now() + limit;
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline {
            if let Ok(n) = self.notify.recv(&mut buf) {
                return Some(String::from_utf8_lossy(&buf[..n]).into_owned());
            }
        }
        None
    }

    /// Datagrams until one has the line `line` (returned last), failing after `limit`.
    fn until(&self, line: &str, limit: Duration) -> Vec<String> {
        let deadline = Instant::now() + limit;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(datagram) = self.next(left) else {
                panic!("no {line:?} within {limit:?}; got {seen:?}; log:\n{}", self.log());
            };
            let done = datagram.lines().any(|l| l == line);
            seen.push(datagram);
            if done {
                return seen;
            }
        }
    }

    fn terminate(&self) {
        kill(Pid::from_raw(self.supervisor.id() as i32), Signal::SIGTERM).unwrap();
    }

    fn wait(&mut self) -> ExitStatus {
        poll("the supervisor to exit", Duration::from_secs(20), || self.supervisor.try_wait().unwrap())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("supervisor.log")).unwrap_or_default()
    }
}

impl Drop for Notified {
    fn drop(&mut self) {
        let _ = self.supervisor.kill();
        let _ = self.supervisor.wait();
    }
}

fn watchdogs(datagrams: &[String]) -> usize {
    datagrams.iter().flat_map(|d| d.lines()).filter(|l| *l == "WATCHDOG=1").count()
}

#[test]
fn the_supervisor_says_ready_pings_the_watchdog_and_says_stopping() {
    let mut hangar = Notified::start(&[("WATCHDOG_USEC", "200000")]);
    let ready = hangar.until("READY=1", Duration::from_secs(20));
    let ready = ready.last().unwrap();
    assert!(ready.lines().any(|l| l.starts_with("STATUS=") && l.contains("supervisor.sock")), "{ready:?}");
    // READY=1 comes once the control socket takes connections.
    UnixStream::connect(hangar.dir.path().join("supervisor.sock")).unwrap();

    // Every 100 ms (half of WATCHDOG_USEC): two pings well within five seconds.
    let mut pings = Vec::new();
    let started = Instant::now();
    while watchdogs(&pings) < 2 {
        assert!(started.elapsed() < Duration::from_secs(5), "fewer than two WATCHDOG=1: {pings:?}");
        pings.extend(hangar.until("WATCHDOG=1", Duration::from_secs(5)));
    }

    // SIGHUP: RELOADING=1 while the config is re-read, READY=1 when done.
    kill(Pid::from_raw(hangar.supervisor.id() as i32), Signal::SIGHUP).unwrap();
    let reloading = hangar.until("RELOADING=1", Duration::from_secs(10));
    assert!(reloading.last().is_some_and(|d| d.contains("RELOADING=1")), "{reloading:?}");
    let ready_again = hangar.until("READY=1", Duration::from_secs(10));
    assert!(ready_again.last().is_some_and(|d| d.contains("READY=1")), "{ready_again:?}");

    hangar.terminate();
    hangar.until("STOPPING=1", Duration::from_secs(10));
    let status = hangar.wait();
    assert_eq!(status.code(), Some(0), "log:\n{}", hangar.log());
}

#[test]
fn no_watchdog_pings_unless_the_watchdog_is_for_this_process() {
    // WATCHDOG_PID names another process: the pings are not ours to send.
    let mut hangar = Notified::start(&[("WATCHDOG_USEC", "100000"), ("WATCHDOG_PID", "1")]);
    let mut seen = hangar.until("READY=1", Duration::from_secs(20));
    // A pinger would have sent five by now (every 50 ms, the first at once).
    let window = Instant::now() + Duration::from_millis(250);
    while let Some(datagram) = hangar.next(window.saturating_duration_since(Instant::now())) {
        seen.push(datagram);
    }
    hangar.terminate();
    seen.extend(hangar.until("STOPPING=1", Duration::from_secs(10)));
    assert_eq!(watchdogs(&seen), 0, "{seen:?}");
    assert_eq!(hangar.wait().code(), Some(0), "log:\n{}", hangar.log());
}

/// One `GET` over a fresh connection: the status and body, or `None` if the port does not answer.
fn get(address: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(5)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    Some((status, body))
}

fn assert_live(address: SocketAddr) {
    let (status, body) = get(address, "/health/live").expect("no answer on the shared port");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""status":"alive""#), "{body}");
}

/// An API started the way systemd starts one: the listening socket as fd 3, `LISTEN_FDS=1` and
/// `LISTEN_PID` its own pid. The socket comes in as stdin; the shell moves it to fd 3 and execs
/// the API in its own process, so `$$` is the API's pid. `--listen` names the very port, which
/// the preflight would refuse once another instance answers there: it must not be consulted.
fn activated_api(listener: &TcpListener, dir: &Path) -> Child {
    let fd = OwnedFd::from(listener.try_clone().unwrap());
    let address = listener.local_addr().unwrap().to_string();
    let script = r#"exec 3<&0 0</dev/null; export LISTEN_FDS=1 LISTEN_PID=$$; exec "$@""#;
    Command::new("sh")
        .args(["-c", script, "sh"])
        .arg(bin("hangar-api"))
        .arg("--socket")
        .arg(dir.join("no-supervisor.sock"))
        .args(["--listen", &address])
        .env_remove("LISTEN_FDS")
        .env_remove("LISTEN_PID")
        .stdin(Stdio::from(fd))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn two_api_instances_accept_on_one_inherited_socket() {
    let dir = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let mut first = activated_api(&listener, dir.path());
    assert_eq!(api_listening_address(&mut first), address.to_string());
    let mut second = activated_api(&listener, dir.path());
    assert_eq!(api_listening_address(&mut second), address.to_string());
    // From here only the two APIs hold the socket.
    drop(listener);

    for _ in 0..5 {
        assert_live(address);
    }
    first.kill().unwrap();
    first.wait().unwrap();
    // The other instance serves the same port.
    for _ in 0..5 {
        assert_live(address);
    }
    assert!(second.try_wait().unwrap().is_none(), "the second instance died");
    second.kill().unwrap();
    second.wait().unwrap();
    // The socket was theirs alone: with both gone, nothing listens.
    poll("the shared port to close", Duration::from_secs(10), || get(address, "/health/live").is_none().then_some(()));
}

/// Whether `program` runs here (`--version` answers).
fn installed(program: &str) -> bool {
    Command::new(program).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

#[test]
fn the_api_serves_under_systemd_socket_activate() {
    if !installed("systemd-socket-activate")
        && skip("systemd-socket-activate is not installed (Debian: apt-get install systemd)")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let address: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // It binds the port, waits for the first connection, then execs the API with fd 3.
    let mut activate = Command::new("systemd-socket-activate")
        .args(["--listen", &address.to_string(), "--setenv=HANGAR_LOG=info"])
        .arg(bin("hangar-api"))
        .arg("--socket")
        .arg(dir.path().join("no-supervisor.sock"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = activate.stdout.take().unwrap();
    let api = Background { child: activate };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // The first GET both starts the API and is answered by it (it waits in the backlog).
    let (status, body) =
        poll("an answer through systemd-socket-activate", Duration::from_secs(20), || get(address, "/health/live"));
    assert_eq!(status, 200, "{body}");
    let line = rx.recv_timeout(Duration::from_secs(10)).expect("no listening line");
    assert_eq!(line, format!("hangar-api listening on http://{address}"));
    assert!(hangar_tests::alive(api.child.id()), "the API runs as the activator's own process");
}

#[test]
fn the_units_say_what_the_deployment_needs() {
    let read = |unit: &str| std::fs::read_to_string(repo_root().join("deploy/systemd").join(unit)).unwrap();
    let supervisor = read("hangar-supervisor.service");
    for line in [
        "Type=notify",
        "NotifyAccess=main",
        "KillMode=mixed",
        "Delegate=yes",
        "Restart=on-failure",
        "WatchdogSec=30s",
        "RuntimeDirectory=hangar",
        "ExecStart=/usr/local/bin/hangar-supervisor --no-api --no-prober --config /etc/hangar/hangar.yaml --socket %t/hangar/supervisor.sock",
    ] {
        assert!(supervisor.lines().any(|l| l == line), "hangar-supervisor.service lacks {line}");
    }
    // systemd SIGKILLs what is left at TimeoutStopSec: it must outlast the default drain plus
    // the supervisor's stop of its upstreams (up to 10 s), or the drain is cut short.
    let timeout_stop = supervisor
        .lines()
        .find_map(|l| l.strip_prefix("TimeoutStopSec=")?.strip_suffix('s')?.parse::<u64>().ok())
        .expect("hangar-supervisor.service sets TimeoutStopSec= in seconds");
    let needed = hangar_core::shutdown::ShutdownConfig::default().grace() + Duration::from_secs(10);
    assert!(
        Duration::from_secs(timeout_stop) > needed,
        "TimeoutStopSec={timeout_stop}s does not exceed the default grace plus the upstreams' stop ({needed:?})"
    );
    let prober = read("hangar-prober.service");
    for line in ["BindsTo=hangar-supervisor.service", "After=hangar-supervisor.service"] {
        assert!(prober.lines().any(|l| l == line), "hangar-prober.service lacks {line}");
    }
    assert!(read("hangar-api.socket").lines().any(|l| l == "ListenStream=127.0.0.1:8000"));
    assert!(read("hangar-api@.service").lines().any(|l| l == "Sockets=hangar-api.socket"));
}

#[test]
fn the_units_pass_systemd_analyze_verify() {
    if !installed("systemd-analyze") && skip("systemd-analyze is not installed (Debian: apt-get install systemd)") {
        return;
    }
    // verify insists that ExecStart= exists: point the units at the binaries just built.
    let dir = tempfile::tempdir().unwrap();
    let built = bin("hangar-supervisor").parent().unwrap().display().to_string();
    for unit in UNITS {
        let text = std::fs::read_to_string(repo_root().join("deploy/systemd").join(unit)).unwrap();
        let service = unit.ends_with(".service");
        assert!(!service || text.contains("ExecStart=/usr/local/bin/"), "{unit} runs its binary from /usr/local/bin");
        std::fs::write(dir.path().join(unit), text.replace("/usr/local/bin/", &format!("{built}/"))).unwrap();
    }
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .args(UNITS.iter().map(|unit| dir.path().join(unit)))
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Warnings (unknown keys, bad values) do not change the exit code: none may name our units.
    let ours: Vec<&str> = stderr.lines().filter(|l| l.contains("hangar")).collect();
    assert!(out.status.success() && ours.is_empty(), "systemd-analyze verify: {:?}\n{stderr}", out.status);
}
