//! Runs the built fake with --conformance over real pipes: notifications
//! come before the answer they belong to, the legacy wire's requests of ours
//! round-trip, and closing stdin still answers what was read.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
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
    fn start() -> Res<Self> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hangar-upstream-fake"))
            .arg("--conformance")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("no stdout")?;
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
        Ok(stdin.flush()?)
    }

    fn recv(&self) -> Res<Value> {
        Ok(serde_json::from_str(&self.lines.recv_timeout(WAIT)?)?)
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn request(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[test]
fn progress_notifications_come_before_the_answer() -> Res<()> {
    let mut fake = Fake::start()?;
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "progressToken": "progress-test-1",
    });
    fake.send(&request(1, "tools/call", json!({"name": "test_tool_with_progress", "_meta": meta})))?;
    let mut progress = Vec::new();
    loop {
        let msg = fake.recv()?;
        if msg.get("id").is_some() {
            assert_eq!(msg["id"], 1);
            assert_eq!(msg["result"]["resultType"], "complete");
            break;
        }
        assert_eq!(msg["params"]["progressToken"], "progress-test-1");
        progress.push(msg["params"]["progress"].as_i64().ok_or("no progress")?);
    }
    assert_eq!(progress, [0, 50, 100]);
    Ok(())
}

#[test]
fn legacy_sampling_is_asked_of_the_client_and_answered_with_its_text() -> Res<()> {
    let mut fake = Fake::start()?;
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}},
                      "clientInfo": {"name": "t", "version": "1"}});
    fake.send(&request(1, "initialize", init))?;
    assert_eq!(fake.recv()?["result"]["protocolVersion"], "2025-11-25");
    fake.send(&request(2, "tools/call", json!({"name": "test_sampling", "arguments": {"prompt": "Hi"}})))?;
    let asked = fake.recv()?;
    assert_eq!(asked["method"], "sampling/createMessage");
    let answer = json!({"role": "assistant", "content": {"type": "text", "text": "Hello"}, "model": "m"});
    fake.send(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": answer}))?;
    let done = fake.recv()?;
    assert_eq!(
        (done["id"].as_i64(), done["result"]["content"][0]["text"].as_str()),
        (Some(2), Some("LLM response: Hello"))
    );
    Ok(())
}

#[test]
fn closing_stdin_while_a_request_waits_still_answers_it() -> Res<()> {
    let mut fake = Fake::start()?;
    fake.send(&request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}}),
    ))?;
    fake.recv()?;
    fake.send(&request(2, "tools/call", json!({"name": "test_elicitation", "arguments": {"message": "?"}})))?;
    assert_eq!(fake.recv()?["method"], "elicitation/create");
    drop(fake.stdin.take());
    let answer = fake.recv()?;
    assert_eq!((answer["id"].as_i64(), answer["error"]["code"].as_i64()), (Some(2), Some(-32603)));
    let deadline = Instant::now() + WAIT;
    while fake.child.try_wait()?.is_none() {
        assert!(Instant::now() < deadline, "the fake did not exit after stdin closed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(fake.child.try_wait()?.is_some_and(|s| s.success()));
    Ok(())
}
