//! `hangar-bench suite`: the whole measurement of issue 7 against the workspace's own binaries,
//! ending in one table. A step fails on a request error or a process that never becomes ready,
//! never on a timing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use bytes::Bytes;
use hyper::Method;
use serde_json::{Value, json};

use crate::http::{Conn, Endpoint, snippet};
use crate::load::{self, LoadSpec, Stop, Work};
use crate::mcp::{self, Call, Check, Wire};
use crate::procs::{self, Hangar};
use crate::stats::{self, Summary};
use crate::stdio::{self, StdioSpec};

/// Clients of every throughput run (and requests in flight on the floor's pipe).
const CLIENTS: usize = 8;
/// How long a hangar may take to answer `/health/ready`, or its servers to start.
const READY_LIMIT: Duration = Duration::from_secs(60);

/// How much of everything: the full run or `--quick`.
struct Sizes {
    /// Requests of a sequential latency run.
    latency_requests: u64,
    /// Length of a throughput run.
    throughput: Duration,
    /// Warm-up requests before each run.
    warmup: u64,
    launches: usize,
    /// Requests of each cold-listing latency run.
    cold_requests: u64,
    cold_servers: usize,
    /// How many upstreams the RSS rows run.
    running: [usize; 3],
}

const FULL: Sizes = Sizes {
    latency_requests: 10_000,
    throughput: Duration::from_secs(10),
    warmup: 500,
    launches: 5,
    cold_requests: 200,
    cold_servers: 1000,
    running: [1, 10, 100],
};

const QUICK: Sizes = Sizes {
    latency_requests: 300,
    throughput: Duration::from_secs(1),
    warmup: 50,
    launches: 3,
    cold_requests: 30,
    cold_servers: 1000,
    running: [1, 10, 100],
};

/// One line of the final table.
struct Row {
    what: String,
    value: f64,
    unit: &'static str,
    /// Latency: times the floor's. Throughput: the fraction of the floor's.
    vs_floor: Option<f64>,
}

struct Floor {
    p50_ms: f64,
    p99_ms: f64,
    calls_per_s: f64,
}

struct Suite {
    supervisor: PathBuf,
    fake: PathBuf,
    sizes: &'static Sizes,
    json: Option<PathBuf>,
    rows: Vec<Row>,
    floor: Option<Floor>,
    printed_header: bool,
}

pub async fn run(quick: bool, json: Option<PathBuf>) -> anyhow::Result<bool> {
    let dir = std::env::current_exe()?.parent().map(Path::to_path_buf).ok_or_else(|| anyhow!("no exe dir"))?;
    let sibling = |name: &str| {
        let path = dir.join(name);
        if path.exists() {
            Ok(path)
        } else {
            Err(anyhow!(
                "{} is missing: build the workspace's binaries first (cargo build --release --workspace --bins)",
                path.display()
            ))
        }
    };
    for helper in ["hangar-api", "hangar-prober", "hangar-guardian"] {
        sibling(helper)?;
    }
    let mut suite = Suite {
        supervisor: sibling("hangar-supervisor")?,
        fake: sibling("hangar-upstream-fake")?,
        sizes: if quick { &QUICK } else { &FULL },
        json,
        rows: Vec::new(),
        floor: None,
        printed_header: false,
    };
    let started = Instant::now();
    // Other work on the machine moves every number here: say how busy it was.
    let load_before = load_average();
    let mut failures: Vec<&str> = Vec::new();
    let mut outcome = |name: &'static str, result: anyhow::Result<()>| {
        if let Err(err) = result {
            eprintln!("hangar-bench suite: step {name} failed: {err:#}");
            failures.push(name);
        }
    };
    outcome("1 (floor: stdio direct)", suite.floor().await);
    outcome("2 (hangar_call and front door through HTTP)", suite.gateway().await);
    outcome("3+6 (RSS with running upstreams; round-robin throughput)", suite.running().await);
    outcome("4 (launch times)", suite.launches().await);
    outcome("5 (listing cold servers)", suite.cold().await);
    suite.print_table();
    println!(
        "suite took {:.1} s{}; load average before: {load_before}, after: {}; {} CPUs",
        started.elapsed().as_secs_f64(),
        if quick { " (--quick)" } else { "" },
        load_average(),
        std::thread::available_parallelism().map_or(0, usize::from),
    );
    if !failures.is_empty() {
        eprintln!("hangar-bench suite: {} step(s) failed: {}", failures.len(), failures.join("; "));
    }
    Ok(failures.is_empty())
}

