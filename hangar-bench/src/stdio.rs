//! The floor: an upstream's own stdio, no hangar in between. One task writes requests and reads
//! answers on the one pipe, keeping C requests in flight with distinct ids.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::load::Stop;
use crate::mcp::{self, Check};
use crate::stats::Summary;

/// How long the era probe (`server/discover`) may go unanswered before falling back to legacy.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long any answer may take.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct StdioSpec {
    pub label: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub tool: String,
    pub arguments: Value,
    pub stop: Stop,
    pub concurrency: usize,
    pub warmup: u64,
    pub setup: Value,
}

struct Pipe {
    child: Child,
    writer: BufWriter<ChildStdin>,
    reader: BufReader<ChildStdout>,
    line: Vec<u8>,
}

impl Pipe {
    async fn send(&mut self, message: &Value) -> anyhow::Result<()> {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        self.writer.write_all(&line).await?;
        self.writer.flush().await?;
        Ok(())
    }

    /// The next JSON-RPC response (skipping notifications, the upstream's own requests and
    /// lines that are not JSON).
    async fn response(&mut self, timeout: Duration) -> anyhow::Result<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            self.line.clear();
            let read = tokio::time::timeout_at(deadline, self.reader.read_until(b'\n', &mut self.line))
                .await
                .map_err(|_| anyhow!("no answer within {timeout:?}"))??;
            if read == 0 {
                bail!("the upstream closed its stdout");
            }
            let Ok(message) = serde_json::from_slice::<Value>(&self.line) else { continue };
            if message.get("id").is_some() && (message.get("result").is_some() || message.get("error").is_some()) {
                return Ok(message);
            }
        }
    }
}

/// Sends `tools/call` lines built around the id: `prefix` + id + `suffix`.
struct Encoded {
    prefix: Vec<u8>,
    suffix: Vec<u8>,
}

impl Encoded {
    fn new(tool: &str, arguments: &Value, modern: bool) -> anyhow::Result<Encoded> {
        let mut params = json!({"name": tool, "arguments": arguments});
        if modern {
            params["_meta"] = mcp::modern_meta();
        }
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": params}).to_string();
        let (prefix, suffix) = body.split_once("\"id\":0").ok_or_else(|| anyhow!("cannot place the id"))?;
        Ok(Encoded { prefix: format!("{prefix}\"id\":").into_bytes(), suffix: format!("{suffix}\n").into_bytes() })
    }

    async fn write(&self, writer: &mut BufWriter<ChildStdin>, id: u64) -> std::io::Result<()> {
        writer.write_all(&self.prefix).await?;
        writer.write_all(id.to_string().as_bytes()).await?;
        writer.write_all(&self.suffix).await
    }
}

