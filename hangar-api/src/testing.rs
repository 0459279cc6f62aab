//! An in-memory supervisor for tests: scripted servers and calls, and counters to assert on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request as HttpRequest, StatusCode};
use hangar_core::access::Caller;
use hangar_core::ipc::{
    Called, ErrorKind, Get, IpcError, Logs, Reply, Request, SessionEnd, SessionFollow, SessionOpen, SessionPost,
    SessionUse, Start, Started, Stop, Stopped, Target, Tools,
};
use hangar_core::lifecycle::{DeadReason, RevivedBy, State, StopReason};
use hangar_core::metrics::{Histogram, MetricsSnapshot, ServerMetrics};
use hangar_core::record::{DeadRecord, Health, LogLine, Meta, ServerDetails, ServerSummary, ToolInfo, ToolRecord};
use hangar_core::sync::Unpoisoned;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::app::router;
use crate::state::{AppState, Calling};
use crate::supervisor::{AsCaller, BoxFuture, Readiness, Supervisor};

pub struct FakeSupervisor {
    pub servers: Vec<ServerSummary>,
    pub connected: AtomicBool,
    in_flight: AtomicUsize,
    pub peak_in_flight: AtomicUsize,
    /// `mcp_server/tool` of each call, in the order they started.
    pub started_calls: Mutex<Vec<String>>,
    /// Every request received, for asserting what was forwarded.
    pub requests: Mutex<Vec<Request>>,
    /// Who each request named.
    pub callers: Mutex<Vec<Caller>>,
    /// Legacy sessions ended with `SessionEnd`; every other id is taken as live.
    pub ended_sessions: Mutex<Vec<String>>,
}

pub fn summary(id: &str, state: State) -> ServerSummary {
    let dead = (state == State::Dead).then(|| DeadRecord {
        reason: DeadReason::Crashed,
        since: "2026-11-29T23:20:23.427Z".into(),
        retry_allowed_at: Some("2026-11-29T23:20:27.822Z".into()),
        revived_by: RevivedBy::CallOrStart,
        detail: None,
    });
    ServerSummary {
        mcp_server_id: id.into(),
        state,
        mode: "subprocess".into(),
        alive: state == State::Ready,
        tools_count: 1,
        health_status: if state == State::Ready { "healthy" } else { "unknown" }.into(),
        dead,
        last_change: None,
        isolation: Default::default(),
        instances: Vec::new(),
    }
}

impl FakeSupervisor {
    /// `math` ready, `web` cold, `broken` dead.
    pub fn new() -> Arc<Self> {
        FakeSupervisor::with_servers(vec![
            summary("math", State::Ready),
            summary("web", State::Cold),
            summary("broken", State::Dead),
        ])
    }

    pub fn with_servers(servers: Vec<ServerSummary>) -> Arc<Self> {
        Arc::new(FakeSupervisor {
            servers,
            connected: AtomicBool::new(true),
            in_flight: AtomicUsize::new(0),
            peak_in_flight: AtomicUsize::new(0),
            started_calls: Mutex::new(Vec::new()),
            ended_sessions: Mutex::new(Vec::new()),
            requests: Mutex::new(Vec::new()),
            callers: Mutex::new(Vec::new()),
        })
    }

    pub fn disconnected() -> Arc<Self> {
        let fake = FakeSupervisor::new();
        fake.connected.store(false, Ordering::SeqCst);
        fake
    }

    fn find(&self, id: &str) -> Result<&ServerSummary, IpcError> {
        self.servers.iter().find(|s| s.mcp_server_id == id).ok_or_else(|| IpcError::not_found(id))
    }