impl Suite {
    fn yaml(&self, servers: usize, front_door: bool) -> String {
        let fake = serde_json::to_string(&self.fake.display().to_string()).unwrap_or_default();
        let mode = if front_door { "front_door" } else { "egress" };
        let mut yaml = format!("tool_access: {{mode: {mode}}}\nmcp_servers:\n");
        for i in 0..servers {
            yaml.push_str(&format!("  s{i}:\n    command: [{fake}, --tools, echo]\n"));
        }
        yaml
    }

    async fn start_hangar(&self, servers: usize, front_door: bool) -> anyhow::Result<Hangar> {
        let mut hangar = Hangar::launch(&self.supervisor, &self.yaml(servers, front_door))?;
        hangar.wait_ready(READY_LIMIT).await?;
        Ok(hangar)
    }

    /// Prints a run's row as it completes, appends it to the JSONL file, and fails the step if
    /// any request failed.
    fn record(&mut self, summary: &Summary) -> anyhow::Result<()> {
        if !self.printed_header {
            println!("{}", Summary::header());
            self.printed_header = true;
        }
        println!("{}", summary.row());
        if let Some(path) = &self.json {
            stats::append_json(path, &summary.to_json())?;
        }
        if summary.errors > 0 {
            bail!("{}: {} of {} requests failed", summary.label, summary.errors, summary.count);
        }
        Ok(())
    }

    fn row(&mut self, what: impl Into<String>, value: f64, unit: &'static str, vs_floor: Option<f64>) {
        self.rows.push(Row { what: what.into(), value, unit, vs_floor });
    }

    /// Rows for a sequential run: p50 and p99, each against the floor's.
    fn latency_rows(&mut self, what: &str, summary: &Summary) {
        let (p50, p99) = (stats::ms(summary.p50_ns), stats::ms(summary.p99_ns));
        let floor = self.floor.as_ref().map(|f| (f.p50_ms, f.p99_ms));
        self.row(format!("{what}, sequential p50"), p50, "ms", floor.map(|f| p50 / f.0));
        self.row(format!("{what}, sequential p99"), p99, "ms", floor.map(|f| p99 / f.1));
    }

    fn throughput_row(&mut self, what: &str, summary: &Summary) {
        let floor = self.floor.as_ref().map(|f| f.calls_per_s);
        let value = summary.calls_per_s;
        self.row(format!("{what}, {CLIENTS} clients"), value, "calls/s", floor.map(|f| value / f));
    }

    fn sequential(&self) -> (Stop, usize) {
        (Stop::Requests(self.sizes.latency_requests), 1)
    }

    fn parallel(&self) -> (Stop, usize) {
        (Stop::Duration(self.sizes.throughput), CLIENTS)
    }

    // ---- 1. the floor

    async fn floor(&mut self) -> anyhow::Result<()> {
        let mut spec = StdioSpec {
            label: "floor: stdio direct, C=1".into(),
            program: self.fake.clone(),
            args: vec!["--tools".into(), "echo".into()],
            tool: "echo".into(),
            arguments: json!({"text": "hello"}),
            stop: Stop::Requests(self.sizes.latency_requests),
            concurrency: 1,
            warmup: self.sizes.warmup,
            setup: json!({"suite": "floor", "concurrency": 1}),
        };
        let sequential = stdio::run(spec.clone()).await?;
        self.record(&sequential)?;
        spec.label = format!("floor: stdio direct, C={CLIENTS}");
        spec.stop = Stop::Duration(self.sizes.throughput);
        spec.concurrency = CLIENTS;
        spec.setup = json!({"suite": "floor", "concurrency": CLIENTS});
        let parallel = stdio::run(spec).await?;
        self.record(&parallel)?;
        self.floor = Some(Floor {
            p50_ms: stats::ms(sequential.p50_ns),
            p99_ms: stats::ms(sequential.p99_ns),
            calls_per_s: parallel.calls_per_s,
        });
        self.latency_rows("floor: stdio direct", &sequential);
        let value = parallel.calls_per_s;
        self.row(format!("floor: stdio direct, {CLIENTS} in flight on the pipe"), value, "calls/s", Some(1.0));
        Ok(())
    }

    // ---- 2. hangar_call and the front door

