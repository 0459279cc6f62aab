//! Runs the built fake over real pipes.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const WAIT: Duration = Duration::from_secs(10);

struct Fake {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Fake {
    fn start(args: &[&str]) -> Res<Self> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hangar-upstream-fake"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("no stdout")?;
        // A reader thread turns blocking reads into bounded channel waits.
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Self { child, stdin, lines })
    }

    fn send(&mut self, msg: &Value) -> Res<()> {
        let stdin = self.stdin.as_mut().ok_or("stdin closed")?;
        writeln!(stdin, "{msg}")?;
        stdin.flush()?;
        Ok(())
    }

    fn recv(&self) -> Res<Value> {
        let line = self.lines.recv_timeout(WAIT)?;
        Ok(serde_json::from_str(&line)?)
    }

    fn call(&mut self, id: i64, method: &str, params: Value) -> Res<Value> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        self.recv()
    }

    /// Closes stdin and waits (bounded) for the exit status.
    fn finish(mut self) -> Res<ExitStatus> {
        drop(self.stdin.take());
        wait_bounded(&mut self.child)
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_bounded(child: &mut Child) -> Res<ExitStatus> {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if Instant::now() > deadline {
            return Err("the fake did not exit within 10 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn serves_discover_list_and_call_then_exits_on_eof() -> Res<()> {
    let mut fake = Fake::start(&[])?;

    let r = fake.call(1, "server/discover", json!({}))?;
    assert_eq!(r["id"], 1);
    assert_eq!(r["result"]["supportedVersions"][0], "2026-07-28");

    let r = fake.call(2, "tools/list", json!({}))?;
    assert_eq!(r["result"]["tools"][0]["name"], "add");
    assert_eq!(r["result"]["tools"][1]["name"], "echo");

    let r = fake.call(3, "tools/call", json!({"name": "add", "arguments": {"a": 2, "b": 3}}))?;
    assert_eq!(r["id"], 3);
    assert_eq!(r["result"]["content"][0]["text"], "5");
    assert_eq!(r["result"]["structuredContent"]["result"], 5);

    fake.send(&json!("not a request"))?;
    assert_eq!(fake.recv()?["error"]["code"], -32600);

    assert_eq!(fake.finish()?.code(), Some(0));
    Ok(())
}

#[test]
fn sleep_does_not_block_other_requests() -> Res<()> {
    let mut fake = Fake::start(&["--tools", "sleep,add"])?;
    fake.send(&json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"ms": 1500}}}))?;
    let r = fake.call(2, "ping", json!({}))?;
    assert_eq!(r["id"], 2, "ping must overtake the sleeping call");
    let r = fake.recv()?;
    assert_eq!(r["id"], "slow");
    assert_eq!(r["result"]["content"][0]["text"], "slept 1500 ms");
    assert_eq!(fake.finish()?.code(), Some(0));
    Ok(())
}

#[test]
fn crash_after_exits_101() -> Res<()> {
    let mut fake = Fake::start(&["--crash-after", "1"])?;
    let r = fake.call(1, "tools/call", json!({"name": "echo", "arguments": {"k": "v"}}))?;
    assert_eq!(r["result"]["structuredContent"], json!({"k": "v"}));
    let status = wait_bounded(&mut fake.child)?;
    assert_eq!(status.code(), Some(101));
    Ok(())
}
