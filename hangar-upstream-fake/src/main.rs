//! hangar-upstream-fake: a stdio MCP server whose failures are scriptable,
//! driving the hangar's end-to-end tests. This file: arguments and wiring.

#![forbid(unsafe_code)]

mod faults;
mod handler;
mod log;
mod output;
mod pidfiles;
mod protocol;
mod tools;
mod watch;

use std::io::{self, BufRead};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use serde_json::Value;

use crate::handler::{AltTools, Mode, State};
use crate::log::{log, log_fault};
use crate::output::{Faults, Output};

const DEFAULT_SENTINEL: &str = "HANGAR-FAKE-SENTINEL-0xC0FFEE";

/// A stdio MCP server with scriptable failures, for the hangar's end-to-end
/// tests. Reads newline-delimited JSON-RPC on stdin, answers on stdout.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Tools to serve, comma-separated, listed in this order
    /// (add, echo, sleep, fail; any other name echoes).
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "add,echo")]
    tools: Vec<String>,
    /// Behave as a 2024-11-05-only server (server/discover is "method not found").
    #[arg(long)]
    legacy: bool,
    /// Like --legacy, but never answer server/discover at all.
    #[arg(long)]
    legacy_silent: bool,
    /// String written on every deliberate failure (stderr, error messages, error data).
    #[arg(long, value_name = "STRING", default_value = DEFAULT_SENTINEL)]
    sentinel: String,
    /// While FILE exists, answer every request with error -32603.
    #[arg(long, value_name = "FILE")]
    fail_flag: Option<PathBuf>,
    /// If FILE exists at start, exit with code 3 before reading anything.
    #[arg(long, value_name = "FILE")]
    exit_flag: Option<PathBuf>,
    /// Exit with code 101 right after answering N tools/call requests.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    crash_after: Option<u64>,
    /// Read stdin but never answer anything.
    #[arg(long)]
    hang: bool,
    /// While FILE exists, read requests and drop them unanswered.
    #[arg(long, value_name = "FILE")]
    hang_flag: Option<PathBuf>,
    /// At start, write BYTES bytes of sentinel lines to stderr in the background.
    #[arg(long, value_name = "BYTES")]
    flood_stderr: Option<u64>,
    /// Write garbage to stdout at start and a non-JSON line before each tools/call answer.
    #[arg(long)]
    garbage_stdout: bool,
    /// Length of the over-long garbage line written by --garbage-stdout.
    #[arg(long, value_name = "N", default_value_t = 2 * 1024 * 1024)]
    garbage_line_bytes: usize,
    /// Tools served instead of --tools while --alt-tools-flag exists.
    #[arg(long, value_name = "LIST", value_delimiter = ',', requires = "alt_tools_flag")]
    alt_tools: Option<Vec<String>>,
    /// Flag file switching to --alt-tools; changes send notifications/tools/list_changed.
    #[arg(long, value_name = "FILE", requires = "alt_tools")]
    alt_tools_flag: Option<PathBuf>,
    /// Write our pid to FILE at start (atomically).
    #[arg(long, value_name = "FILE")]
    pid_file: Option<PathBuf>,
    /// Spawn `sleep 1000` at start and write its pid to FILE (atomically).
    #[arg(long, value_name = "FILE")]
    spawn_grandchild: Option<PathBuf>,
    /// After the first answer, send the hangar a ping and a sampling/createMessage request.
    #[arg(long)]
    ping_parent: bool,
}

/// Drops empty names and duplicates, keeping the first occurrence's order.
fn tool_names(raw: Vec<String>) -> Vec<String> {
    let mut names: Vec<String> = Vec::with_capacity(raw.len());
    for name in raw {
        let name = name.trim().to_owned();
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

fn main() -> ExitCode {
    let args = Args::parse();
    faults::exit_if_flagged(args.exit_flag.as_deref(), &args.sentinel);

    if let Some(path) = &args.pid_file
        && let Err(e) = pidfiles::write_own_pid(path)
    {
        log(&format!("cannot write pid file {}: {e}", path.display()));
        return ExitCode::FAILURE;
    }
    if let Some(path) = &args.spawn_grandchild
        && let Err(e) = pidfiles::spawn_grandchild(path)
    {
        log(&format!("cannot spawn grandchild ({}): {e}", path.display()));
        return ExitCode::FAILURE;
    }

    let mode = if args.legacy_silent {
        Mode::LegacySilent
    } else if args.legacy {
        Mode::Legacy
    } else {
        Mode::Modern
    };
    let mut state = State::new(mode, args.sentinel.clone(), tool_names(args.tools));
    state.fail_flag = args.fail_flag;
    state.hang = args.hang;
    state.hang_flag = args.hang_flag;
    if let (Some(tools), Some(flag)) = (args.alt_tools, args.alt_tools_flag) {
        state.alt = Some(AltTools { tools: tool_names(tools), flag });
    }
    let state = Arc::new(state);
    let out = Arc::new(Output::new(Faults {
        sentinel: args.sentinel.clone(),
        garbage: args.garbage_stdout,
        crash_after: args.crash_after,
        ping_parent: args.ping_parent,
    }));

    if args.garbage_stdout {
        faults::write_garbage_preamble(&out, &args.sentinel, args.garbage_line_bytes);
    }
    if let Some(bytes) = args.flood_stderr {
        log_fault(&args.sentinel, &format!("flooding stderr with {bytes} bytes"));
        faults::spawn_stderr_flood(bytes, args.sentinel.clone());
    }
    if let Some(alt) = &state.alt {
        watch::spawn_alt_tools_watch(alt.flag.clone(), Arc::clone(&out));
    }
    if state.hang {
        log_fault(&args.sentinel, "hanging: nothing will be answered");
    }
    log(&format!("serving tools {} ({})", state.tools.join(","), mode.label()));
    serve(&state, &out)
}

/// Reads stdin line by line until EOF.
fn serve(state: &Arc<State>, out: &Arc<Output>) -> ExitCode {
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