    fn mcp_load(&self, hangar: &Hangar, label: String, calls: Vec<Call>, wire: Wire, check: Check) -> LoadSpec {
        LoadSpec {
            setup: json!({"suite": label, "wire": format!("{wire:?}").to_lowercase(), "targets": calls.len()}),
            label,
            endpoint: hangar.mcp.clone(),
            credential: None,
            work: Work::Mcp { wire, calls, check },
            stop: Stop::Requests(1),
            concurrency: 1,
            warmup: self.sizes.warmup,
        }
    }

    async fn measure(&mut self, mut spec: LoadSpec, (stop, concurrency): (Stop, usize)) -> anyhow::Result<Summary> {
        spec.stop = stop;
        spec.concurrency = concurrency;
        spec.label = format!("{}, C={concurrency}", spec.label);
        spec.setup["concurrency"] = concurrency.into();
        let summary = load::run(spec).await?;
        self.record(&summary)?;
        Ok(summary)
    }

    async fn gateway(&mut self) -> anyhow::Result<()> {
        let args = json!({"text": "hello"});
        let hangar = self.start_hangar(1, false).await?;
        for (wire, name) in [(Wire::Modern, "2026-07-28"), (Wire::Legacy, "legacy session")] {
            let call = hangar_call_to(wire, "s0", &args)?;
            let spec = self.mcp_load(&hangar, format!("hangar_call {name}"), vec![call], wire, Check::HangarCall);
            self.sequential_and_parallel(spec, &format!("hangar_call ({name})"), true).await?;
        }
        drop(hangar);

        let hangar = self.start_hangar(1, true).await?;
        for (wire, name) in [(Wire::Modern, "2026-07-28"), (Wire::Legacy, "legacy session")] {
            let call = Call::new(wire, "echo", &args)?;
            let spec = self.mcp_load(&hangar, format!("front door echo {name}"), vec![call], wire, Check::Tool);
            self.sequential_and_parallel(spec, &format!("front door tools/call ({name})"), true).await?;
        }
        Ok(())
    }

    /// Sequential latency rows for `spec` and, if asked, its throughput with parallel clients.
    async fn sequential_and_parallel(&mut self, spec: LoadSpec, row: &str, parallel: bool) -> anyhow::Result<()> {
        let seq = self.measure(spec.clone(), self.sequential()).await?;
        self.latency_rows(row, &seq);
        if parallel {
            let par = self.measure(spec, self.parallel()).await?;
            self.throughput_row(row, &par);
        }
        Ok(())
    }

    // ---- 3. RSS with 1, 10, 100 running upstreams; 6. round-robin over 100

    async fn running(&mut self) -> anyhow::Result<()> {
        for n in self.sizes.running {
            let hangar = self.start_hangar(n, false).await?;
            if n == self.sizes.running[0] {
                let idle = procs::footprint(hangar.pid());
                self.row(format!("RSS hangar, {n} configured, none running"), mib(idle.hangar_kib), "MiB", None);
                print_parts(&idle);
            }
            start_all(&hangar, n).await?;
            let running = procs::footprint(hangar.pid());
            print_parts(&running);
            if running.upstreams != n {
                bail!("expected {n} upstream processes under the supervisor, found {}", running.upstreams);
            }
            self.row(
                format!("RSS hangar (supervisor+api+prober+guardians), {n} running"),
                mib(running.hangar_kib),
                "MiB",
                None,
            );
            self.row(
                format!("  RSS of the {n} upstreams themselves (not above)"),
                mib(running.upstream_kib),
                "MiB",
                None,
            );
            if n >= 100 {
                self.fan_out(&hangar, n).await?;
                // The allocator keeps what the load made it take: the footprint in service.
                let loaded = procs::footprint(hangar.pid());
                print_parts(&loaded);
                self.row(
                    format!("RSS hangar, {n} running, after the throughput runs above"),
                    mib(loaded.hangar_kib),
                    "MiB",
                    None,
                );
            }
        }
        Ok(())
    }

