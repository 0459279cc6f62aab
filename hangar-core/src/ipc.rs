//! The control-socket protocol: versioned, line-delimited JSON.
//!
//! A connection opens with a [`Hello`] each way. The client's proves the control key (the
//! secret the supervisor writes beside its socket at each start, [`Hello::key`]) and names its
//! [`PeerRole`]; the supervisor answers with its own hello only then, and a hello without the
//! right key, of another protocol version included, is refused before anything is served. Then
//! the client sends [`ClientFrame::Request`]s,
//! each with its own `id`, and may have many in flight; the supervisor answers each with a
//! [`ServerFrame::Reply`] carrying that id, in any order. After a `subscribe` request the
//! supervisor also pushes [`ServerFrame::Event`]s. One JSON value per line; no frame is larger
//! than [`MAX_FRAME_BYTES`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::access::{AuthConfig, Caller};
pub use crate::approvals::{Approval, Decide};
pub use crate::call::{Asks, CallEra, CallSpec, Called, CancelBy, Relay, Stance, TakesTasks, Target};
pub use crate::call_requests::{
    AnswerUpstream, AwaitClientAnswer, CancelClientCall, ClientAnswer, Resolve, TaskCancel, TaskFollow, TaskGet,
    TaskUpdate,
};
use crate::front_door::Naming;
use crate::journal::{AuditPage, AuditQuery, EventPage, MinuteCount};
pub use crate::journal::{Events, Rates};
use crate::lifecycle::{State, StopReason};
use crate::record::{LogLine, ServerDetails, ServerSummary, StateChange, ToolRecord};
pub use crate::server_requests::{Check, Forward, Get, Logs, Start, Stop, Tools};
pub use crate::session_requests::{SessionChange, SessionEnd, SessionFollow, SessionOpen, SessionPost, SessionUse};
pub use crate::upstream_tokens::{ConnectBegin, ConnectFinish, ConnectOpen, Connection, ForgetCredentials};

// The error types the protocol carries, defined in modules of their own below this one.
pub use crate::ipc_error::{ErrorKind, IpcError, UPSTREAM_DATA_DETAIL, UPSTREAM_MESSAGE_DETAIL};
pub use crate::reloaded::Reloaded;

/// Bumped on any change an older peer would misread.
pub const PROTOCOL_VERSION: u32 = 8;

/// A peer that sends a longer line is cut off: it is broken or hostile.
pub const MAX_FRAME_BYTES: usize = 64 * 1024 * 1024;

/// The most log lines one request may ask for.
pub const MAX_LOG_LINES: usize = 1000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    /// `supervisor` in the supervisor's hello; in a client's, its [`PeerRole`] (`api`,
    /// `prober`), which bounds what it may ask.
    pub role: String,
    pub version: String,
    /// A client's proof that it is one of the hangar's own processes: the control key, read
    /// from the file the supervisor wrote beside its socket at this start. `None` in the
    /// supervisor's hello.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<KeyProof>,
}

impl Hello {
    /// A hello of this protocol version carrying no key: the supervisor's.
    pub fn new(role: &str) -> Self {
        Hello { protocol: PROTOCOL_VERSION, role: role.into(), version: env!("CARGO_PKG_VERSION").into(), key: None }
    }

    /// A client's hello as `role`, proving `key`.
    pub fn with_key(role: &str, key: KeyProof) -> Self {
        Hello { key: Some(key), ..Hello::new(role) }
    }
}

/// The control key as a client sends it in its hello (64 lower-case hex digits). Its `Debug`
/// never shows it, so no log of a hello carries the key.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct KeyProof(pub String);

impl std::fmt::Debug for KeyProof {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyProof([redacted])")
    }
}

/// Who a client of the control socket is, as its hello names it. The API speaks for the callers
/// it authenticated; the prober only schedules and judges health checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerRole {
    /// `hangar-api`: REST and MCP, on behalf of the callers it authenticated.
    Api,
    /// `hangar-prober`: the health-check schedule and its verdicts.
    Prober,
}

