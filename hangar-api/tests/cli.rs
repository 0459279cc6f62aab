//! The real binary: flags, exit codes, the listening line, graceful stop on SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_hangar-api");
const NO_SOCKET: &str = "/nonexistent/hangar-api-cli-test/supervisor.sock";

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

/// A running API on a free port, stopped (SIGKILL) when dropped if still alive.
struct Api {
    child: Child,
    address: String,
}

impl Api {
    fn start(extra: &[&str]) -> Api {
        let mut child = Command::new(BIN)
            .args(["--listen", "127.0.0.1:0", "--socket", NO_SOCKET])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(20)).expect("no listening line");
        let address = line.trim().strip_prefix("hangar-api listening on http://").expect(&line).to_owned();
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

    // A second instance on the same port cannot bind: 69 and one line naming address and reason.
    let clash = run(&["--listen", &api.address, "--socket", NO_SOCKET]);
    assert_eq!(clash.status.code(), Some(69));
    let stderr = String::from_utf8(clash.stderr).unwrap();
    assert!(
        stderr.contains(&format!("hangar-api: cannot listen on http://{}: address already in use", api.address)),
        "{stderr}"
    );
    assert!(clash.stdout.is_empty());

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
