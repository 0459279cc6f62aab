//! What the fake's integration tests share: bounded waits on a child and its output, and the
//! fake run over real pipes. Each test binary uses a part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

pub const WAIT: Duration = Duration::from_secs(10);

/// Forwards a pipe's lines to a channel, so reads become bounded waits.
pub fn lines_of(pipe: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits (bounded by [`WAIT`]) for `child` to exit.
pub fn wait_bounded(child: &mut Child) -> Res<ExitStatus> {
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

/// A JSON-RPC request.
pub fn request(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The built fake on stdio, killed when dropped.
pub struct StdioFake {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl StdioFake {
    pub fn start(args: &[&str]) -> Res<Self> {
        let mut child = Command::new(env!("CARGO_BIN_EXE_hangar-upstream-fake"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child.stdin.take();
        let lines = lines_of(child.stdout.take().ok_or("no stdout")?);
        Ok(Self { child, stdin, lines })
    }

    pub fn send(&mut self, msg: &Value) -> Res<()> {
        let stdin = self.stdin.as_mut().ok_or("stdin closed")?;
        writeln!(stdin, "{msg}")?;
        stdin.flush()?;
        Ok(())
    }

    /// The next line, as JSON (bounded by [`WAIT`]).
    pub fn recv(&self) -> Res<Value> {
        Ok(serde_json::from_str(&self.lines.recv_timeout(WAIT)?)?)
    }

    pub fn call(&mut self, id: i64, method: &str, params: Value) -> Res<Value> {
        self.send(&request(id, method, params))?;
        self.recv()
    }

    /// Closes the fake's stdin (its end of input).
    pub fn close_stdin(&mut self) {
        drop(self.stdin.take());
    }

    /// Closes stdin and waits (bounded) for the exit status.
    pub fn finish(mut self) -> Res<ExitStatus> {
        self.close_stdin();
        wait_bounded(&mut self.child)
    }
}

impl Drop for StdioFake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