impl PeerRole {
    /// The role a hello names; `None` for any other (it is refused).
    pub fn parse(role: &str) -> Option<PeerRole> {
        match role {
            "api" => Some(PeerRole::Api),
            "prober" => Some(PeerRole::Prober),
            _ => None,
        }
    }

    /// The role's name in a hello.
    pub fn as_str(self) -> &'static str {
        match self {
            PeerRole::Api => "api",
            PeerRole::Prober => "prober",
        }
    }

    /// Whether a peer of this role may send `op` on behalf of `caller`: the API anything (it
    /// authenticated the caller); the prober only what probing needs (its targets, checks,
    /// verdicts, the state changes it follows, heartbeats), and only as the hangar itself.
    pub fn permits(self, caller: &Caller, op: &Request) -> Result<(), IpcError> {
        if self == PeerRole::Api {
            return Ok(());
        }
        if *caller != Caller::hangar() {
            return Err(IpcError::forbidden(
                "the prober may not send a caller identity; only the API speaks for callers",
            ));
        }
        match op {
            Request::Ping
            | Request::Subscribe
            | Request::Targets
            | Request::Check(Check { .. })
            | Request::Verdict(_) => Ok(()),
            _ => Err(IpcError::forbidden(
                "the prober may send only ping, subscribe, targets, check and verdict requests",
            )),
        }
    }
}