    async fn fan_out(&mut self, hangar: &Hangar, n: usize) -> anyhow::Result<()> {
        let args = json!({"text": "hello"});
        let one = vec![hangar_call_to(Wire::Modern, "s0", &args)?];
        let spec = self.mcp_load(hangar, format!("hangar_call s0 of {n}"), one, Wire::Modern, Check::HangarCall);
        let single = self.measure(spec, self.parallel()).await?;
        let all = (0..n).map(|i| hangar_call_to(Wire::Modern, &format!("s{i}"), &args)).collect::<Result<_, _>>()?;
        let spec = self.mcp_load(hangar, format!("hangar_call round-robin {n}"), all, Wire::Modern, Check::HangarCall);
        let spread = self.measure(spec, self.parallel()).await?;
        self.throughput_row(&format!("hangar_call to 1 of {n} running servers"), &single);
        self.throughput_row(&format!("hangar_call round-robin over {n} running servers"), &spread);
        let ratio = spread.calls_per_s / single.calls_per_s.max(f64::MIN_POSITIVE);
        self.row(format!("  round-robin over {n} / one server"), ratio, "ratio", None);
        Ok(())
    }

    // ---- 4. launch times

    async fn launches(&mut self) -> anyhow::Result<()> {
        let yaml = self.yaml(1, false);
        let (body, mut headers) = mcp::modern_tool_call(
            "hangar_call",
            &json!({"calls": [{"mcp_server": "s0", "tool": "echo", "arguments": {"text": "hello"}}]}),
        )?;
        headers.extend(mcp::base_headers(None)?);
        let mut to_ready = Vec::new();
        let mut to_call = Vec::new();
        for _ in 0..self.sizes.launches {
            let mut hangar = Hangar::launch(&self.supervisor, &yaml)?;
            let ready = hangar.wait_ready(READY_LIMIT).await?;
            let mut conn = Conn::connect(&hangar.mcp).await?;
            let answer = conn.send(Method::POST, &hangar.mcp.path, &headers, body.clone()).await?;
            let called = hangar.launched.elapsed();
            if let Err(why) = mcp::judge(&answer, Check::HangarCall) {
                bail!("the first hangar_call after launch failed: {why}");
            }
            to_ready.push(ready);
            to_call.push(called);
            drop(conn);
            drop(hangar);
        }
        let launches = self.sizes.launches;
        let ready = median_ms(&mut to_ready);
        let call = median_ms(&mut to_call);
        println!("launch to /health/ready: {}", list_ms(&to_ready));
        println!("launch to first hangar_call: {}", list_ms(&to_call));
        self.row(format!("launch to /health/ready (median of {launches})"), ready, "ms", None);
        self.row(format!("launch to first proxied hangar_call (median of {launches})"), call, "ms", None);
        Ok(())
    }

    // ---- 5. listing many cold servers

    async fn cold(&mut self) -> anyhow::Result<()> {
        let n = self.sizes.cold_servers;
        let mut hangar = Hangar::launch(&self.supervisor, &self.yaml(n, false))?;
        let ready = hangar.wait_ready(READY_LIMIT).await?;
        self.row(format!("launch to /health/ready, {n} servers configured (1 launch)"), ms_of(ready), "ms", None);
        let list = hangar.endpoint("/api/mcp_servers")?;
        let states = server_states(&list).await?;
        if states.len() != n || states.iter().any(|s| s != "cold") {
            bail!("expected {n} cold servers, /api/mcp_servers lists {} ({:?}...)", states.len(), states.first());
        }
        let requests = self.sizes.cold_requests;
        let rest = LoadSpec {
            label: format!("GET /api/mcp_servers ({n} cold)"),
            endpoint: list,
            credential: None,
            work: Work::Get,
            stop: Stop::Requests(requests),
            concurrency: 1,
            warmup: requests / 10,
            setup: json!({"suite": "cold", "servers": n}),
        };
        let summary = self.measure(rest, (Stop::Requests(requests), 1)).await?;
        self.cold_rows(&format!("GET /api/mcp_servers, {n} cold servers"), &summary);
        let calls = vec![Call::new(Wire::Modern, "hangar_list", &json!({}))?];
        let mut spec = self.mcp_load(&hangar, format!("hangar_list ({n} cold)"), calls, Wire::Modern, Check::Tool);
        spec.warmup = requests / 10;
        let summary = self.measure(spec, (Stop::Requests(requests), 1)).await?;
        self.cold_rows(&format!("hangar_list, {n} cold servers"), &summary);
        Ok(())
    }

    fn cold_rows(&mut self, what: &str, summary: &Summary) {
        self.row(format!("{what}, p50 of {}", summary.count), stats::ms(summary.p50_ns), "ms", None);
        self.row(format!("{what}, p99 of {}", summary.count), stats::ms(summary.p99_ns), "ms", None);
    }

