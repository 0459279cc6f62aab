//! `hangar-bench`: the hangar's load generator (issue 7). It measures the gateway, so it keeps
//! its own cost small: one keep-alive HTTP/1.1 connection per client, bodies encoded once,
//! latencies into preallocated vectors, one or two runtime threads (the gateway needs the rest).
#![forbid(unsafe_code)]

#[cfg(test)]
mod docs_page;
mod http;
mod load;
mod mcp;
mod procs;
mod stats;
mod stdio;
mod suite;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use hangar_runtime::exit::{EX_FAILURE, EX_SOFTWARE, Exit, run_main};
use serde_json::{Value, json};

use crate::http::Endpoint;
use crate::load::{LoadSpec, Stop, Work};
use crate::mcp::{Call, Check, Credential, Wire};
use crate::stats::Summary;

/// Load generator and benchmark suite for the hangar (and, on the same wire, the Python mcp-hangar).
#[derive(Debug, Parser)]
#[command(name = "hangar-bench", version, about)]
struct Cli {
    /// Runtime worker threads of the load generator (1: everything on one thread). The gateway
    /// under test shares the machine, so keep this small.
    #[arg(long, global = true, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    threads: u16,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Calls a tool over MCP streamable HTTP, through `hangar_call` or the front door.
    /// Exits 1 if any request failed.
    Call(CallArgs),
    /// The floor: calls a tool on an upstream's own stdio, no gateway. Exits 1 if any request failed.
    Stdio(StdioArgs),
    /// Runs the whole measurement with the binaries next to this one, and prints one table.
    /// Exits 1 if a step failed (a request error, a process never ready), never for a timing.
    Suite(SuiteArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    /// The gateway tool: `hangar_call {"calls":[{mcp_server, tool, arguments}]}`.
    HangarCall,
    /// The upstream's tool by name (`tools/call name=TOOL`; with several --server,
    /// `SERVER__TOOL`).
    FrontDoor,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Timed requests, over all clients.
    #[arg(long, value_name = "N", required_unless_present = "duration", conflicts_with = "duration")]
    requests: Option<u64>,
    /// Run for this long instead (seconds, fractions allowed).
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Clients (HTTP: connections, one request in flight each; stdio: requests in flight on the pipe).
    #[arg(long, short = 'c', value_name = "C", default_value_t = 1)]
    concurrency: usize,
    /// Untimed requests first (over all clients).
    #[arg(long, value_name = "N", default_value_t = 0)]
    warmup: u64,
    /// The row's label [default: derived from the options].
    #[arg(long, value_name = "TEXT")]
    label: Option<String>,
    /// Append the result as one JSON line to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

impl RunArgs {
    fn stop(&self) -> anyhow::Result<Stop> {
        match (self.requests, self.duration) {
            (Some(n), _) if n > 0 => Ok(Stop::Requests(n)),
            (_, Some(secs)) if secs > 0.0 && secs.is_finite() => Ok(Stop::Duration(Duration::from_secs_f64(secs))),
            _ => bail!("give --requests N (N > 0) or --duration SECS (> 0)"),
        }
    }
}

#[derive(Debug, Args)]
struct CallArgs {
    /// The MCP endpoint, e.g. http://127.0.0.1:8000/mcp.
    #[arg(long)]
    url: String,
    /// Sent as `X-API-Key` and `Authorization: Bearer`.
    #[arg(long, value_name = "KEY", conflicts_with = "bearer")]
    api_key: Option<String>,
    /// An OAuth access token, sent as `Authorization: Bearer` only.
    #[arg(long, value_name = "TOKEN")]
    bearer: Option<String>,
    /// Through `hangar_call`, or the upstream's tool by name.
    #[arg(long, value_enum, default_value = "hangar-call")]
    mode: Mode,
    /// The upstream server; a comma-separated list is called round-robin, one per request.
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    server: Vec<String>,
    /// The tool to call.
    #[arg(long, default_value = "echo")]
    tool: String,
    /// The tool's arguments, a JSON object.
    #[arg(long, value_name = "JSON", default_value = r#"{"text":"hello"}"#)]
    arguments: String,
    /// The 2026-07-28 wire, or a legacy session (`initialize`, then a session id).
    #[arg(long, value_enum, default_value = "modern")]
    wire: Wire,
    /// The client declares the tasks extension (modern wire): front-door calls may become tasks.
    #[arg(long)]
    takes_tasks: bool,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Args)]
struct StdioArgs {
    /// The upstream's command line, split on whitespace. A bare program name found next to
    /// this executable is run from there, else from PATH.
    #[arg(long, value_name = "CMD")]
    command: String,
    /// The tool to call.
    #[arg(long, default_value = "echo")]
    tool: String,
    /// The tool's arguments, a JSON object.
    #[arg(long, value_name = "JSON", default_value = r#"{"text":"hello"}"#)]
    arguments: String,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Args)]