impl std::fmt::Display for PeerRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientFrame {
    Hello(Hello),
    /// `caller`: who asks, as the API authenticated them ([`Caller::hangar`] for the hangar's
    /// own clients); the supervisor answers within that caller's view. Only a peer whose hello
    /// named [`PeerRole::Api`] may name another caller than the hangar ([`PeerRole::permits`]).
    Request {
        id: u64,
        op: Request,
        caller: Caller,
    },
    /// The caller gave up on request `id` (its own client went away): stop it, and cancel the
    /// upstream call it made.
    Cancel {
        id: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Request {
    /// Every server the caller's view sees. Answers [`Reply::Servers`].
    List,
    /// One server's record. See [`Get`].
    Get(Get),
    /// Starts a server. See [`Start`].
    Start(Start),
    /// Stops a server. See [`Stop`].
    Stop(Stop),
    /// A server's tools. See [`Tools`].
    Tools(Tools),
    /// A server's last log lines. See [`Logs`].
    Logs(Logs),
    /// A tool call, or a `hangar_call` batch, with the stance of the client that makes it (see
    /// [`CallSpec`]); starts a cold server first. Answers [`Reply::Called`] (the upstream's
    /// `tools/call` result, or the batch's), or [`Reply::Task`] (a `CreateTaskResult`) when a
    /// client that takes tasks was not answered within its shortcut.
    Call(Box<CallSpec>),
    /// Push every state change on this connection from now on.
    Subscribe,
    /// Answered [`Reply::Pong`] at once: a client's heartbeat, so it knows the supervisor still
    /// answers when nothing else is asked.
    Ping,
    /// What the prober should check, and when (see [`ProbeTarget`]).
    Targets,
    /// A health check of one server, for the prober. See [`Check`].
    Check(Check),
    /// The prober's judgement of a check, which the supervisor applies to the server's state.
    Verdict(Verdict),
    /// A snapshot of every server's counters for `/metrics`.
    Metrics,
    /// Every server's tools as it declared them, for the front door. In front-door mode, servers
    /// never started yet are started once to learn them.
    Catalog,
    /// Whether the front door is on, and the servers it serves, in config order: the catalog
    /// without the tool declarations (servers never started are started the same way).
    FrontDoor,
    /// Where a front-door tool name leads, before a streamed call by it. See [`Resolve`].
    Resolve(Resolve),
    /// Re-read the config file (as SIGHUP does); answers what changed.
    Reload,
    /// The `auth:` block of the running config, so every API instance authenticates with the
    /// same keys (asked on every connection and after [`ServerFrame::AuthChanged`]). Only for
    /// the all-seeing caller.
    Auth,
    /// The audit trail, as the caller's view sees it (admins: everything; others: their own
    /// servers). Answers [`Reply::Audit`].
    Audit(AuditQuery),
    /// Journal events, as the caller's view sees them. See [`Events`].
    Events(Events),
    /// Tool calls and their failures per minute. See [`Rates`].
    Rates(Rates),
    /// Who the caller is, as the supervisor judges it: identity, profile, and whether its view
    /// may act (start, stop, logs, reload). Answers [`Reply::WhoAmI`].
    WhoAmI,
    /// Any other MCP request to one upstream, never a `tools/call`. See [`Forward`].
    Forward(Forward),
    /// A legacy (2025-11-25 and older) session begins. See [`SessionOpen`].
    SessionOpen(SessionOpen),
    /// A request in a session. See [`SessionUse`].
    SessionUse(SessionUse),
    /// A session ends. See [`SessionEnd`].
    SessionEnd(SessionEnd),
    /// A message for a session's stream. See [`SessionPost`].
    SessionPost(SessionPost),
    /// Holds a session's stream. See [`SessionFollow`].
    SessionFollow(SessionFollow),
    /// `tasks/get`: the task as its creator sees it. See [`TaskGet`].
    TaskGet(TaskGet),
    /// `tasks/update`: answers to a task's `inputRequests`. See [`TaskUpdate`].
    TaskUpdate(TaskUpdate),
    /// `tasks/cancel`: stops the task's call. See [`TaskCancel`].
    TaskCancel(TaskCancel),
    /// A legacy client's `notifications/cancelled` of its own call. See [`CancelClientCall`].
    CancelClientCall(CancelClientCall),
    /// Waits for a legacy client's answer to a server-to-client request. See [`AwaitClientAnswer`].
    AwaitClientAnswer(AwaitClientAnswer),
    /// A legacy client's answer to a server-to-client request. See [`ClientAnswer`].
    ClientAnswer(ClientAnswer),
    /// A client's answer to an upstream's own request that a call relayed. See [`AnswerUpstream`].
    AnswerUpstream(AnswerUpstream),
    /// Status notifications of the caller's own tasks. See [`TaskFollow`].
    TaskFollow(TaskFollow),
    /// The `cluster:` block of the config the supervisor started with (its `advertise` expanded),
    /// or `None` for a hangar on its own: asked by each API instance on every connection. Only
    /// for the all-seeing caller. Answers [`Reply::Cluster`].
    Cluster,
    /// The caller's own upstream connections (tokens the hangar stores for it), never a token.
    /// Answers [`Reply::Credentials`].
    Credentials,
    /// Forgets the caller's own connections to one server. See [`ForgetCredentials`].
    ForgetCredentials(ForgetCredentials),
    /// Mints a connect flow for the caller on one server. See [`ConnectBegin`].
    ConnectBegin(ConnectBegin),
    /// A browser opened a connect URL. See [`ConnectOpen`]. Public: no caller needed.
    ConnectOpen(ConnectOpen),
    /// The authorization server's answer came back. See [`ConnectFinish`]. Public.
    ConnectFinish(ConnectFinish),
    /// The Client ID Metadata Document the API serves at `/oauth/client.json`. Public.
    /// Answers [`Reply::ClientMetadata`].
    ClientMetadata,
    /// Approvals pending and recent, as the caller's view sees them (an admin or approver:
    /// all; anyone else: its own). Answers [`Reply::Approvals`].
    Approvals,
    /// A person's decision on a pending approval. See [`Decide`].
    Decide(Decide),
    /// The tool calls running upstream now, as the caller's view sees them (admins: all; anyone
    /// else: its own). Answers [`Reply::InFlight`].
    InFlight,
    /// Calls, errors and latency of the last hour per server and tool, for the servers the
    /// caller's view sees. Answers [`Reply::CallStats`].
    CallStats,
    /// Who is connected: open sessions and the identities seen, with their traffic (admins: all;
    /// anyone else: its own). Answers [`Reply::Clients`].
    Clients,
}

/// The most tasks one [`Request::TaskFollow`] follows.
pub const MAX_FOLLOWED_TASKS: usize = 64;

/// A legacy session as the supervisor keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    /// The negotiated protocol version.
    pub version: String,
    /// The client's `initialize` capabilities.
    pub capabilities: Value,
    /// The level `logging/setLevel` set, if any.
    pub log_level: Option<String>,
    /// The resource URIs it subscribed to.
    pub subscriptions: Vec<String>,
}

/// What the front door serves: whether it is on, and each server's tools as declared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    pub front_door: bool,
    pub servers: Vec<CatalogServer>,
    /// How the front door names what the servers declare.
    #[serde(default)]
    pub naming: Naming,
}