    fn print_table(&self) {
        println!();
        println!("{:<66} {:>12}  {:<8} {:>9}", "what", "value", "unit", "vs floor");
        for row in &self.rows {
            let value = match row.unit {
                "ms" | "ratio" => format!("{:.3}", row.value),
                _ => format!("{:.1}", row.value),
            };
            let vs = row.vs_floor.map(|r| format!("{r:.2}x")).unwrap_or_default();
            println!("{:<66} {:>12}  {:<8} {:>9}", row.what, value, row.unit, vs);
        }
        println!("(vs floor: latency as a multiple of the floor's, throughput as a fraction of it)");
        if let Some(path) = &self.json {
            for row in &self.rows {
                let round = |x: f64| (x * 1000.0).round() / 1000.0;
                let line = json!({
                    "what": row.what.trim(), "value": round(row.value), "unit": row.unit,
                    "vs_floor": row.vs_floor.map(round),
                });
                if let Err(err) = stats::append_json(path, &line) {
                    eprintln!("hangar-bench: cannot write {}: {err}", path.display());
                    break;
                }
            }
        }
    }
}

fn hangar_call_to(wire: Wire, server: &str, arguments: &Value) -> anyhow::Result<Call> {
    let calls = json!({"calls": [{"mcp_server": server, "tool": "echo", "arguments": arguments}]});
    Call::new(wire, "hangar_call", &calls)
}

/// Starts servers `s0..s{n-1}` through `POST /api/mcp_servers/{id}/start`, a few at a time, then
/// checks that `GET /api/mcp_servers` reads every one `ready`.
async fn start_all(hangar: &Hangar, n: usize) -> anyhow::Result<()> {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS.min(n) {
        let (next, endpoint) = (next.clone(), hangar.mcp.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::connect(&endpoint).await?;
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    return anyhow::Ok(());
                }
                let path = format!("/api/mcp_servers/s{i}/start").parse()?;
                // The API's cross-site guard refuses a POST that does not say it is JSON.
                let json = [(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"))];
                let answer = conn.send(Method::POST, &path, &json, Bytes::new()).await?;
                if answer.status() != 200 {
                    bail!("POST /api/mcp_servers/s{i}/start: HTTP {}: {}", answer.status(), snippet(&answer.body));
                }
            }
        }));
    }
    for task in tasks {
        task.await.context("a start task failed")??;
    }
    let list = hangar.endpoint("/api/mcp_servers")?;
    let deadline = Instant::now() + READY_LIMIT;
    loop {
        let states = server_states(&list).await?;
        let ready = states.iter().filter(|s| *s == "ready").count();
        if ready == n && states.len() == n {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("only {ready} of {n} servers are ready after {READY_LIMIT:?}; the log ends:\n{}", hangar.log_tail());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every server's `state` from `GET /api/mcp_servers`.
async fn server_states(list: &Endpoint) -> anyhow::Result<Vec<String>> {
    let answer = crate::http::once(list, Method::GET, &[], Bytes::new()).await?;
    if answer.status() != 200 {
        bail!("GET /api/mcp_servers: HTTP {}: {}", answer.status(), snippet(&answer.body));
    }
    let body = answer.json()?;
    let servers = body.get("mcp_servers").and_then(Value::as_array).ok_or_else(|| anyhow!("no mcp_servers list"))?;
    Ok(servers.iter().map(|s| s.get("state").and_then(Value::as_str).unwrap_or("?").to_owned()).collect())
}

fn print_parts(footprint: &procs::Footprint) {
    let parts: Vec<String> = footprint.parts.iter().map(|(name, kib)| format!("{name} {:.1}", mib(*kib))).collect();
    println!(
        "RSS MiB: {} = {:.1}; {} upstreams {:.1}",
        parts.join(" + "),
        mib(footprint.hangar_kib),
        footprint.upstreams,
        mib(footprint.upstream_kib)
    );
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn ms_of(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median_ms(samples: &mut [Duration]) -> f64 {
    samples.sort_unstable();
    samples.get(samples.len() / 2).map_or(0.0, |d| ms_of(*d))
}

fn list_ms(samples: &[Duration]) -> String {
    samples.iter().map(|d| format!("{:.1} ms", ms_of(*d))).collect::<Vec<_>>().join(", ")
}

/// The 1-minute load average, from /proc/loadavg.
fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace().next().unwrap_or("?").to_owned()
}
