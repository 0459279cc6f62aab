//! The tokio-side plumbing every hangar process shares.
//!
//! - [`exit`]: the sysexits codes, and [`exit::run_main`], the edge where a fatal error is said
//!   and becomes the exit code.
//! - [`args`]: command-line parsing with sysexits exit codes.
//! - [`docs_gen`]: the generated parts of the docs (flag, exit-code and metric tables), and the
//!   check that a page's copy is up to date.
//! - [`batch`]: running `hangar_call`'s batch of calls, bounded, reported in order (the API runs
//!   it for a plain call, the supervisor for a task).
//! - [`client`]: a multiplexed, self-reconnecting client of the supervisor's control socket,
//!   used by the API and the prober.
//! - [`control_key`]: the secret a client proves in its hello, written by the supervisor beside
//!   its socket at each start.
//! - [`lines`]: newline-delimited I/O with a bound on line length, and batched line writing.
//! - [`logging`]: `tracing` to stderr, human or JSON.
//! - [`signals`]: the stop signals (SIGTERM, SIGINT) and the reload signal (SIGHUP), awaited
//!   as one future.
//! - [`random`]: unpredictable hex ids (sessions, batches, calls).
//! - [`runtime`]: the tokio runtime (one thread unless `HANGAR_WORKER_THREADS` asks for more).
//! - [`telemetry`] (feature `telemetry`): span export over OTLP/HTTP, off unless configured.
//!
//! Architecture invariant: nothing here knows what a server is; the vocabulary is
//! `hangar_core::ipc`.
#![forbid(unsafe_code)]

pub mod args;
pub mod batch;
pub mod client;
pub mod control_key;
pub mod docs_gen;
pub mod exit;
pub mod lines;
pub mod logging;
pub mod random;
pub mod runtime;
pub mod signals;
#[cfg(feature = "telemetry")]
pub mod telemetry;