/// The answer to [`Request::FrontDoor`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrontDoor {
    pub front_door: bool,
    pub servers: Vec<String>,
    /// How the front door names what the servers declare.
    #[serde(default)]
    pub naming: Naming,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CatalogServer {
    pub mcp_server: String,
    /// Each tool's declaration as the upstream sent it (name, description, schemas, annotations).
    pub tools: Vec<Value>,
}

/// A server the prober should check: every `interval_ms`, the next one `due_in_ms` from now
/// (so checks resume where they were due after the prober restarts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeTarget {
    pub mcp_server: String,
    pub interval_ms: u64,
    pub timeout_ms: u64,
    pub due_in_ms: u64,
}

/// What a check saw. `generation` names the process it reached, so a verdict about a process
/// that has since been replaced is ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckOutcome {
    pub generation: u64,
    pub ok: bool,
    pub duration_ms: u64,
    /// Why it failed, as an [`ErrorKind`] name (`timeout`, `upstream_error`, ...).
    pub error_type: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub mcp_server: String,
    pub generation: u64,
    pub healthy: bool,
    pub duration_ms: u64,
    pub error_type: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerFrame {
    Hello(Hello),
    Reply {
        id: u64,
        outcome: Outcome,
    },
    Event(StateChange),
    /// A server's tool list changed (to subscribers, like `Event`).
    ToolsChanged {
        mcp_server_id: String,
    },
    /// The config was reloaded: its `auth:` block may have changed (to subscribers).
    AuthChanged,
    /// An upstream notification about request `id` (see [`Relay`]), sent before its reply.
    Notice {
        id: u64,
        message: Value,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok(Reply),
    Err(IpcError),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    Servers(Vec<ServerSummary>),
    Server(Box<ServerDetails>),
    Started(Started),
    Stopped(Stopped),
    Tools(Vec<ToolRecord>),
    Logs(Vec<LogLine>),
    /// The upstream's own `tools/call` result.
    Called(Value),
    Subscribed,
    Pong,
    Targets(Vec<ProbeTarget>),
    Checked(CheckOutcome),
    /// The verdict was applied; the server's state after it.
    Applied {
        state: State,
    },
    Metrics(Box<crate::metrics::MetricsSnapshot>),
    Catalog(Catalog),
    FrontDoor(FrontDoor),
    /// An upstream's result for a `Forward`.
    Forwarded(Value),
    Reloaded(Reloaded),
    Auth(AuthConfig),
    Audit(AuditPage),
    Events(EventPage),
    Rates(Vec<MinuteCount>),
    WhoAmI(WhoAmI),
    /// Where a [`Request::Resolve`] name leads.
    Resolved {
        mcp_server: String,
        tool: String,
    },
    /// A legacy session's state (after the change asked for, if any).
    Session(SessionState),
    /// The session is gone: ended by `SessionEnd`, or its followed stream is over.
    SessionEnded,
    /// The message is on its way to the session's stream (or queued until one follows it).
    Posted,
    /// The answer to a task request, in the tasks extension's wire shape.
    Task(Value),
    /// Whether a [`Request::CancelClientCall`] found the call running.
    ClientCancelled {
        found: bool,
    },
    /// The client's response message to a server-to-client request.
    ClientAnswered(Value),
    /// Whether a [`Request::ClientAnswer`] found someone waiting for it.
    ClientAnswerDelivered {
        found: bool,
    },
    /// Whether an [`Request::AnswerUpstream`] found the upstream's request still waiting.
    UpstreamAnswered {
        found: bool,
    },
    /// The answer to [`Request::Cluster`]: the block names the secret's file, never the secret.
    Cluster(Option<crate::cluster::ClusterConfig>),
    Credentials(Vec<Connection>),
    CredentialsForgotten {
        forgotten: usize,
    },
    /// The answer to [`Request::ConnectBegin`]: the URL the caller opens in a browser, and when
    /// it stops working (RFC 3339).
    ConnectUrl {
        url: String,
        expires_at: String,
    },
    /// The answer to [`Request::ConnectOpen`]: where the browser goes to sign in.
    ConnectRedirect {
        authorize_url: String,
    },
    /// The answer to [`Request::ConnectFinish`]: the server now connected for the flow's
    /// identity.
    Connected {
        mcp_server: String,
    },
    /// The answer to [`Request::ClientMetadata`]: the document, as JSON.
    ClientMetadata {
        document: Value,
    },
    /// The answer to [`Request::Approvals`]: pending ones first (oldest first), then recent
    /// ones (newest first).
    Approvals(Vec<Approval>),
    /// The answer to [`Request::Decide`]: the approval as decided.
    Decided(Box<Approval>),
    /// The answer to [`Request::InFlight`], the longest running first.
    InFlight(Vec<CallInFlight>),
    /// The answer to [`Request::CallStats`].
    CallStats(crate::call_stats::CallStats),
    /// The answer to [`Request::Clients`].
    Clients(Clients),
}

/// `GET /api/clients`: the sessions open now and the identities seen since the hangar
/// started, as the caller may see them (an admin: all; anyone else: its own).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clients {
    /// Open legacy (2025-11-25 and older) sessions, the most recently used first. A 2026-07-28
    /// client holds no session: it shows as its identity's traffic.
    pub sessions: Vec<ClientSession>,
    /// Identities with their traffic, the most recently seen first.
    pub identities: Vec<IdentityTraffic>,
}

