//! The HTTP load loop: C clients, each on its own keep-alive connection, one request in flight
//! per client, every latency kept in the client's preallocated vector.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use hyper::Method;
use hyper::header::{HeaderName, HeaderValue};
use serde_json::Value;
use tokio::sync::Barrier;

use crate::http::{Answer, Conn, Endpoint, snippet};
use crate::mcp::{self, Call, Check, Wire};
use crate::stats::Summary;

/// When a run ends.
#[derive(Debug, Clone, Copy)]
pub enum Stop {
    Requests(u64),
    Duration(Duration),
}

impl Stop {
    /// Samples to preallocate per client, so the timed loop never reallocates in the common case.
    fn capacity(self, clients: usize) -> usize {
        match self {
            // A fast client may take more than its share; every client can hold all of them.
            Stop::Requests(n) => usize::try_from(n).unwrap_or(usize::MAX).min(1 << 22),
            Stop::Duration(d) => ((d.as_secs_f64() * 200_000.0 / clients.max(1) as f64) as usize).min(1 << 22),
        }
    }
}

/// What each request is.
#[derive(Debug, Clone)]
pub enum Work {
    /// `tools/call`s, round-robin over `calls` (one entry: always the same call).
    Mcp { wire: Wire, calls: Vec<Call>, check: Check },
    /// A GET that must answer 200 with a JSON body (REST latency).
    Get,
}

#[derive(Debug, Clone)]
pub struct LoadSpec {
    pub label: String,
    pub endpoint: Endpoint,
    pub credential: Option<mcp::Credential>,
    pub work: Work,
    pub stop: Stop,
    pub concurrency: usize,
    /// Requests (over all clients) sent before the timed run and not recorded.
    pub warmup: u64,
    pub setup: Value,
}

struct Shared {
    spec: LoadSpec,
    base: Vec<(HeaderName, HeaderValue)>,
    warmup_sent: AtomicU64,
    sent: AtomicU64,
    next_call: AtomicU64,
    errors: AtomicU64,
    reported: AtomicBool,
    /// A client could not start: the others skip the timed run.
    aborted: AtomicBool,
    /// Per call, every header of a modern request, built once.
    modern_headers: Vec<Vec<(HeaderName, HeaderValue)>>,
}

impl Shared {
    /// Prints the first failure of the run, once.
    fn report(&self, why: &str) {
        if !self.reported.swap(true, Ordering::Relaxed) {
            eprintln!("hangar-bench: {}: first error: {why}", self.spec.label);
        }
    }
}

/// Runs the load and summarizes it. Fails only if a client cannot connect (or hand-shake) at
/// all; failed requests are counted in the summary.
pub async fn run(spec: LoadSpec) -> anyhow::Result<Summary> {
    let clients = spec.concurrency.max(1);
    let base = mcp::base_headers(spec.credential.as_ref())?;
    let modern_headers = match &spec.work {
        Work::Mcp { calls, .. } => {
            calls.iter().map(|call| base.iter().chain(&call.modern_headers).cloned().collect()).collect()
        }
        Work::Get => Vec::new(),
    };
    let shared = Arc::new(Shared {
        base,
        modern_headers,
        spec,
        warmup_sent: AtomicU64::new(0),
        sent: AtomicU64::new(0),
        next_call: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        reported: AtomicBool::new(false),
        aborted: AtomicBool::new(false),
    });
    // Everyone (and this task) meets after connecting and warming up, so the clock starts
    // with every client ready.
    let barrier = Arc::new(Barrier::new(clients + 1));
    let mut tasks = Vec::with_capacity(clients);
    for _ in 0..clients {
        let (shared, barrier) = (shared.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            let mut client = Client::open(&shared).await;
            match &mut client {
                Ok(client) => client.warm_up(&shared).await,
                Err(_) => shared.aborted.store(true, Ordering::Relaxed),
            }
            // Met even on failure, or the others would wait forever.
            barrier.wait().await;
            let mut client = client?;
            if shared.aborted.load(Ordering::Relaxed) {
                return Ok(Vec::new());
            }
            Ok::<_, anyhow::Error>(client.timed(&shared).await)
        }));
    }
    barrier.wait().await;
    let started = Instant::now();
    let mut samples = Vec::with_capacity(clients);
    let mut failure = None;
    for task in tasks {
        match task.await {
            Ok(Ok(client_samples)) => samples.push(client_samples),
            Ok(Err(err)) => failure = Some(err),
            Err(err) => failure = Some(anyhow::anyhow!("a client task failed: {err}")),
        }
    }
    let elapsed = started.elapsed();
    if let Some(err) = failure {
        return Err(err.context(format!("{}: a client could not start", shared.spec.label)));
    }
    let errors = shared.errors.load(Ordering::Relaxed);
    Ok(Summary::new(&shared.spec.label, samples, errors, elapsed, shared.spec.setup.clone()))
}