pub async fn run(spec: StdioSpec) -> anyhow::Result<Summary> {
    let mut child = Command::new(&spec.program)
        .args(&spec.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        // The upstream's log would only clutter the table.
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot run {}", spec.program.display()))?;
    let writer = BufWriter::new(child.stdin.take().ok_or_else(|| anyhow!("no stdin"))?);
    let reader = BufReader::new(child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?);
    let mut pipe = Pipe { child, writer, reader, line: Vec::with_capacity(4096) };

    let modern = handshake(&mut pipe).await?;
    let encoded = Encoded::new(&spec.tool, &spec.arguments, modern)?;
    let era = if modern { "modern" } else { "legacy" };
    let mut errors = 0;
    let mut first_error = None;
    let concurrency = spec.concurrency.max(1);
    if spec.warmup > 0 {
        phase(&mut pipe, &encoded, Stop::Requests(spec.warmup), concurrency, &mut 0, &mut first_error).await?;
    }
    let started = Instant::now();
    let samples = phase(&mut pipe, &encoded, spec.stop, concurrency, &mut errors, &mut first_error).await?;
    let elapsed = started.elapsed();
    if let Some(why) = first_error {
        eprintln!("hangar-bench: {}: first error: {why}", spec.label);
    }
    // Closing stdin is how a stdio server is asked to go.
    drop(pipe.writer);
    let _ = tokio::time::timeout(Duration::from_secs(2), pipe.child.wait()).await;
    let mut setup = spec.setup;
    setup["era"] = era.into();
    Ok(Summary::new(&spec.label, vec![samples], errors, elapsed, setup))
}

/// Finds the era: `server/discover` answered means modern (then no handshake is needed, every
/// request carries its `_meta`); an error or silence means legacy: `initialize` and
/// `notifications/initialized`. True for modern.
async fn handshake(pipe: &mut Pipe) -> anyhow::Result<bool> {
    let discover = json!({"jsonrpc": "2.0", "id": "discover", "method": "server/discover", "params": {"_meta": mcp::modern_meta()}});
    pipe.send(&discover).await?;
    match pipe.response(PROBE_TIMEOUT).await {
        Ok(answer) if answer.get("result").is_some() => return Ok(true),
        Ok(_) => {}
        Err(err) if err.to_string().contains("closed") => return Err(err.context("during server/discover")),
        Err(_) => {}
    }
    let initialize = json!({
        "jsonrpc": "2.0", "id": "initialize", "method": "initialize",
        "params": {
            "protocolVersion": mcp::LEGACY_OFFER,
            "capabilities": {},
            "clientInfo": {"name": "hangar-bench", "version": env!("CARGO_PKG_VERSION")},
        },
    });
    pipe.send(&initialize).await?;
    loop {
        // A late answer to the probe may come first.
        let answer = pipe.response(ANSWER_TIMEOUT).await.context("waiting for initialize")?;
        if answer.get("id") != Some(&json!("initialize")) {
            continue;
        }
        if let Some(error) = answer.get("error") {
            bail!("initialize failed: {error}");
        }
        break;
    }
    pipe.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await?;
    Ok(false)
}

/// Keeps `concurrency` requests in flight until `stop`, then drains them. Request ids are
/// `slot + concurrency * k`, so an answer's id names its slot and the slot its start time.
async fn phase(
    pipe: &mut Pipe,
    encoded: &Encoded,
    stop: Stop,
    concurrency: usize,
    errors: &mut u64,
    first_error: &mut Option<String>,
) -> anyhow::Result<Vec<u64>> {
    let slots = concurrency as u64;
    let (limit, deadline) = match stop {
        Stop::Requests(n) => (n, None),
        Stop::Duration(d) => (u64::MAX, Some(Instant::now() + d)),
    };
    let capacity = match stop {
        Stop::Requests(n) => usize::try_from(n).unwrap_or(0).min(1 << 24),
        Stop::Duration(d) => ((d.as_secs_f64() * 200_000.0) as usize).min(1 << 24),
    };
    let mut samples = Vec::with_capacity(capacity);
    let mut started = vec![Instant::now(); concurrency];
    let mut sent = 0u64;
    let mut in_flight = 0u64;
    for slot in 0..slots.min(limit) {
        started[slot as usize] = Instant::now();
        encoded.write(&mut pipe.writer, slot).await?;
        sent += 1;
        in_flight += 1;
    }
    pipe.writer.flush().await?;
    while in_flight > 0 {
        let answer = pipe.response(ANSWER_TIMEOUT).await?;
        let now = Instant::now();
        let Some(id) = answer.get("id").and_then(Value::as_u64) else { continue };
        let slot = (id % slots) as usize;
        samples.push(u64::try_from(now.duration_since(started[slot]).as_nanos()).unwrap_or(u64::MAX));
        in_flight -= 1;
        let more = sent < limit && deadline.is_none_or(|d| now < d);
        if more {
            started[slot] = Instant::now();
            encoded.write(&mut pipe.writer, id + slots).await?;
            pipe.writer.flush().await?;
            sent += 1;
            in_flight += 1;
        }
        if let Err(why) = mcp::judge_response(&answer, Check::Tool) {
            *errors += 1;
            first_error.get_or_insert(why);
        }
    }
    Ok(samples)
}