/// One open session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientSession {
    /// The first 8 characters of its id and an ellipsis: enough to tell sessions apart, never
    /// enough to use one.
    pub session: String,
    pub identity: String,
    pub protocol_version: String,
    /// The client's own `clientInfo` name and version, as it said them (bounded).
    pub client: Option<String>,
    /// RFC 3339.
    pub opened_at: String,
    pub last_used_at: String,
    /// Requests made in it.
    pub requests: u64,
    /// Whether someone holds its stream now.
    pub streaming: bool,
}

/// One identity's traffic since the hangar started (at most 10,000 identities are kept, the
/// least recently seen forgotten first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityTraffic {
    pub identity: String,
    pub profile: Option<String>,
    /// RFC 3339.
    pub first_seen: String,
    pub last_seen: String,
    /// Requests of every kind the supervisor answered for it.
    pub requests: u64,
    /// Tool calls it made (each of a batch's, a task's run), and those that failed.
    pub calls: u64,
    pub errors: u64,
    /// Its sessions open now.
    pub sessions: u64,
}

/// A tool call running upstream now (`GET /api/calls`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallInFlight {
    /// The server, or an isolated server's instance (`<server>@<label>`).
    pub mcp_server: String,
    pub tool: String,
    pub identity: String,
    /// RFC 3339, when it was sent upstream.
    pub started_at: String,
    pub elapsed_ms: u64,
}

/// `GET /api/whoami`: who a request is for. `admin` is the supervisor's decision (the caller's
/// view), so a page shows admin controls exactly when the supervisor would accept them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhoAmI {
    pub identity: String,
    pub profile: Option<String>,
    pub admin: bool,
    /// May decide approvals (an admin, or a profile with `approver: true`).
    #[serde(default)]
    pub approver: bool,
    /// The hangar's own MCP tools (`hangar_*`) its view lists and may call
    /// (`policy::View::own_tools`); `/mcp` shows and runs no other.
    #[serde(default)]
    pub hangar_tools: Vec<String>,
}

/// `POST /api/mcp_servers/{id}/start` and `hangar_start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Started {
    pub mcp_server: String,
    pub state: State,
    pub tools: Vec<String>,
}

/// `POST /api/mcp_servers/{id}/stop` and `hangar_stop`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stopped {
    pub stopped: String,
    pub reason: StopReason,
}