    async fn answer(&self, request: Request) -> Result<Reply, IpcError> {
        self.requests.lock().unwrap().push(request.clone());
        if !self.connected.load(Ordering::SeqCst) {
            return Err(IpcError::new(
                ErrorKind::SupervisorUnavailable,
                "the supervisor is not reachable at /fake.sock",
            ));
        }
        let posted = matches!(request, Request::SessionPost(_));
        match request {
            Request::List => Ok(Reply::Servers(self.servers.clone())),
            Request::Get(Get { mcp_server }) => {
                let s = self.find(&mcp_server)?;
                Ok(Reply::Server(Box::new(ServerDetails {
                    mcp_server_id: s.mcp_server_id.clone(),
                    state: s.state,
                    mode: s.mode.clone(),
                    alive: s.alive,
                    tools: vec![tool_info("add")],
                    tools_source: Default::default(),
                    health: Health::default(),
                    meta: Meta { program: "fake".into(), ..Meta::default() },
                    dead: s.dead.clone(),
                    sandbox: None,
                    auth: None,
                    isolation: Default::default(),
                    instances: Vec::new(),
                    config: None,
                    process: None,
                })))
            }
            Request::Start(Start { mcp_server }) => {
                let s = self.find(&mcp_server)?;
                if s.state == State::Dead {
                    return Err(IpcError::new(ErrorKind::RetryLater, "backoff")
                        .with_details(json!({"retry_allowed_at": "2026-11-29T23:20:27.822Z"})));
                }
                Ok(Reply::Started(Started { mcp_server, state: State::Ready, tools: vec!["add".into()] }))
            }
            Request::Stop(Stop { mcp_server }) => {
                self.find(&mcp_server)?;
                Ok(Reply::Stopped(Stopped { stopped: mcp_server, reason: StopReason::UserRequest }))
            }
            Request::Tools(Tools { mcp_server }) => {
                self.find(&mcp_server)?;
                Ok(Reply::Tools(vec![ToolRecord { tool: tool_info("add"), digest: "sha256:00".into() }]))
            }
            Request::Logs(Logs { mcp_server, lines }) => {
                self.find(&mcp_server)?;
                let line = |n: usize| LogLine {
                    mcp_server_id: mcp_server.clone(),
                    stream: "stderr".into(),
                    content: format!("line {n}"),
                    recorded_at: "2026-11-29T23:20:23.427Z".into(),
                };
                Ok(Reply::Logs((0..lines.min(3)).map(line).collect()))
            }
            // Runs plain calls by server and tool only; no task, batch or question runs here.
            Request::Call(spec) => match spec.called {
                Called::One { target: Target::Tool { mcp_server, tool }, arguments, .. } => {
                    self.call(mcp_server, tool, arguments).await
                }
                // Egress mode: no front-door name leads anywhere.
                Called::One { target: Target::Exposed { name }, .. } => Err(unknown_tool(&name)),
                Called::Batch(_) => Err(IpcError::new(ErrorKind::Internal, "the fake supervisor runs no batch")),
            },
            Request::Resolve(resolve) => Err(unknown_tool(&resolve.name)),
            Request::Subscribe => Ok(Reply::Subscribed),
            Request::Ping => Ok(Reply::Pong),
            Request::Metrics => Ok(Reply::Metrics(Box::new(self.metrics_snapshot()))),
            // Egress mode: the front door is off, so nothing is forwarded.
            Request::Catalog => Ok(Reply::Catalog(hangar_core::ipc::Catalog {
                front_door: false,
                servers: Vec::new(),
                naming: Default::default(),
            })),
            Request::FrontDoor => Ok(Reply::FrontDoor(hangar_core::ipc::FrontDoor {
                front_door: false,
                servers: Vec::new(),
                naming: Default::default(),
            })),
            Request::Reload => Ok(Reply::Reloaded(Default::default())),
            Request::Auth => Ok(Reply::Auth(Default::default())),
            Request::Cluster => Ok(Reply::Cluster(None)),
            // The fake has no profiles: everyone is the all-seeing anonymous caller.
            Request::WhoAmI => Ok(Reply::WhoAmI(hangar_core::ipc::WhoAmI {
                identity: hangar_core::access::ANONYMOUS.into(),
                profile: None,
                admin: true,
                approver: true,
                hangar_tools: hangar_core::policy::OWN_TOOLS.map(str::to_owned).to_vec(),
            })),
            Request::SessionOpen(SessionOpen { session_id, .. })
            | Request::SessionUse(SessionUse { session_id, .. })
            | Request::SessionPost(SessionPost { session_id, .. }) => {
                if self.ended_sessions.lock().unwrap().contains(&session_id) {
                    return Err(IpcError::new(ErrorKind::NotFound, "no such session"));
                }
                let state = hangar_core::ipc::SessionState {
                    version: "2025-11-25".into(),
                    capabilities: json!({}),
                    log_level: None,
                    subscriptions: vec![],
                };
                Ok(if posted { Reply::Posted } else { Reply::Session(state) })
            }
            Request::SessionEnd(SessionEnd { session_id }) => {
                self.ended_sessions.lock().unwrap().push(session_id);
                Ok(Reply::SessionEnded)
            }
            Request::SessionFollow(SessionFollow { .. }) => Ok(Reply::SessionEnded),
            // Legacy sessions' requests both ways: nothing runs, nobody waits.
            Request::CancelClientCall(_) => Ok(Reply::ClientCancelled { found: false }),
            Request::ClientAnswer(_) => Ok(Reply::ClientAnswerDelivered { found: false }),
            Request::AnswerUpstream(_) => Ok(Reply::UpstreamAnswered { found: false }),
            // No task runs here: nothing to hear of.
            Request::TaskFollow(_) => Ok(Reply::Task(serde_json::json!({}))),
            // Forwards, tasks, the journal, the prober's requests, questions to clients: the unit
            // tests that use the fake send none of them (the e2e stories drive the real ones).
            other => Err(IpcError::new(ErrorKind::Internal, format!("the fake supervisor does not answer {other:?}"))),
        }
    }

