//! Command-line arguments.

use std::path::PathBuf;

use clap::Parser;

const DEFAULT_SENTINEL: &str = "HANGAR-FAKE-SENTINEL-0xC0FFEE";

/// An MCP server with scriptable failures, for the hangar's end-to-end
/// tests. Reads newline-delimited JSON-RPC on stdin and answers on stdout,
/// or with --http serves streamable HTTP at /mcp.
#[derive(Debug, Parser)]
#[command(version)]
pub struct Args {
    /// Tools to serve, comma-separated, listed in this order
    /// (add, echo, sleep, fail, huge, junk_line; any other name echoes).
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "add,echo")]
    pub tools: Vec<String>,
    /// Behave as a 2024-11-05-only server (server/discover is "method not found").
    #[arg(long)]
    pub legacy: bool,
    /// Like --legacy, but never answer server/discover at all.
    #[arg(long)]
    pub legacy_silent: bool,
    /// String written on every deliberate failure (stderr, error messages, error data).
    #[arg(long, value_name = "STRING", default_value = DEFAULT_SENTINEL)]
    pub sentinel: String,
    /// While FILE exists, answer every request with error -32603.
    #[arg(long, value_name = "FILE")]
    pub fail_flag: Option<PathBuf>,
    /// If FILE exists at start, exit with code 3 before reading (or binding) anything.
    #[arg(long, value_name = "FILE")]
    pub exit_flag: Option<PathBuf>,
    /// Exit with code 101 right after answering N tools/call requests.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub crash_after: Option<u64>,
    /// Exit with code 4 right after answering the handshake (server/discover or initialize; stdio only).
    #[arg(long)]
    pub exit_after_handshake: bool,
    /// Wait N milliseconds before answering the handshake (server/discover or initialize; stdio only).
    #[arg(long, value_name = "N")]
    pub handshake_delay_ms: Option<u64>,
    /// Right after answering N tools/call requests, close stdout (fd 1 becomes /dev/null) and
    /// keep running, reading stdin, until killed or stdin closes.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub close_stdout_after: Option<u64>,
    /// Read requests but never answer anything.
    #[arg(long)]
    pub hang: bool,
    /// While FILE exists, read requests and drop them unanswered.
    #[arg(long, value_name = "FILE")]
    pub hang_flag: Option<PathBuf>,
    /// At start, write BYTES bytes of sentinel lines to stderr in the background.
    #[arg(long, value_name = "BYTES")]
    pub flood_stderr: Option<u64>,
    /// Write garbage to stdout at start and a non-JSON line before each tools/call answer.
    #[arg(long)]
    pub garbage_stdout: bool,
    /// Length of the over-long garbage line written by --garbage-stdout.
    #[arg(long, value_name = "N", default_value_t = 2 * 1024 * 1024)]
    pub garbage_line_bytes: usize,
    /// Tools served instead of --tools while --alt-tools-flag exists.
    #[arg(long, value_name = "LIST", value_delimiter = ',', requires = "alt_tools_flag")]
    pub alt_tools: Option<Vec<String>>,
    /// Flag file switching to --alt-tools; changes send notifications/tools/list_changed (stdio only).
    #[arg(long, value_name = "FILE", requires = "alt_tools")]
    pub alt_tools_flag: Option<PathBuf>,
    /// While --alt-tools-flag exists, the alternate tools declare this description instead of
    /// their own (a changed definition under the same name: tool poisoning).
    #[arg(long, value_name = "TEXT", requires = "alt_tools_flag")]
    pub alt_description: Option<String>,
    /// Write our pid to FILE at start (atomically).
    #[arg(long, value_name = "FILE")]
    pub pid_file: Option<PathBuf>,
    /// Spawn `sleep 1000` at start and write its pid to FILE (atomically).
    #[arg(long, value_name = "FILE")]
    pub spawn_grandchild: Option<PathBuf>,
    /// After the first answer, send the hangar a ping and a sampling/createMessage request (stdio only).
    #[arg(long)]
    pub ping_parent: bool,
    /// Serve the official MCP conformance suite's fixtures (test_simple_text,
    /// test://static-text, test_simple_prompt, ...) on both eras, instead of --tools.
    /// (The per-request faults of --tools mode do not apply to the fixtures.)
    #[arg(long, conflicts_with_all = [
        "tools", "legacy", "legacy_silent", "alt_tools", "leftover", "fail_flag", "hang", "hang_flag",
    ])]
    pub conformance: bool,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio (port 0 picks a free port).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// With --http, answer every request as a one-event text/event-stream, then close.
    #[arg(long, requires = "http")]
    pub sse: bool,
    /// How SSE lines end: `lf`, `crlf` or `cr` (a lone CR), all three allowed by the spec.
    #[arg(long, value_name = "ENDING", value_parser = ["lf", "crlf", "cr"], default_value = "lf")]
    pub sse_line_end: String,
    /// With --http, impersonate a leftover server: every request gets a result carrying the sentinel.
    #[arg(long, requires = "http")]
    pub leftover: bool,
    /// With --http, never bind; just stay alive.
    #[arg(long, requires = "http")]
    pub no_bind: bool,
    /// With --http, wait N milliseconds before binding.
    #[arg(long, value_name = "N", requires = "http")]
    pub bind_delay_ms: Option<u64>,
    /// With --http, answer 401 with a WWW-Authenticate challenge unless `Authorization` is this
    /// file's text (re-read at each request).
    #[arg(long, value_name = "FILE", requires = "http")]
    pub require_auth_file: Option<std::path::PathBuf>,
    /// With --http, append each request's headers to FILE, one JSON object per line.
    #[arg(long, value_name = "FILE", requires = "http")]
    pub record_headers: Option<std::path::PathBuf>,
}

/// Drops empty names and duplicates, keeping the first occurrence's order.
pub fn tool_names(raw: Vec<String>) -> Vec<String> {
    let mut names: Vec<String> = Vec::with_capacity(raw.len());
    for name in raw {
        let name = name.trim().to_owned();
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}
