//! Runs the built fake with --http on a loopback port and talks to it over
//! plain TcpStreams.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{Res, WAIT, lines_of, wait_bounded};

mod support;

const LISTENING: &str = "hangar-upstream-fake listening on http://";

fn spawn(args: &[&str]) -> Res<(Child, Receiver<String>, Receiver<String>)> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hangar-upstream-fake"))
        .args(["--http", "127.0.0.1:0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let stdout = lines_of(child.stdout.take().ok_or("no stdout")?);
    let stderr = lines_of(child.stderr.take().ok_or("no stderr")?);
    Ok((child, stdout, stderr))
}

struct Fake {
    child: Child,
    addr: SocketAddr,
    /// Held so stderr stays drained while the fake runs.
    _stderr: Receiver<String>,
}

impl Fake {
    fn start(args: &[&str]) -> Res<Self> {
        let (child, stdout, stderr) = spawn(args)?;
        let mut fake = Self { child, addr: SocketAddr::from(([127, 0, 0, 1], 0)), _stderr: stderr };
        let line = stdout.recv_timeout(WAIT)?;
        let addr = line.strip_prefix(LISTENING).and_then(|rest| rest.strip_suffix("/mcp"));
        fake.addr = addr.ok_or_else(|| format!("unexpected first line: {line}"))?.parse()?;
        Ok(fake)
    }

    fn connect(&self) -> Res<Conn> {
        let stream = TcpStream::connect_timeout(&self.addr, WAIT)?;
        stream.set_read_timeout(Some(WAIT))?;
        Ok(Conn { reader: BufReader::new(stream.try_clone()?), writer: stream })
    }

    /// Kills the fake and waits (bounded) for it to go.
    fn stop(mut self) -> Res<()> {
        self.child.kill()?;
        wait_bounded(&mut self.child)?;
        Ok(())
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = wait_bounded(&mut self.child);
    }
}

struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Res<Value> {
        Ok(serde_json::from_slice(&self.body)?)
    }
}

impl Conn {
    fn send(&mut self, method: &str, path: &str, extra: &str, body: &[u8]) -> Res<Resp> {
        let head =
            format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}Content-Length: {}\r\n\r\n", body.len());
        self.writer.write_all(head.as_bytes())?;
        self.writer.write_all(body)?;
        self.read_response()
    }

    fn post(&mut self, msg: &Value) -> Res<Resp> {
        let extra = "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
                     MCP-Protocol-Version: 2026-07-28\r\n";
        self.send("POST", "/mcp", extra, msg.to_string().as_bytes())
    }

    fn call(&mut self, id: i64, method: &str, params: Value) -> Res<Value> {
        let resp = self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        assert_eq!(resp.status, 200, "{resp:?}");
        assert_eq!(resp.header("content-type"), Some("application/json"));
        resp.json()
    }

    fn read_response(&mut self) -> Res<Resp> {
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        let status = line.split(' ').nth(1).ok_or_else(|| format!("bad status line: {line:?}"))?.parse()?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            let Some((name, value)) = line.trim_end().split_once(':') else { break };
            headers.push((name.to_owned(), value.trim().to_owned()));
        }
        let mut resp = Resp { status, headers, body: Vec::new() };
        match resp.header("content-length") {
            Some(len) => {
                resp.body = vec![0; len.parse()?];
                self.reader.read_exact(&mut resp.body)?;
            }
            None => {
                self.reader.read_to_end(&mut resp.body)?;
            }
        }
        Ok(resp)
    }

    /// True once the server has closed its side (bounded by the read timeout).
    fn closed_by_server(&mut self) -> Res<bool> {
        let mut byte = [0u8; 1];
        Ok(self.reader.read(&mut byte)? == 0)
    }
}

