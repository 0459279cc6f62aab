//! hangar-upstream-fake: an MCP server (stdio or HTTP) whose failures are
//! scriptable, driving the hangar's end-to-end tests. This file: wiring.

#![forbid(unsafe_code)]

mod args;
mod conformance;
#[cfg(test)]
mod docs_page;
mod faults;
mod handler;
mod http;
mod log;
mod output;
mod pidfiles;
mod protocol;
mod stdio;
mod tools;
mod watch;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;

use crate::args::{Args, tool_names};
use crate::handler::{AltTools, Mode, State};
use crate::log::{log, log_fault};
use crate::output::{Faults, Output};

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
    state.exit_after_handshake = args.exit_after_handshake;
    state.handshake_delay = args.handshake_delay_ms.map(Duration::from_millis);
    if let (Some(tools), Some(flag)) = (args.alt_tools, args.alt_tools_flag) {
        state.alt = Some(AltTools { tools: tool_names(tools), flag, description: args.alt_description });
    }
    let state = Arc::new(state);
    let out = Arc::new(Output::new(Faults {
        sentinel: args.sentinel.clone(),
        garbage: args.garbage_stdout,
        crash_after: args.crash_after,
        close_stdout_after: args.close_stdout_after,
        ping_parent: args.ping_parent,
    }));

    if let Some(bytes) = args.flood_stderr {
        log_fault(&args.sentinel, &format!("flooding stderr with {bytes} bytes"));
        faults::spawn_stderr_flood(bytes, args.sentinel.clone());
    }
    if state.hang {
        log_fault(&args.sentinel, "hanging: nothing will be answered");
    }
    // Only with --conformance: the suite's fixtures instead of --tools.
    let conformance = args.conformance.then(|| Arc::new(conformance::Server::default()));
    match &conformance {
        Some(_) => log("serving the MCP conformance suite's fixtures"),
        None => log(&format!("serving tools {} ({})", state.tools.join(","), mode.label())),
    }

    if let Some(addr) = args.http {
        if args.ping_parent || state.alt.is_some() {
            // Plain request/response HTTP has no channel for messages we start.
            log("over HTTP, --ping-parent and tools/list_changed notifications are not sent");
        }
        let config = http::Config {
            addr,
            sse: args.sse,
            sse_line_end: match args.sse_line_end.as_str() {
                "crlf" => "\r\n",
                "cr" => "\r",
                _ => "\n",
            },
            leftover: args.leftover,
            no_bind: args.no_bind,
            bind_delay: args.bind_delay_ms.map(Duration::from_millis),
            garbage_line_bytes: args.garbage_stdout.then_some(args.garbage_line_bytes),
            conformance,
            witness: http::Witness { require_auth_file: args.require_auth_file, record_headers: args.record_headers },
        };
        return http::run(config, state, out);
    }

    if args.garbage_stdout {
        faults::write_garbage_preamble(&out, &args.sentinel, args.garbage_line_bytes);
    }
    if let Some(alt) = &state.alt {
        watch::spawn_alt_tools_watch(alt.flag.clone(), Arc::clone(&out));
    }
    match conformance {
        Some(server) => conformance::stdio::serve(&server, &out),
        None => stdio::serve(&state, &out),
    }
}