struct SuiteArgs {
    /// Small counts and short runs (well under a minute): a smoke test for CI.
    #[arg(long)]
    quick: bool,
    /// Append every run, and every row of the table, as JSON lines to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

fn main() -> ExitCode {
    run_main("hangar-bench", || {
        let cli: Cli = hangar_runtime::args::parse()?;
        let runtime = if cli.threads == 1 {
            tokio::runtime::Builder::new_current_thread().enable_all().build()
        } else {
            tokio::runtime::Builder::new_multi_thread().worker_threads(usize::from(cli.threads)).enable_all().build()
        };
        let runtime = runtime.map_err(|err| Exit::new(EX_SOFTWARE, format!("cannot start the runtime: {err}")))?;
        let threads = cli.threads;
        let outcome = runtime.block_on(async move {
            match cli.command {
                Command::Call(args) => call(args, threads).await,
                Command::Stdio(args) => stdio(args, threads).await,
                Command::Suite(args) => suite::run(args.quick, args.json).await,
            }
        });
        match outcome {
            Ok(true) => Ok(()),
            // Ran, but some requests or steps failed: each was reported as it happened.
            Ok(false) => Err(Exit::quiet(EX_FAILURE)),
            Err(err) => Err(Exit::new(EX_SOFTWARE, format!("{err:#}"))),
        }
    })
}

fn parse_arguments(text: &str) -> anyhow::Result<Value> {
    let value: Value = serde_json::from_str(text).context("--arguments is not JSON")?;
    if !value.is_object() {
        bail!("--arguments must be a JSON object");
    }
    Ok(value)
}

/// Prints the row (and appends the JSON line); true if no request failed.
fn report(summary: &Summary, json: Option<&PathBuf>) -> anyhow::Result<bool> {
    println!("{}", Summary::header());
    println!("{}", summary.row());
    if let Some(path) = json {
        stats::append_json(path, &summary.to_json()).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(summary.errors == 0)
}

async fn call(args: CallArgs, threads: u16) -> anyhow::Result<bool> {
    let arguments = parse_arguments(&args.arguments)?;
    let stop = args.run.stop()?;
    let (calls, check) = match args.mode {
        Mode::HangarCall => {
            if args.server.is_empty() {
                bail!("--mode hangar-call needs --server NAME");
            }
            let calls = args
                .server
                .iter()
                .map(|server| {
                    let batch = json!({"calls": [{"mcp_server": server, "tool": args.tool, "arguments": arguments}]});
                    Call::declaring(args.wire, "hangar_call", &batch, args.takes_tasks)
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            (calls, Check::HangarCall)
        }
        Mode::FrontDoor if args.server.len() > 1 => {
            let calls = args
                .server
                .iter()
                .map(|server| {
                    Call::declaring(args.wire, &format!("{server}__{}", args.tool), &arguments, args.takes_tasks)
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            (calls, Check::Tool)
        }
        Mode::FrontDoor => (vec![Call::declaring(args.wire, &args.tool, &arguments, args.takes_tasks)?], Check::Tool),
    };
    let mode = match args.mode {
        Mode::HangarCall => "hangar-call",
        Mode::FrontDoor => "front-door",
    };
    let wire = match args.wire {
        Wire::Modern => "modern",
        Wire::Legacy => "legacy",
    };
    let label =
        args.run.label.clone().unwrap_or_else(|| format!("{mode} {} {wire} C={}", args.tool, args.run.concurrency));
    let spec = LoadSpec {
        label,
        endpoint: Endpoint::parse(&args.url)?,
        credential: args.api_key.map(Credential::ApiKey).or(args.bearer.map(Credential::Bearer)),
        work: Work::Mcp { wire: args.wire, calls, check },
        stop,
        concurrency: args.run.concurrency.max(1),
        warmup: args.run.warmup,
        setup: json!({
            "url": args.url, "mode": mode, "wire": wire, "servers": args.server, "tool": args.tool,
            "concurrency": args.run.concurrency, "warmup": args.run.warmup, "threads": threads,
        }),
    };
    let summary = load::run(spec).await?;
    report(&summary, args.run.json.as_ref())
}

async fn stdio(args: StdioArgs, threads: u16) -> anyhow::Result<bool> {
    let arguments = parse_arguments(&args.arguments)?;
    let stop = args.run.stop()?;
    let mut words = args.command.split_whitespace().map(str::to_owned);
    let Some(program) = words.next() else { bail!("--command is empty") };
    let label = args.run.label.clone().unwrap_or_else(|| format!("stdio {} C={}", args.tool, args.run.concurrency));
    let spec = stdio::StdioSpec {
        label,
        program: resolve(&program),
        args: words.collect(),
        tool: args.tool.clone(),
        arguments,
        stop,
        concurrency: args.run.concurrency.max(1),
        warmup: args.run.warmup,
        setup: json!({
            "command": args.command, "tool": args.tool, "concurrency": args.run.concurrency,
            "warmup": args.run.warmup, "threads": threads,
        }),
    };
    let summary = stdio::run(spec).await?;
    report(&summary, args.run.json.as_ref())
}

/// A bare program name is looked for next to this executable first (the workspace's binaries
/// sit together in target/release), else left to PATH.
fn resolve(program: &str) -> PathBuf {
    if !program.contains('/')
        && let Some(sibling) = std::env::current_exe().ok().and_then(|exe| Some(exe.parent()?.join(program)))
        && sibling.exists()
    {
        return sibling;
    }
    PathBuf::from(program)
}