#[test]
fn serves_discover_calls_and_notifications_on_one_connection() -> Res<()> {
    let fake = Fake::start(&[])?;
    let mut conn = fake.connect()?;

    let r = conn.call(1, "server/discover", json!({}))?;
    assert_eq!(r["id"], 1);
    assert_eq!(r["result"]["supportedVersions"][0], "2026-07-28");

    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}});
    let r = conn.call(2, "tools/call", json!({"name": "add", "arguments": {"a": 2, "b": 3}, "_meta": meta}))?;
    assert_eq!(r["id"], 2);
    assert_eq!(r["result"]["structuredContent"]["result"], 5);
    assert_eq!(r["result"]["content"][0]["text"], "5");

    let resp = conn.post(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}))?;
    assert_eq!(resp.status, 202);
    assert!(resp.body.is_empty());

    let r = conn.call(3, "tools/list", json!({}))?;
    assert_eq!(r["result"]["tools"][0]["name"], "add");
    fake.stop()
}

#[test]
fn http_level_errors() -> Res<()> {
    let fake = Fake::start(&[])?;
    let mut conn = fake.connect()?;

    let resp = conn.send("POST", "/mcp", "", b"{not json")?;
    assert_eq!(resp.status, 400);
    let v = resp.json()?;
    assert_eq!((v["error"]["code"].as_i64(), &v["id"]), (Some(-32700), &Value::Null));

    let resp = conn.send("GET", "/mcp", "", b"")?;
    assert_eq!((resp.status, resp.header("allow")), (405, Some("POST")));
    assert_eq!(conn.send("POST", "/other", "", b"{}")?.status, 404);
    assert_eq!(conn.send("DELETE", "/mcp", "Mcp-Session-Id: fake-1\r\n", b"")?.status, 200);

    let resp = conn.send("DELETE", "/mcp", "Connection: close\r\n", b"")?;
    assert_eq!((resp.status, resp.header("connection")), (200, Some("close")));
    assert!(conn.closed_by_server()?);

    // Refused from the head alone; the body is never sent.
    let mut conn = fake.connect()?;
    conn.writer.write_all(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 4194305\r\n\r\n")?;
    assert_eq!(conn.read_response()?.status, 413);
    fake.stop()
}

#[test]
fn a_sleeping_call_does_not_block_other_connections() -> Res<()> {
    let fake = Fake::start(&["--tools", "sleep,add"])?;
    let mut slow = fake.connect()?;
    let call = json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"ms": 1500}}});
    slow.writer.write_all(
        format!("POST /mcp HTTP/1.1\r\nContent-Length: {}\r\n\r\n{call}", call.to_string().len()).as_bytes(),
    )?;
    let r = fake.connect()?.call(2, "tools/call", json!({"name": "add", "arguments": {"a": 1, "b": 1}}))?;
    assert_eq!(r["result"]["structuredContent"]["result"], 2);
    let r = slow.read_response()?.json()?;
    assert_eq!(r["result"]["content"][0]["text"], "slept 1500 ms");
    fake.stop()
}

#[test]
fn sse_mode_answers_with_one_event_then_closes() -> Res<()> {
    let fake = Fake::start(&["--sse"])?;
    let mut conn = fake.connect()?;
    let resp = conn.post(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "add", "arguments": {"a": 2, "b": 3}}}))?;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("content-type"), Some("text/event-stream"));
    let body = String::from_utf8(resp.body)?;
    let data: Vec<&str> = body.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    assert_eq!(data.len(), 1, "{body}");
    assert!(body.starts_with("event: message\n"));
    let v: Value = serde_json::from_str(data[0])?;
    assert_eq!((v["id"].as_i64(), v["result"]["structuredContent"]["result"].as_i64()), (Some(9), Some(5)));

    let resp = fake.connect()?.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
    assert_eq!(resp.status, 202);
    fake.stop()
}

