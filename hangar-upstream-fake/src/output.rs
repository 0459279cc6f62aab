//! The single stdout writer. Every message goes out as one flushed line under
//! one lock, so concurrent answers never interleave; the per-answer faults
//! (garbage line, crash-after, ping-parent) live here because they hinge on
//! the moment an answer is written (over HTTP, see `call_answered_elsewhere`).

use std::io::{self, Write};
use std::sync::Mutex;

use hangar_core::sync::Unpoisoned;
use serde_json::{Value, json};

use crate::log::{log, log_fault};
use crate::protocol;

/// Exit code of the simulated crash.
pub const CRASH_EXIT_CODE: i32 = 101;

#[derive(Debug, Default)]
pub struct Faults {
    pub sentinel: String,
    pub garbage: bool,
    pub crash_after: Option<u64>,
    pub close_stdout_after: Option<u64>,
    pub ping_parent: bool,
}

struct Inner {
    stdout: io::Stdout,
    calls_answered: u64,
    pinged: bool,
    broken: bool,
}

pub struct Output {
    inner: Mutex<Inner>,
    faults: Faults,
}

impl Inner {
    fn write_raw(&mut self, bytes: &[u8]) {
        if self.broken {
            return;
        }
        let res = self.stdout.write_all(bytes).and_then(|()| self.stdout.flush());
        if let Err(e) = res {
            // The reader is gone; keep serving stdin until EOF, quietly.
            log(&format!("stdout write failed, dropping further output: {e}"));
            self.broken = true;
        }
    }

    fn write_msg(&mut self, msg: &Value) {
        let mut line = msg.to_string().into_bytes();
        line.push(b'\n');
        self.write_raw(&line);
    }
}

impl Output {
    pub fn new(faults: Faults) -> Self {
        Self {
            inner: Mutex::new(Inner { stdout: io::stdout(), calls_answered: 0, pinged: false, broken: false }),
            faults,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panicking writer thread must not take the whole fake down.
        self.inner.locked()
    }

    /// Writes bytes as-is (for deliberate garbage).
    pub fn raw(&self, bytes: &[u8]) {
        self.lock().write_raw(bytes);
    }

    /// Writes a message that is not an answer (notifications).
    pub fn send(&self, msg: &Value) {
        self.lock().write_msg(msg);
    }

    /// Writes the answer to a request; `is_call` marks `tools/call` answers.
    pub fn answer(&self, msg: &Value, is_call: bool) {
        let f = &self.faults;
        let mut inner = self.lock();
        if is_call && f.garbage {
            inner.write_raw(format!("garbage before a tools/call answer {}\n", f.sentinel).as_bytes());
        }
        inner.write_msg(msg);
        if is_call {
            self.count_call(&mut inner);
        }
        if f.ping_parent && !inner.pinged {
            inner.pinged = true;
            log("sending ping and sampling/createMessage to the hangar");
            inner.write_msg(&protocol::request("fake-ping-1", "ping", None));
            inner.write_msg(&protocol::request("fake-sample-1", "sampling/createMessage", Some(json!({}))));
        }
    }

    /// The per-answer faults for a `tools/call` answer that was written
    /// somewhere else (an HTTP response): the garbage line still lands on
    /// stdout and crash-after still counts.
    pub fn call_answered_elsewhere(&self) {
        let f = &self.faults;
        let mut inner = self.lock();
        if f.garbage {
            inner.write_raw(format!("garbage after a tools/call answer {}\n", f.sentinel).as_bytes());
        }
        self.count_call(&mut inner);
    }

    /// Counts one answered `tools/call`; exits once crash-after is reached, closes stdout once
    /// close-stdout-after is.
    fn count_call(&self, inner: &mut Inner) {
        let f = &self.faults;
        inner.calls_answered += 1;
        if f.close_stdout_after.is_some_and(|n| inner.calls_answered == n) {
            log_fault(&f.sentinel, "closing stdout as asked; still running");
            let closed = std::fs::File::open("/dev/null")
                .and_then(|null| nix::unistd::dup2_stdout(null).map_err(io::Error::from));
            if let Err(e) = closed {
                log(&format!("cannot close stdout: {e}"));
            }
            inner.broken = true;
        }
        if f.crash_after.is_some_and(|n| inner.calls_answered >= n) {
            let n = inner.calls_answered;
            log_fault(&f.sentinel, &format!("crashing after {n} tools/call answers as asked"));
            std::process::exit(CRASH_EXIT_CODE);
        }
    }
}
