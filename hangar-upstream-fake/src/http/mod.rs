//! The HTTP transport: streamable HTTP at `/mcp` on a small blocking
//! std::net server. This file: binding (and the bind faults).

mod leftover;
mod request;
mod response;
mod route;
mod server;
mod witness;

pub use witness::Witness;

use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::conformance;
use crate::faults;
use crate::handler::State;
use crate::log::{log, log_fault};
use crate::output::Output;

#[derive(Debug)]
pub struct Config {
    /// Where to listen; a host name binds the first resolved address that works.
    pub addr: String,
    pub sse: bool,
    /// What ends each SSE line: `\n`, `\r\n` or `\r`.
    pub sse_line_end: &'static str,
    pub leftover: bool,
    pub no_bind: bool,
    pub bind_delay: Option<Duration>,
    /// Set by --garbage-stdout: the over-long line's length.
    pub garbage_line_bytes: Option<usize>,
    /// Set by --conformance: serve its fixtures instead of the fake's tools.
    pub conformance: Option<Arc<conformance::Server>>,
    /// Set by --require-auth-file and --record-headers.
    pub witness: Witness,
}

pub fn run(config: Config, state: Arc<State>, out: Arc<Output>) -> ExitCode {
    if config.no_bind {
        stay_unbound(&state.sentinel);
    }
    if let Some(delay) = config.bind_delay {
        log(&format!("waiting {} ms before binding, as asked", delay.as_millis()));
        std::thread::sleep(delay);
    }
    // std's bind tries each resolved address in turn until one works.
    let listener = match TcpListener::bind(config.addr.as_str()) {
        Ok(listener) => listener,
        Err(e) => {
            log(&format!("cannot bind {}: {e}", config.addr));
            return ExitCode::FAILURE;
        }
    };
    let url = match listener.local_addr() {
        Ok(addr) => format!("http://{addr}{}", route::MCP_PATH),
        Err(e) => {
            log(&format!("cannot read the bound address: {e}"));
            return ExitCode::FAILURE;
        }
    };
    // Through `out` so it is flushed and never interleaves with garbage.
    out.raw(format!("hangar-upstream-fake listening on {url}\n").as_bytes());
    log(&format!("listening on {url}{}", if config.leftover { " (leftover impersonation)" } else { "" }));
    if let Some(bytes) = config.garbage_line_bytes {
        // Off the serving path: an undrained stdout must not stop us accepting.
        let (out, sentinel) = (Arc::clone(&out), state.sentinel.clone());
        std::thread::spawn(move || faults::write_garbage_preamble(&out, &sentinel, bytes));
    }
    let mut app = route::App::new(state, config.sse, config.leftover);
    app.conformance = config.conformance;
    app.sse_line_end = config.sse_line_end;
    app.witness = config.witness;
    let app = Arc::new(app);
    server::accept_loop(&listener, &app, &out)
}

/// A server that "fails to bind but does not exit": alive until killed.
fn stay_unbound(sentinel: &str) -> ! {
    log_fault(sentinel, "not binding, as asked");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