#[test]
fn leftover_answers_everything_with_the_sentinel() -> Res<()> {
    let fake = Fake::start(&["--leftover", "--sentinel", "LEFTOVER-77"])?;
    let mut conn = fake.connect()?;
    let v = conn.call(7, "tools/list", json!({}))?;
    assert_eq!(v["id"], 7);
    assert_eq!(v["result"]["leftover"], "LEFTOVER-77");
    assert_eq!(v["result"]["tools"][0]["description"], "LEFTOVER-77");
    assert_eq!(v["result"]["content"][0]["text"], "LEFTOVER-77");

    for (method, path) in [("GET", "/"), ("DELETE", "/mcp"), ("PUT", "/anything?x=1")] {
        let resp = conn.send(method, path, "", b"")?;
        assert_eq!(resp.status, 200, "{method} {path}");
        let v = resp.json()?;
        assert_eq!((&v["id"], &v["result"]["leftover"]), (&Value::Null, &json!("LEFTOVER-77")));
    }
    fake.stop()
}

#[test]
fn legacy_initialize_mints_session_ids() -> Res<()> {
    let fake = Fake::start(&["--legacy"])?;
    let mut conn = fake.connect()?;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let resp = conn.post(&init)?;
    assert_eq!(resp.status, 200);
    assert_eq!(resp.header("mcp-session-id"), Some("fake-1"));
    assert_eq!(resp.json()?["result"]["protocolVersion"], "2024-11-05");

    let note = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(conn.send("POST", "/mcp", "Mcp-Session-Id: fake-1\r\n", note)?.status, 202);
    assert_eq!(conn.call(2, "server/discover", json!({}))?["error"]["code"], -32601);
    assert_eq!(conn.post(&init)?.header("mcp-session-id"), Some("fake-2"));
    fake.stop()
}

#[test]
fn crash_after_exits_101_once_the_answer_is_written() -> Res<()> {
    let mut fake = Fake::start(&["--crash-after", "1"])?;
    let r = fake.connect()?.call(1, "tools/call", json!({"name": "echo", "arguments": {"k": "v"}}))?;
    assert_eq!(r["result"]["structuredContent"], json!({"k": "v"}));
    assert_eq!(wait_bounded(&mut fake.child)?.code(), Some(101));
    Ok(())
}

#[test]
fn hang_keeps_the_connection_open_without_answering() -> Res<()> {
    let fake = Fake::start(&["--hang"])?;
    let mut conn = fake.connect()?;
    conn.writer.set_read_timeout(Some(Duration::from_millis(300)))?;
    let err = conn.post(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).err().ok_or("got an answer")?;
    let kind = err.downcast_ref::<std::io::Error>().map(std::io::Error::kind);
    assert!(matches!(kind, Some(std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)), "{err}");
    fake.stop()
}

#[test]
fn no_bind_stays_alive_without_listening() -> Res<()> {
    let (mut child, stdout, stderr) = spawn(&["--no-bind"])?;
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if stderr.recv_timeout(left)?.contains("not binding, as asked") {
            break;
        }
    }
    assert!(child.try_wait()?.is_none(), "the fake exited");
    assert!(stdout.try_recv().is_err(), "the fake claims to listen");
    child.kill()?;
    wait_bounded(&mut child)?;
    Ok(())
}

#[test]
fn bind_delay_postpones_the_listening_line() -> Res<()> {
    let started = Instant::now();
    let fake = Fake::start(&["--bind-delay-ms", "300"])?;
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(fake.connect()?.call(1, "tools/list", json!({}))?["id"], 1);
    fake.stop()
}

#[test]
fn exit_flag_exits_before_binding() -> Res<()> {
    let flag = std::env::temp_dir().join(format!("hangar-fake-http-exit-{}", std::process::id()));
    std::fs::write(&flag, "")?;
    let (mut child, stdout, _stderr) = spawn(&["--exit-flag", flag.to_str().ok_or("path")?])?;
    let status = wait_bounded(&mut child);
    let _ = std::fs::remove_file(&flag);
    assert_eq!(status?.code(), Some(3));
    assert!(stdout.recv_timeout(WAIT).is_err(), "stdout should close without a listening line");
    Ok(())
}
