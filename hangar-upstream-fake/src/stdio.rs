//! The stdio transport: newline-delimited JSON-RPC on stdin, answers on
//! stdout.

use std::io::{self, BufRead};
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::Value;

use crate::handler::{self, State};
use crate::log::log;
use crate::output::Output;
use crate::protocol;

/// Reads stdin line by line until EOF.
pub fn serve(state: &Arc<State>, out: &Arc<Output>) -> ExitCode {
    let mut stdin = io::stdin().lock();
    let mut line = Vec::new();
    loop {
        line.clear();
        match stdin.read_until(b'\n', &mut line) {
            Ok(0) => return ExitCode::SUCCESS,
            Ok(_) => {}
            Err(e) => {
                log(&format!("reading stdin failed: {e}"));
                return ExitCode::FAILURE;
            }
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let msg: Value = match serde_json::from_slice(&line) {
            Ok(msg) => msg,
            Err(e) => {
                if !state.silenced() {
                    let err = protocol::error(&Value::Null, protocol::PARSE_ERROR, &format!("parse error: {e}"), None);
                    out.answer(&err, false);
                }
                continue;
            }
        };
        let is_call = msg.get("method").and_then(Value::as_str) == Some("tools/call");
        let is_sleep = is_call && msg.pointer("/params/name").and_then(Value::as_str) == Some("sleep");
        if is_sleep {
            // Only `sleep` blocks, so only it leaves the reader thread; the
            // rest answer inline and are never lost when stdin closes.
            let (state, out) = (Arc::clone(state), Arc::clone(out));
            std::thread::spawn(move || {
                if let Some(reply) = handler::handle(&state, &msg) {
                    out.answer(&reply, true);
                }
            });
        } else if let Some(reply) = handler::handle(state, &msg) {
            out.answer(&reply, is_call);
        }
    }
}
