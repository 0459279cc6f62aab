//! The stdio transport: newline-delimited JSON-RPC on stdin, answers on
//! stdout.

use std::io::{self, BufRead};
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::Value;

use crate::handler::{self, State};
use crate::log::{log, log_fault};

/// Exit code of `--exit-after-handshake`.
const EXIT_AFTER_HANDSHAKE_CODE: i32 = 4;
use crate::output::Output;
use crate::{protocol, tools};

/// Reads stdin line by line until EOF, handing each JSON message to
/// `on_msg`. A line that is not JSON is answered with a parse error, unless
/// `quiet()` says nothing may be answered right now.
pub fn read_messages(out: &Output, quiet: impl Fn() -> bool, mut on_msg: impl FnMut(Value)) -> ExitCode {
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
        match serde_json::from_slice(&line) {
            Ok(msg) => on_msg(msg),
            Err(e) => {
                if !quiet() {
                    let err = protocol::error(&Value::Null, protocol::PARSE_ERROR, &format!("parse error: {e}"), None);
                    out.answer(&err, false);
                }
            }
        }
    }
}

/// Serves the scriptable fake until stdin closes.
pub fn serve(state: &Arc<State>, out: &Arc<Output>) -> ExitCode {
    read_messages(
        out,
        || state.silenced(),
        |msg| {
            let method = msg.get("method").and_then(Value::as_str);
            let is_handshake = matches!(method, Some("server/discover" | "initialize"));
            if is_handshake && let Some(delay) = state.handshake_delay {
                std::thread::sleep(delay);
            }
            let is_call = method == Some("tools/call");
            let name = msg.pointer("/params/name").and_then(Value::as_str);
            let is_sleep = is_call && matches!(name, Some("sleep" | tools::ASK_SLEEP));
            let asks = is_call && name == Some(tools::ASK_SLEEP) && state.tools.iter().any(|t| t == tools::ASK_SLEEP);
            if is_sleep {
                // Only `sleep` blocks, so only it leaves the reader thread; the
                // rest answer inline and are never lost when stdin closes.
                let (state, out) = (Arc::clone(state), Arc::clone(out));
                std::thread::spawn(move || {
                    if asks {
                        // After `after_ms`, asks the hangar's client (the answer is only
                        // logged), then sleeps as `sleep` does.
                        let after = msg.pointer("/params/arguments/after_ms").and_then(Value::as_u64).unwrap_or(0);
                        std::thread::sleep(std::time::Duration::from_millis(after.min(60_000)));
                        log("sending sampling/createMessage to the hangar, then sleeping");
                        out.send(&protocol::request(
                            "fake-ask-1",
                            "sampling/createMessage",
                            Some(serde_json::json!({})),
                        ));
                    }
                    if let Some(reply) = handler::handle(&state, &msg) {
                        out.answer(&reply, true);
                    }
                });
            } else if let Some(reply) = handler::handle(state, &msg) {
                let is_junk = is_call && msg.pointer("/params/name").and_then(Value::as_str) == Some("junk_line");
                if is_junk && state.tools.iter().any(|t| t == "junk_line") {
                    let args = msg.pointer("/params/arguments").and_then(Value::as_object).cloned().unwrap_or_default();
                    out.raw(&tools::junk_line(tools::junk_bytes(&args), &state.sentinel));
                }
                out.answer(&reply, is_call);
                // `rpc_error`'s `then_notify`: a notification after the answer, outside any request.
                if is_call
                    && name == Some(tools::RPC_ERROR)
                    && let Some(notify) = msg.pointer("/params/arguments/then_notify").and_then(Value::as_object)
                    && let Some(method) = notify.get("method").and_then(Value::as_str)
                {
                    out.send(&serde_json::json!({"jsonrpc": "2.0", "method": method, "params": notify.get("params")}));
                }
                if is_handshake && state.exit_after_handshake {
                    log_fault(&state.sentinel, "exiting right after the handshake as asked");
                    std::process::exit(EXIT_AFTER_HANDSHAKE_CODE);
                }
            }
        },
    )
}