struct Client {
    conn: Conn,
    /// Headers of every request: the base ones plus the legacy session's.
    headers: Vec<(HeaderName, HeaderValue)>,
    /// The server forgot the legacy session (404): hand-shake again before the next request.
    session_lost: bool,
    next_id: u64,
}

impl Client {
    async fn open(shared: &Shared) -> anyhow::Result<Client> {
        let conn = Conn::connect(&shared.spec.endpoint).await?;
        let mut client = Client { conn, headers: Vec::new(), session_lost: false, next_id: 1 };
        client.handshake(shared).await?;
        Ok(client)
    }

    /// On the legacy wire, a fresh session; a no-op on the others.
    async fn handshake(&mut self, shared: &Shared) -> anyhow::Result<()> {
        self.headers = shared.base.clone();
        if let Work::Mcp { wire: Wire::Legacy, .. } = shared.spec.work {
            let session = mcp::legacy_handshake(&mut self.conn, &shared.spec.endpoint, &shared.base)
                .await
                .context("the legacy handshake failed")?;
            self.headers.extend(session.headers);
        }
        self.session_lost = false;
        Ok(())
    }

    async fn warm_up(&mut self, shared: &Shared) {
        while shared.warmup_sent.fetch_add(1, Ordering::Relaxed) < shared.spec.warmup {
            if let Err(why) = self.one(shared).await {
                shared.report(&format!("(warm-up) {why}"));
            }
        }
    }

    async fn timed(&mut self, shared: &Shared) -> Vec<u64> {
        let stop = shared.spec.stop;
        let mut samples = Vec::with_capacity(stop.capacity(shared.spec.concurrency));
        let deadline = match stop {
            Stop::Duration(d) => Some(Instant::now() + d),
            Stop::Requests(_) => None,
        };
        loop {
            let more = match (stop, deadline) {
                (Stop::Requests(n), _) => shared.sent.fetch_add(1, Ordering::Relaxed) < n,
                (_, Some(deadline)) => Instant::now() < deadline,
                (Stop::Duration(_), None) => false,
            };
            if !more {
                break;
            }
            let started = Instant::now();
            let outcome = self.exchange(shared).await;
            samples.push(u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX));
            // Judged after the clock stopped: parsing the answer is not the server's time.
            if let Err(why) = outcome.and_then(|answer| judge(shared, &answer)) {
                shared.errors.fetch_add(1, Ordering::Relaxed);
                shared.report(&why);
            }
        }
        samples
    }

    /// One request, judged.
    async fn one(&mut self, shared: &Shared) -> Result<(), String> {
        let answer = self.exchange(shared).await?;
        judge(shared, &answer)
    }

    /// One request and its whole answer.
    async fn exchange(&mut self, shared: &Shared) -> Result<Answer, String> {
        if self.session_lost {
            self.handshake(shared).await.map_err(|e| format!("{e:#}"))?;
        }
        let spec = &shared.spec;
        let result = match &spec.work {
            Work::Get => self.conn.get(&spec.endpoint.path, &self.headers).await,
            Work::Mcp { wire, calls, .. } => {
                let index = if calls.len() == 1 {
                    0
                } else {
                    let next = shared.next_call.fetch_add(1, Ordering::Relaxed) % calls.len() as u64;
                    usize::try_from(next).unwrap_or(0)
                };
                match wire {
                    Wire::Modern => {
                        let headers = &shared.modern_headers[index];
                        self.conn.send(Method::POST, &spec.endpoint.path, headers, calls[index].body()).await
                    }
                    Wire::Legacy => {
                        let id = self.next_id;
                        self.next_id += 1;
                        let body = calls[index].body_with_id(id);
                        self.conn.send(Method::POST, &spec.endpoint.path, &self.headers, body).await
                    }
                }
            }
        };
        let answer = result.map_err(|e| format!("{e:#}"))?;
        if answer.status() == 404 && matches!(spec.work, Work::Mcp { wire: Wire::Legacy, .. }) {
            self.session_lost = true;
        }
        Ok(answer)
    }
}

fn judge(shared: &Shared, answer: &Answer) -> Result<(), String> {
    match &shared.spec.work {
        Work::Mcp { check, .. } => mcp::judge(answer, *check),
        Work::Get => {
            if answer.status() != 200 {
                return Err(format!("HTTP {}: {}", answer.status(), snippet(&answer.body)));
            }
            // Checked to be JSON without building it: a 1,000-server list is big.
            serde_json::from_slice::<serde::de::IgnoredAny>(&answer.body)
                .map(drop)
                .map_err(|e| format!("not JSON ({e}): {}", snippet(&answer.body)))
        }
    }
}