    /// One entry per server, in its state, with a call or two on record.
    pub fn metrics_snapshot(&self) -> MetricsSnapshot {
        let mut call_latency = Histogram::default();
        call_latency.observe(0.002);
        let server = |s: &ServerSummary| ServerMetrics {
            mcp_server_id: s.mcp_server_id.clone(),
            state: s.state,
            starts: 1,
            stops: [("idle".to_string(), 1)].into(),
            deaths: Default::default(),
            tool_calls: 1,
            tool_call_errors: 0,
            call_latency: call_latency.clone(),
            health_checks_ok: 2,
            health_checks_failed: 1,
            capability_violations: 0,
            messages_skipped: 0,
            tool_drifts: 0,
            refused: Default::default(),
            tools: Vec::new(),
        };
        MetricsSnapshot { servers: self.servers.iter().map(server).collect(), ..Default::default() }
    }

    /// Tool `fail` fails; `arguments.delay_ms` delays; anything else echoes its arguments.
    async fn call(&self, mcp_server: String, tool: String, arguments: Value) -> Result<Reply, IpcError> {
        self.find(&mcp_server)?;
        self.started_calls.lock().unwrap().push(format!("{mcp_server}/{tool}"));
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak_in_flight.fetch_max(now, Ordering::SeqCst);
        let delay = arguments.get("delay_ms").and_then(Value::as_u64).unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if tool == "fail" {
            return Err(IpcError::new(ErrorKind::UpstreamError, "the upstream answered with an error"));
        }
        Ok(Reply::Called(json!({"content": [{"type": "text", "text": "ok"}], "echo": arguments})))
    }
}

/// No front-door name leads anywhere (egress mode).
fn unknown_tool(name: &str) -> IpcError {
    IpcError::new(ErrorKind::UnknownTool, hangar_core::front_door::Unknown::default().message("tool", name))
}

fn tool_info(name: &str) -> ToolInfo {
    ToolInfo { name: name.into(), description: Some("Adds".into()), input_schema: json!({"type": "object"}) }
}

impl Supervisor for FakeSupervisor {
    fn request(&self, caller: &Caller, request: Request) -> BoxFuture<'_, Result<Reply, IpcError>> {
        self.callers.locked().push(caller.clone());
        Box::pin(self.answer(request))
    }

    fn readiness(&self) -> Readiness {
        if self.connected.load(Ordering::SeqCst) { Readiness::Answering } else { Readiness::Unreachable }
    }
}

pub fn app_with(fake: Arc<FakeSupervisor>) -> Router {
    router(AppState::new(fake))
}

/// The fake as the anonymous caller, for handlers tested without the router.
pub fn as_anonymous(fake: &Arc<FakeSupervisor>) -> AsCaller {
    AsCaller::new(fake.clone(), Caller::anonymous())
}

/// What an MCP handler gets for an anonymous request to the fake.
pub fn calling(fake: Arc<FakeSupervisor>) -> Calling {
    Calling::anonymous(&AppState::new(fake))
}

/// Sends one request through the whole router; gives back status, headers and body text. A
/// request without a `Host` gets a loopback one, as every HTTP/1.1 client sends one.
pub async fn send(app: &Router, mut request: HttpRequest<Body>) -> (StatusCode, axum::http::HeaderMap, String) {
    if !request.headers().contains_key(axum::http::header::HOST) {
        request.headers_mut().insert(axum::http::header::HOST, axum::http::HeaderValue::from_static("127.0.0.1:8000"));
    }
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    (status, headers, String::from_utf8(bytes.to_vec()).unwrap())
}

pub fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}
