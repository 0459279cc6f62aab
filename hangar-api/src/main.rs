//! hangar-api: the hangar's gateway. Serves REST under `/api`, MCP at `/mcp` and Prometheus text
//! at `/metrics`, answering from the supervisor over its control socket. It holds no state of
//! its own, so any number of instances can run side by side. This file: arguments and wiring.
//!
//! Architecture invariants: every record it shows (servers, `dead` objects, status notes, tool
//! records, log lines) comes from the supervisor as a hangar-core type and is serialized
//! unchanged on REST and MCP alike; handlers reach the supervisor only through the small
//! [`supervisor::Supervisor`] trait, so they are tested without a socket.

#![forbid(unsafe_code)]

mod app;
mod approvals;
mod args;
mod auth;
mod body;
mod cluster;
mod connect;
mod credentials;
#[cfg(test)]
mod docs_page;
mod drain;
mod error;
mod exposure;
mod guard;
mod journal;
mod json;
mod lifetime;
mod listen;
mod mcp;
mod metrics;
mod oauth;
mod page;
mod public;
mod rest;
mod serve;
mod shapes;
mod state;
mod streamed;
mod supervisor;
#[cfg(test)]
mod testing;

use std::process::ExitCode;
use std::time::Duration;

use hangar_runtime::exit::run_main;
use hangar_runtime::logging;
use hangar_runtime::random;

use crate::args::Args;
use crate::auth::Auth;

/// jemalloc, with its background purging thread, gives freed pages back to the system on its
/// own: with glibc's malloc the memory of a flood of connections stayed resident after they
/// closed (344 MB after 15,000; mimalloc gave it back only while requests kept coming).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    run_main("hangar-api", || {
        let args: Args = hangar_runtime::args::parse()?;
        // Before any thread: taking the inherited socket unsets LISTEN_FDS and LISTEN_PID.
        let inherited = match args.listen_stdin {
            true => Some(listen::from_stdin()?),
            false => listen::from_systemd()?,
        };
        logging::init(args.log_format);
        let limits = lifetime::connection_limits(&args);
        let auth = args.api_keys.as_deref().map(Auth::load).transpose()?.unwrap_or_default();
        let runtime = hangar_runtime::runtime::start()?;
        let outcome = runtime.block_on(lifetime::run(args, inherited, auth, limits));
        // A resolver thread may still be parked; do not let it hold up the exit.
        runtime.shutdown_timeout(Duration::from_secs(1));
        outcome
    })
}