/// One frame as a line, newline included.
pub fn encode<T: Serialize>(frame: &T) -> Vec<u8> {
    // Serializing these types cannot fail: every map key is a string.
    let mut line = serde_json::to_vec(frame).unwrap_or_else(|_| b"{}".to_vec());
    line.push(b'\n');
    line
}

/// A frame from one line (with or without its newline).
pub fn decode<'a, T: Deserialize<'a>>(line: &'a [u8]) -> Result<T, serde_json::Error> {
    serde_json::from_slice(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hello_shows_its_key_to_no_log() {
        let hello = Hello::with_key("api", KeyProof("c0ffee".repeat(10)));
        assert!(!format!("{hello:?}").contains("c0ffee"), "{hello:?}");
        let wire = String::from_utf8(encode(&ClientFrame::Hello(hello))).unwrap();
        assert!(wire.contains(r#""key":"c0ffee"#), "{wire}");
        // An older hello (no key) still reads, so it can be refused for what it lacks.
        let old = br#"{"hello":{"protocol":6,"role":"api","version":"0"}}"#;
        assert!(matches!(decode::<ClientFrame>(old), Ok(ClientFrame::Hello(Hello { key: None, .. }))));
    }

    #[test]
    fn only_the_api_speaks_for_callers_and_the_prober_only_probes() {
        let alice = Caller { identity: "alice".into(), profile: Some("dev".into()) };
        let hangar = Caller::hangar();
        let api = PeerRole::parse("api").unwrap();
        let prober = PeerRole::parse("prober").unwrap();
        assert_eq!(PeerRole::parse("operator"), None);
        assert_eq!(PeerRole::parse("supervisor"), None);
        assert!(api.permits(&alice, &Request::List).is_ok());
        assert!(api.permits(&hangar, &Request::Auth).is_ok());
        let verdict =
            Verdict { mcp_server: "m".into(), generation: 1, healthy: true, duration_ms: 1, error_type: None };
        let probing = [
            Request::Ping,
            Request::Subscribe,
            Request::Targets,
            Request::Check(Check { mcp_server: "m".into(), timeout_ms: 5 }),
            Request::Verdict(verdict),
        ];
        for op in &probing {
            assert!(prober.permits(&hangar, op).is_ok(), "{op:?}");
            let err = prober.permits(&alice, op).unwrap_err();
            assert_eq!(err.kind, ErrorKind::Forbidden, "{op:?} as alice");
        }
        let anonymous = Caller::anonymous();
        for op in [Request::List, Request::Auth, Request::Audit(AuditQuery::default()), Request::Reload] {
            assert_eq!(prober.permits(&hangar, &op).unwrap_err().kind, ErrorKind::Forbidden, "{op:?}");
            assert_eq!(prober.permits(&anonymous, &op).unwrap_err().kind, ErrorKind::Forbidden, "{op:?}");
        }
    }

    #[test]
    fn frames_round_trip_as_single_lines() {
        let frames = [
            ClientFrame::Hello(Hello::new("api")),
            ClientFrame::Hello(Hello::with_key("prober", KeyProof("ab".repeat(32)))),
            ClientFrame::Request { id: 7, op: Request::List, caller: Caller::hangar() },
            ClientFrame::Request {
                id: 8,
                caller: Caller { identity: "ci-bot".into(), profile: Some("ci".into()) },
                op: Request::Call(Box::new(CallSpec {
                    called: Called::One {
                        target: Target::tool("math", "add"),
                        arguments: serde_json::json!({"a": "x\ny"}),
                        timeout_ms: Some(5),
                    },
                    stance: Stance {
                        era: CallEra::Modern,
                        asks: Asks { sampling: true, ..Asks::default() },
                        tasks: Some(TakesTasks { shortcut_ms: 250 }),
                        cancel_by: Some(CancelBy { session: "s".into(), request_id: serde_json::json!(3) }),
                    },
                    relay: Relay { progress: true, logs: false, asks: false },
                    extra: Some(serde_json::json!({"requestState": "s"})),
                    trace: crate::trace::TraceContext::parse(
                        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                        Some("a=b"),
                    ),
                    param_headers: Some(Box::new([("region".to_owned(), "eu".to_owned())].into())),
                    subject_token: Some(crate::credential::Secret::new("eyJ.subject")),
                    unchecked_session: Some("hgr1-2025-11-25-0123456789abcdef0123456789abcdef".into()),
                })),
            },
            ClientFrame::Request {
                id: 9,
                op: Request::Resolve(Resolve {
                    name: "math__add".into(),
                    param_check: Some(Box::new(crate::custom_headers::ParamCheck {
                        headers: [("region".to_owned(), "eu".to_owned())].into(),
                        arguments: serde_json::json!({"region": "eu"}),
                    })),
                    stance: Some(Stance { era: CallEra::Modern, ..Stance::default() }),
                }),
                caller: Caller::anonymous(),
            },
            ClientFrame::Cancel { id: 8 },
        ];
        for frame in frames {
            let line = encode(&frame);
            assert_eq!(line.iter().filter(|b| **b == b'\n').count(), 1, "exactly one newline, at the end");
            assert_eq!(decode::<ClientFrame>(&line).unwrap(), frame);
        }
    }

    #[test]
    fn a_call_without_relay_keeps_the_old_shape() {
        let call =
            Request::Call(Box::new(CallSpec::one(Target::Exposed { name: "t".into() }, serde_json::json!({}), None)));
        let line = encode(&ClientFrame::Request { id: 1, op: call.clone(), caller: Caller::hangar() });
        assert!(!String::from_utf8_lossy(&line).contains("relay"));
        assert!(!String::from_utf8_lossy(&line).contains("trace"));
        assert_eq!(
            decode::<ClientFrame>(&line).unwrap(),
            ClientFrame::Request { id: 1, op: call, caller: Caller::hangar() }
        );
    }

    #[test]
    fn wire_shape_is_stable() {
        let line = encode(&ClientFrame::Request {
            id: 1,
            op: Request::Get(Get { mcp_server: "m".into() }),
            caller: Caller { identity: "alice".into(), profile: Some("dev".into()) },
        });
        assert_eq!(
            std::str::from_utf8(&line).unwrap(),
            "{\"request\":{\"id\":1,\"op\":{\"get\":{\"mcp_server\":\"m\"}},\"caller\":{\"identity\":\"alice\",\"profile\":\"dev\"}}}\n"
        );
        let reply = encode(&ServerFrame::Reply { id: 1, outcome: Outcome::Err(IpcError::not_found("m")) });
        let value: Value = serde_json::from_slice(&reply).unwrap();
        assert_eq!(value["reply"]["outcome"]["err"]["kind"], "not_found");
    }

    #[test]
    fn a_variants_body_reads_as_the_fields_it_had_inline() {
        let read = |text: &str| serde_json::from_str::<Request>(text).unwrap();
        assert_eq!(
            read(r#"{"events":{"since":3}}"#),
            Request::Events(Events { since: Some(3), limit: None, follow: false })
        );
        assert_eq!(
            read(r#"{"session_use":{"session_id":"s"}}"#),
            Request::SessionUse(SessionUse { session_id: "s".into(), change: None })
        );
        assert_eq!(read(r#""list""#), Request::List);
        let forward = Request::Forward(Forward {
            mcp_server: "m".into(),
            method: "prompts/list".into(),
            params: Value::Null,
            timeout_ms: None,
            session: None,
        });
        assert_eq!(
            serde_json::to_value(&forward).unwrap(),
            serde_json::json!({"forward": {"mcp_server": "m", "method": "prompts/list", "params": null, "timeout_ms": null}})
        );
    }

    #[test]
    fn garbage_is_an_error() {
        for line in [
            &b"not json"[..],
            b"{\"request\":{\"id\":-1,\"op\":\"list\"}}",
            b"{\"request\":{\"id\":1,\"op\":\"explode\"}}",
            // A request without its caller is refused, never taken as all-seeing.
            b"{\"request\":{\"id\":1,\"op\":\"list\"}}",
            b"[]",
        ] {
            assert!(decode::<ClientFrame>(line).is_err());
        }
    }
}
