//! The real binary: flags, exit codes, the listening line, graceful stop on SIGTERM, and the
//! refusal to start on a port something already holds (rule 4).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use hangar_tests::api_listening_address;

const BIN: &str = env!("CARGO_BIN_EXE_hangar-api");
const NO_SOCKET: &str = "/nonexistent/hangar-api-cli-test/supervisor.sock";

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

/// `run` for a process that is expected to exit by itself, killed (and failed) if it does not.
fn run_expecting_exit(args: &[&str]) -> Output {
    let mut child = Command::new(BIN).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("hangar-api {args:?} did not exit: {:?}", child.wait_with_output().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// A leftover on a loopback port (`127.0.0.1:0`, port read back) that accepts every connection
/// and either answers HTTP 200 or keeps it open and says nothing. It lives as long as the
/// returned listener (its accept thread holds a clone, parked until the test process ends).
fn leftover(answers: bool) -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepting = listener.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut silent = Vec::new();
        for stream in accepting.incoming() {
            let Ok(mut stream) = stream else { continue };
            if answers {
                let _ = stream.read(&mut [0u8; 512]);
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
            } else {
                silent.push(stream);
            }
        }
    });
    (listener, port)
}

/// A port nobody holds: bound on `127.0.0.1:0`, read back, released.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Asserts the API refused to start: 69, one line naming `url` and saying `why`, nothing served.
fn assert_refused(out: Output, url: &str, why: &str) {
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(69), "{stderr}");
    let line = format!("hangar-api: refusing to start: {url} is already in use: ");
    assert!(stderr.starts_with(&line) && stderr.contains(why), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
}

/// A running API on a free port, stopped (SIGKILL) when dropped if still alive.
struct Api {
    child: Child,
    address: String,
}

impl Api {
    fn start(extra: &[&str]) -> Api {
        Api::start_on("127.0.0.1:0", extra)
    }

    fn start_on(listen: &str, extra: &[&str]) -> Api {
        let mut child = Command::new(BIN)
            .args(["--listen", listen, "--socket", NO_SOCKET])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let address = api_listening_address(&mut child);
        Api { child, address }
    }

    fn get(&self, path: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(&self.address).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(stream, "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", self.address).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let status = response.split(' ').nth(1).unwrap().parse().unwrap();
        let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
        (status, body)
    }

    fn terminate(&mut self) -> (Option<i32>, String) {
        let killed = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(killed.success());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut stderr = String::new();
                self.child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
                return (status.code(), stderr);
            }
            assert!(Instant::now() < deadline, "did not exit after SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Api {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn help_names_the_flags() {
    let out = run(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in ["--socket", "--listen", "--log-format"] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}

#[test]
fn bad_usage_exits_64() {
    assert_eq!(run(&["--bogus"]).status.code(), Some(64));
    assert_eq!(run(&["--listen", "8000"]).status.code(), Some(64));
    assert_eq!(run(&["--log-format", "xml"]).status.code(), Some(64));
}

#[test]
fn serves_reports_the_supervisor_missing_and_stops_cleanly_on_sigterm() {
    let mut api = Api::start(&[]);
    let json = |(status, body): (u16, String)| (status, serde_json::from_str::<serde_json::Value>(&body).unwrap());
    assert_eq!(json(api.get("/health/live")), (200, serde_json::json!({"status": "alive"})));
    assert_eq!(
        json(api.get("/health/ready")),
        (503, serde_json::json!({"status": "not_ready", "reason": "supervisor unreachable"}))
    );
    let (status, body) = api.get("/api/mcp_servers");
    assert_eq!(status, 503);
    assert!(body.contains(r#""code":"SupervisorUnavailable""#), "{body}");
    assert!(body.contains(NO_SOCKET), "{body}");

    // A second instance on the same port finds it answering (`/` is the status page) and refuses
    // to start.
    let clash = run_expecting_exit(&["--listen", &api.address, "--socket", NO_SOCKET]);
    assert_refused(clash, &format!("http://{}", api.address), "answered HTTP 200");

    let (code, _) = api.terminate();
    assert_eq!(code, Some(0));
}

#[test]
fn json_logs_are_json_lines_on_stderr() {
    let mut api = Api::start(&["--log-format", "json"]);
    let (code, stderr) = api.terminate();
    assert_eq!(code, Some(0));
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty());
    for line in lines {
        assert!(serde_json::from_str::<serde_json::Value>(line).is_ok(), "not JSON: {line}");
    }
}

#[test]
fn a_port_that_answers_http_is_refused() {
    let (_held, port) = leftover(true);
    let out = run_expecting_exit(&["--listen", &format!("127.0.0.1:{port}"), "--socket", NO_SOCKET]);
    assert_refused(out, &format!("http://127.0.0.1:{port}"), &format!("127.0.0.1:{port} answered HTTP 200"));
}

#[test]
fn a_stalled_leftover_is_refused() {
    let (_held, port) = leftover(false);
    let out = run_expecting_exit(&["--listen", &format!("127.0.0.1:{port}"), "--socket", NO_SOCKET]);
    assert_refused(out, &format!("http://127.0.0.1:{port}"), "accepted the connection and then stalled");
}

#[test]
fn localhost_is_refused_when_its_ipv4_loopback_is_held() {
    let (_held, port) = leftover(true);
    let out = run_expecting_exit(&["--listen", &format!("localhost:{port}"), "--socket", NO_SOCKET]);
    assert_refused(out, &format!("http://localhost:{port}"), &format!("127.0.0.1:{port} answered HTTP 200"));
}

#[test]
fn a_free_port_is_served() {
    let port = free_port();
    let api = Api::start_on(&format!("127.0.0.1:{port}"), &[]);
    assert_eq!(api.address, format!("127.0.0.1:{port}"));
    assert_eq!(api.get("/health/live").0, 200);
}

/// The race the preflight cannot see: the port is bound but not listening, so connects are
/// refused, and the bind itself fails. That stays one line naming the address and the reason.
#[test]
fn a_bind_that_fails_after_the_preflight_names_address_and_reason() {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let address = socket.local_addr().unwrap().to_string();
    let out = run_expecting_exit(&["--listen", &address, "--socket", NO_SOCKET]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(69), "{stderr}");
    assert_eq!(stderr.trim_end(), format!("hangar-api: cannot listen on http://{address}: address already in use"));
    assert!(out.stdout.is_empty());
}

/// Socket activation is for the process `LISTEN_PID` names: variables meant for another process
/// (here pid 1) are ignored, and `--listen` is bound and preflighted as usual.
#[test]
fn listen_fds_for_another_process_are_ignored() {
    let mut child = Command::new(BIN)
        .args(["--listen", "127.0.0.1:0", "--socket", NO_SOCKET])
        .env("LISTEN_FDS", "1")
        .env("LISTEN_PID", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let address = api_listening_address(&mut child);
    let mut api = Api { child, address };
    assert!(api.address.starts_with("127.0.0.1:") && !api.address.ends_with(":0"), "{}", api.address);
    assert_eq!(api.get("/health/live").0, 200);
    assert_eq!(api.terminate().0, Some(0));
}
