//! What the handlers need from the supervisor, as a small trait.
//!
//! The real implementation is [`hangar_runtime::client::Client`]; tests use an
//! in-memory fake, so no handler needs a socket to be tested. Every request names its caller
//! (the supervisor answers within that caller's view): handlers hold an [`AsCaller`], the
//! supervisor bound to the request's authenticated caller, and never a bare `Supervisor`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use hangar_core::access::Caller;
use hangar_core::credential::Secret;
use hangar_core::custom_headers::ParamCheck;
use hangar_core::ipc::{
    AnswerUpstream, AwaitClientAnswer, CallSpec, CancelBy, CancelClientCall, Catalog, ClientAnswer, ConnectBegin,
    ConnectFinish, ConnectOpen, Connection, ErrorKind, Events, ForgetCredentials, Forward, FrontDoor, Get, IpcError,
    Logs, Rates, Relay, Reloaded, Reply, Request, Resolve, SessionChange, SessionEnd, SessionFollow, SessionOpen,
    SessionPost, SessionState, SessionUse, Stance, Start, Started, Stop, Stopped, Target, TaskFollow, Tools, WhoAmI,
};
use hangar_core::journal::{AuditPage, AuditQuery, MinuteCount};
use hangar_core::metrics::MetricsSnapshot;
use hangar_core::record::{LogLine, ServerDetails, ServerSummary, ToolRecord};
use hangar_core::trace::TraceContext;
pub use hangar_runtime::client::Readiness;
use serde_json::Value;
use tokio::sync::mpsc;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One request/reply exchange with the supervisor.
pub trait Supervisor: Send + Sync + 'static {
    fn request(&self, caller: &Caller, request: Request) -> BoxFuture<'_, Result<Reply, IpcError>>;

    /// A request whose notices (see `ipc::Relay`) arrive on the receiver while it runs.
    /// Dropping the future cancels it at the supervisor. By default nothing is relayed.
    fn request_relayed(
        &self,
        caller: &Caller,
        request: Request,
    ) -> (mpsc::UnboundedReceiver<Value>, BoxFuture<'_, Result<Reply, IpcError>>) {
        (mpsc::unbounded_channel().1, self.request(caller, request))
    }

    /// Whether the supervisor answers (readiness): connected, and heard from recently.
    fn readiness(&self) -> Readiness;
}

impl Supervisor for hangar_runtime::client::Client {
    fn request(&self, caller: &Caller, request: Request) -> BoxFuture<'_, Result<Reply, IpcError>> {
        let caller = caller.clone();
        Box::pin(async move { hangar_runtime::client::Client::request(self, &caller, request).await })
    }

    fn request_relayed(
        &self,
        caller: &Caller,
        request: Request,
    ) -> (mpsc::UnboundedReceiver<Value>, BoxFuture<'_, Result<Reply, IpcError>>) {
        let (notices, reply) = hangar_runtime::client::Client::request_relayed(self, caller, request);
        (notices, Box::pin(reply))
    }

    fn readiness(&self) -> Readiness {
        hangar_runtime::client::Client::readiness(self)
    }
}

/// The supervisor answered with a reply of the wrong kind: a bug on one side, never the user's.
fn unexpected(op: &str) -> IpcError {
    IpcError::new(ErrorKind::Internal, format!("the supervisor answered `{op}` with an unexpected reply"))
}

/// The supervisor as one caller: every request it makes names that caller.
#[derive(Clone)]
pub struct AsCaller {
    supervisor: Arc<dyn Supervisor>,
    caller: Caller,
    /// Where this caller's tool calls sit in a trace: the client's context, or the API's
    /// request span in it (see `mcp::dispatch`).
    trace: Option<TraceContext>,
    /// The legacy session and the client's request id its `hangar_call` calls go under, so the
    /// client's `notifications/cancelled` stops them from any API instance.
    cancellable_by: Option<CancelBy>,
    /// The legacy session its requests come in (`None`: outside any), for the servers that
    /// give each session an instance of its own (`isolation: per_session`).
    session: Option<String>,
    /// The OAuth access token the caller came with, as the API validated it (`None` for a key
    /// caller and the anonymous one): sent with each of its tool calls, for the servers that
    /// exchange it (`auth.token_exchange`). Never logged (`Secret`).
    subject_token: Option<Secret>,
}

impl AsCaller {
    pub fn new(supervisor: Arc<dyn Supervisor>, caller: Caller) -> AsCaller {
        AsCaller { supervisor, caller, trace: None, cancellable_by: None, session: None, subject_token: None }
    }

    /// The same caller, who came with the OAuth access `token` the API validated: its tool
    /// calls carry it ([`CallSpec::subject_token`]).
    pub fn with_subject_token(self, token: Option<Secret>) -> AsCaller {
        AsCaller { subject_token: token, ..self }
    }

    /// The same caller, whose tool calls (by server and name) its client may cancel by
    /// `request_id` in `session` (a legacy session's `hangar_call`).
    pub fn cancellable_by(&self, session: &str, request_id: Value) -> AsCaller {
        AsCaller { cancellable_by: Some(CancelBy { session: session.to_owned(), request_id }), ..self.clone() }
    }

    /// The same caller, in the legacy `session`: what it forwards is that session's.
    pub fn in_session(&self, session: &str) -> AsCaller {
        AsCaller { session: Some(session.to_owned()), ..self.clone() }
    }

    /// The same caller, whose tool calls carry `trace` to the supervisor (and on to the upstream).
    pub fn traced(&self, trace: TraceContext) -> AsCaller {
        AsCaller { trace: Some(trace), ..self.clone() }
    }

    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    fn request(&self, request: Request) -> BoxFuture<'_, Result<Reply, IpcError>> {
        self.supervisor.request(&self.caller, request)
    }

    fn request_relayed(
        &self,
        request: Request,
    ) -> (mpsc::UnboundedReceiver<Value>, BoxFuture<'_, Result<Reply, IpcError>>) {
        self.supervisor.request_relayed(&self.caller, request)
    }
}

/// Typed calls, so handlers never match on [`Reply`] themselves.
impl AsCaller {
    pub async fn list(&self) -> Result<Vec<ServerSummary>, IpcError> {
        match self.request(Request::List).await? {
            Reply::Servers(servers) => Ok(servers),
            _ => Err(unexpected("list")),
        }
    }

    pub async fn get(&self, mcp_server: &str) -> Result<Box<ServerDetails>, IpcError> {
        match self.request(Request::Get(Get { mcp_server: mcp_server.into() })).await? {
            Reply::Server(details) => Ok(details),
            _ => Err(unexpected("get")),
        }
    }

    pub async fn start(&self, mcp_server: &str) -> Result<Started, IpcError> {
        match self.request(Request::Start(Start { mcp_server: mcp_server.into() })).await? {
            Reply::Started(started) => Ok(started),
            _ => Err(unexpected("start")),
        }
    }

    pub async fn stop(&self, mcp_server: &str) -> Result<Stopped, IpcError> {
        match self.request(Request::Stop(Stop { mcp_server: mcp_server.into() })).await? {
            Reply::Stopped(stopped) => Ok(stopped),
            _ => Err(unexpected("stop")),
        }
    }

    pub async fn tools(&self, mcp_server: &str) -> Result<Vec<ToolRecord>, IpcError> {
        match self.request(Request::Tools(Tools { mcp_server: mcp_server.into() })).await? {
            Reply::Tools(tools) => Ok(tools),
            _ => Err(unexpected("tools")),
        }
    }

    pub async fn logs(&self, mcp_server: &str, lines: usize) -> Result<Vec<LogLine>, IpcError> {
        match self.request(Request::Logs(Logs { mcp_server: mcp_server.into(), lines })).await? {
            Reply::Logs(logs) => Ok(logs),
            _ => Err(unexpected("logs")),
        }
    }

    /// A tool call, or a `hangar_call` batch the supervisor runs (see [`CallSpec`]), sent with
    /// this caller's trace, the OAuth token it came with (if any) and, unless the spec names its own, the request id its client may
    /// cancel it by. The receiver hears its notices (as far as `spec.relay` asks) while it
    /// runs; the future answers its result (the upstream's own, verbatim, or the batch's), or a
    /// `CreateTaskResult` when it became a task. Dropping the future cancels the call.
    pub fn call(&self, mut spec: CallSpec) -> (mpsc::UnboundedReceiver<Value>, BoxFuture<'_, Result<Value, IpcError>>) {
        if spec.trace.is_none() {
            spec.trace = self.trace.clone();
        }
        if spec.stance.cancel_by.is_none() {
            spec.stance.cancel_by = self.cancellable_by.clone();
        }
        if spec.subject_token.is_none() {
            spec.subject_token = self.subject_token.clone();
        }
        self.relayed(Request::Call(Box::new(spec)), "call", |reply| match reply {
            Reply::Called(result) | Reply::Task(result) => Some(result),
            _ => None,
        })
    }

    /// One tool by server and name, on the hangar's own surface (`hangar_call`, REST): `extra`
    /// carries the client's params for the upstream (its `_meta` log level), `relay` the
    /// notifications it wants.
    pub fn call_tool(
        &self,
        (mcp_server, tool): (&str, &str),
        arguments: Value,
        timeout_ms: Option<u64>,
        relay: Relay,
        extra: Option<Value>,
    ) -> (mpsc::UnboundedReceiver<Value>, BoxFuture<'_, Result<Value, IpcError>>) {
        let spec = CallSpec { relay, extra, ..CallSpec::one(Target::tool(mcp_server, tool), arguments, timeout_ms) };
        self.call(spec)
    }

    /// A relayed request whose reply `pick` reads (`op` names it when the reply is another).
    fn relayed<T: Send + 'static>(
        &self,
        request: Request,
        op: &'static str,
        pick: fn(Reply) -> Option<T>,
    ) -> (mpsc::UnboundedReceiver<Value>, BoxFuture<'_, Result<T, IpcError>>) {
        let (notices, reply) = self.request_relayed(request);
        let result = async move { pick(reply.await?).ok_or_else(|| unexpected(op)) };
        (notices, Box::pin(result))
    }

    /// Where a front-door tool name leads (`ErrorKind::UnknownTool` if nowhere), as a call by
    /// that name would go; `param_check`'s headers are checked against that tool
    /// (`ErrorKind::HeaderMismatch`), and, with a 2026-07-28 client's `stance` (before its
    /// streamed call), its `taskSupport` (`ErrorKind::MissingCapability`).
    pub async fn resolve(
        &self,
        name: &str,
        param_check: Option<Box<ParamCheck>>,
        stance: Option<Stance>,
    ) -> Result<Target, IpcError> {
        match self.request(Request::Resolve(Resolve { name: name.into(), param_check, stance })).await? {
            Reply::Resolved { mcp_server, tool } => Ok(Target::Tool { mcp_server, tool }),
            _ => Err(unexpected("resolve")),
        }
    }

    /// Every server's declared tools, and whether the front door is on.
    pub async fn catalog(&self) -> Result<Catalog, IpcError> {
        match self.request(Request::Catalog).await? {
            Reply::Catalog(catalog) => Ok(catalog),
            _ => Err(unexpected("catalog")),
        }
    }

    /// Whether the front door is on, and its servers' ids: the catalog without its tools.
    pub async fn front_door(&self) -> Result<FrontDoor, IpcError> {
        match self.request(Request::FrontDoor).await? {
            Reply::FrontDoor(front_door) => Ok(front_door),
            _ => Err(unexpected("front_door")),
        }
    }

    /// Any other MCP request, passed to one upstream; its result verbatim.
    pub async fn forward(&self, mcp_server: &str, method: &str, params: Value) -> Result<Value, IpcError> {
        let request = Request::Forward(Forward {
            mcp_server: mcp_server.into(),
            method: method.into(),
            params,
            timeout_ms: None,
            session: self.session.clone().or_else(|| self.cancellable_by.as_ref().map(|by| by.session.clone())),
        });
        match self.request(request).await? {
            Reply::Forwarded(result) => Ok(result),
            _ => Err(unexpected("forward")),
        }
    }

    pub async fn reload(&self) -> Result<Reloaded, IpcError> {
        match self.request(Request::Reload).await? {
            Reply::Reloaded(reloaded) => Ok(reloaded),
            _ => Err(unexpected("reload")),
        }
    }

    /// The caller's own upstream connections, without a token.
    pub async fn credentials(&self) -> Result<Vec<Connection>, IpcError> {
        match self.request(Request::Credentials).await? {
            Reply::Credentials(listed) => Ok(listed),
            _ => Err(unexpected("credentials")),
        }
    }

    /// Approvals pending and recent, as the caller may see them.
    pub async fn approvals(&self) -> Result<Vec<hangar_core::ipc::Approval>, IpcError> {
        match self.request(Request::Approvals).await? {
            Reply::Approvals(listed) => Ok(listed),
            _ => Err(unexpected("approvals")),
        }
    }

    /// The tool calls running upstream now, as the caller may see them.
    pub async fn in_flight(&self) -> Result<Vec<hangar_core::ipc::CallInFlight>, IpcError> {
        match self.request(Request::InFlight).await? {
            Reply::InFlight(listed) => Ok(listed),
            _ => Err(unexpected("in flight")),
        }
    }

    /// Calls, errors and latency of the last hour per server and tool, as the caller may see them.
    pub async fn call_stats(&self) -> Result<hangar_core::call_stats::CallStats, IpcError> {
        match self.request(Request::CallStats).await? {
            Reply::CallStats(stats) => Ok(stats),
            _ => Err(unexpected("call stats")),
        }
    }

    /// Open sessions and identities with their traffic, as the caller may see them.
    pub async fn clients(&self) -> Result<hangar_core::ipc::Clients, IpcError> {
        match self.request(Request::Clients).await? {
            Reply::Clients(clients) => Ok(clients),
            _ => Err(unexpected("clients")),
        }
    }

    /// Approves (or denies) the pending approval `id`: the approval as decided.
    pub async fn decide(&self, id: &str, approve: bool) -> Result<hangar_core::ipc::Approval, IpcError> {
        match self.request(Request::Decide(hangar_core::ipc::Decide { id: id.into(), approve })).await? {
            Reply::Decided(approval) => Ok(*approval),
            _ => Err(unexpected("decide")),
        }
    }

    /// Forgets the caller's own connections to `mcp_server`.
    pub async fn forget_credentials(&self, mcp_server: &str) -> Result<usize, IpcError> {
        match self.request(Request::ForgetCredentials(ForgetCredentials { mcp_server: mcp_server.into() })).await? {
            Reply::CredentialsForgotten { forgotten } => Ok(forgotten),
            _ => Err(unexpected("forget credentials")),
        }
    }

    /// Mints a connect flow for this caller on `mcp_server`: the URL and when it expires.
    pub async fn connect_begin(&self, mcp_server: &str) -> Result<(String, String), IpcError> {
        match self.request(Request::ConnectBegin(ConnectBegin { mcp_server: mcp_server.into() })).await? {
            Reply::ConnectUrl { url, expires_at } => Ok((url, expires_at)),
            _ => Err(unexpected("connect begin")),
        }
    }

    /// A browser bound by `binding` opened flow `flow`: where to send it to sign in.
    pub async fn connect_open(&self, mcp_server: &str, flow: &str, binding: &str) -> Result<String, IpcError> {
        let open = ConnectOpen { mcp_server: mcp_server.into(), flow: flow.into(), binding: binding.into() };
        match self.request(Request::ConnectOpen(open)).await? {
            Reply::ConnectRedirect { authorize_url } => Ok(authorize_url),
            _ => Err(unexpected("connect open")),
        }
    }

    /// The authorization server's answer, with the browser's binding: the server connected.
    pub async fn connect_finish(&self, finish: ConnectFinish) -> Result<String, IpcError> {
        match self.request(Request::ConnectFinish(finish)).await? {
            Reply::Connected { mcp_server } => Ok(mcp_server),
            _ => Err(unexpected("connect finish")),
        }
    }

    /// The Client ID Metadata Document the hangar serves.
    pub async fn client_metadata(&self) -> Result<Value, IpcError> {
        match self.request(Request::ClientMetadata).await? {
            Reply::ClientMetadata { document } => Ok(document),
            _ => Err(unexpected("client metadata")),
        }
    }

    /// Who this caller is, and whether the supervisor lets it act (its view's `admin`).
    pub async fn whoami(&self) -> Result<WhoAmI, IpcError> {
        match self.request(Request::WhoAmI).await? {
            Reply::WhoAmI(whoami) => Ok(whoami),
            _ => Err(unexpected("whoami")),
        }
    }

    /// One page of the audit trail, as the caller's view sees it.
    pub async fn audit(&self, query: AuditQuery) -> Result<AuditPage, IpcError> {
        match self.request(Request::Audit(query)).await? {
            Reply::Audit(page) => Ok(page),
            _ => Err(unexpected("audit")),
        }
    }

    /// Audited calls and failures per minute over the last `minutes`.
    pub async fn rates(&self, minutes: u32) -> Result<Vec<MinuteCount>, IpcError> {
        match self.request(Request::Rates(Rates { minutes })).await? {
            Reply::Rates(rates) => Ok(rates),
            _ => Err(unexpected("rates")),
        }
    }

    /// Journal events after `since` (from now without it), each a notice on the receiver, until
    /// the future is dropped (which cancels the request) or the supervisor goes.
    pub fn follow_events(
        &self,
        since: Option<u64>,
    ) -> (mpsc::UnboundedReceiver<Value>, BoxFuture<'_, Result<Reply, IpcError>>) {
        self.request_relayed(Request::Events(Events { since, limit: None, follow: true }))
    }

    pub async fn metrics(&self) -> Result<Box<MetricsSnapshot>, IpcError> {
        match self.request(Request::Metrics).await? {
            Reply::Metrics(snapshot) => Ok(snapshot),
            _ => Err(unexpected("metrics")),
        }
    }

    /// A legacy session begins, kept by the supervisor for every API instance.
    pub async fn session_open(
        &self,
        session_id: &str,
        version: &str,
        capabilities: Value,
        client: Option<String>,
    ) -> Result<SessionState, IpcError> {
        let request = Request::SessionOpen(SessionOpen {
            session_id: session_id.into(),
            version: version.into(),
            capabilities,
            client,
        });
        match self.request(request).await? {
            Reply::Session(state) => Ok(state),
            _ => Err(unexpected("session_open")),
        }
    }

    /// A request in a session (with what it changes): the session's state, or `NotFound`.
    pub async fn session_use(&self, session_id: &str, change: Option<SessionChange>) -> Result<SessionState, IpcError> {
        match self.request(Request::SessionUse(SessionUse { session_id: session_id.into(), change })).await? {
            Reply::Session(state) => Ok(state),
            _ => Err(unexpected("session_use")),
        }
    }

    pub async fn session_end(&self, session_id: &str) -> Result<(), IpcError> {
        match self.request(Request::SessionEnd(SessionEnd { session_id: session_id.into() })).await? {
            Reply::SessionEnded => Ok(()),
            _ => Err(unexpected("session_end")),
        }
    }

    /// A message for the session's stream, wherever it is held.
    pub async fn session_post(&self, session_id: &str, message: Value) -> Result<(), IpcError> {
        match self.request(Request::SessionPost(SessionPost { session_id: session_id.into(), message })).await? {
            Reply::Posted => Ok(()),
            _ => Err(unexpected("session_post")),
        }
    }

    /// Holds the session's stream: its messages arrive on the receiver until the future ends
    /// (the session ended or another stream took it) or is dropped (which lets it go).
    pub fn follow_session(
        &self,
        session_id: &str,
    ) -> (mpsc::UnboundedReceiver<Value>, BoxFuture<'_, Result<Reply, IpcError>>) {
        self.request_relayed(Request::SessionFollow(SessionFollow { session_id: session_id.into() }))
    }

    /// Follows the caller's own tasks among `task_ids`: first `{"taskIds": [...]}` (the ones it
    /// will hear of), then each task (a `DetailedTask`) as it stands and at every status change,
    /// until the future ends (all finished) or is dropped.
    pub fn follow_tasks(
        &self,
        task_ids: Vec<String>,
    ) -> (mpsc::UnboundedReceiver<Value>, BoxFuture<'_, Result<Reply, IpcError>>) {
        self.request_relayed(Request::TaskFollow(TaskFollow { task_ids }))
    }
    /// `tasks/get`, `tasks/update` or `tasks/cancel` (`Request::TaskGet` ...): the answer in
    /// the wire's shape.
    pub async fn task(&self, request: Request) -> Result<Value, IpcError> {
        match self.request(request).await? {
            Reply::Task(answer) => Ok(answer),
            _ => Err(unexpected("task")),
        }
    }

    /// A legacy client's `notifications/cancelled` for its call `request_id` in `session`;
    /// whether the call was still running.
    pub async fn cancel_client_call(&self, session: &str, request_id: Value) -> Result<bool, IpcError> {
        match self.request(Request::CancelClientCall(CancelClientCall { session: session.into(), request_id })).await? {
            Reply::ClientCancelled { found } => Ok(found),
            _ => Err(unexpected("cancel_client_call")),
        }
    }

    /// Waits for the client's answer to our request `request_id` in `session`: a notice comes
    /// once the wait is registered (send the request then), the reply is the client's response.
    pub fn await_client_answer(
        &self,
        session: &str,
        request_id: &str,
    ) -> (mpsc::UnboundedReceiver<Value>, BoxFuture<'_, Result<Value, IpcError>>) {
        let request =
            Request::AwaitClientAnswer(AwaitClientAnswer { session: session.into(), request_id: request_id.into() });
        self.relayed(request, "await_client_answer", |reply| match reply {
            Reply::ClientAnswered(response) => Some(response),
            _ => None,
        })
    }

    /// A client's response to our request `request_id` in `session`, to whoever waits for it;
    /// whether someone did.
    pub async fn client_answer(&self, session: &str, request_id: &str, response: Value) -> Result<bool, IpcError> {
        let request =
            Request::ClientAnswer(ClientAnswer { session: session.into(), request_id: request_id.into(), response });
        match self.request(request).await? {
            Reply::ClientAnswerDelivered { found } => Ok(found),
            _ => Err(unexpected("client_answer")),
        }
    }

    /// The client's response to an upstream's own request, relayed to it as `ask_id`; whether
    /// the upstream still waited.
    pub async fn answer_upstream(&self, mcp_server: &str, ask_id: &str, response: Value) -> Result<bool, IpcError> {
        let request =
            Request::AnswerUpstream(AnswerUpstream { mcp_server: mcp_server.into(), ask_id: ask_id.into(), response });
        match self.request(request).await? {
            Reply::UpstreamAnswered { found } => Ok(found),
            _ => Err(unexpected("answer_upstream")),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Mutex;

    use hangar_core::sync::Unpoisoned;
    use serde_json::json;

    use super::*;

    /// A supervisor that keeps the subject token of each call it is sent.
    #[derive(Default)]
    struct Recording {
        subjects: Mutex<Vec<Option<String>>>,
    }

    impl Supervisor for Recording {
        fn request(&self, _caller: &Caller, request: Request) -> BoxFuture<'_, Result<Reply, IpcError>> {
            if let Request::Call(spec) = request {
                self.subjects.locked().push(spec.subject_token.map(|token| token.expose().to_owned()));
            }
            Box::pin(async { Ok(Reply::Called(json!({}))) })
        }

        fn readiness(&self) -> Readiness {
            Readiness::Answering
        }
    }

    #[tokio::test]
    async fn an_oauth_callers_calls_carry_its_token_and_a_key_callers_none() {
        let recording = Arc::new(Recording::default());
        let caller = Caller { identity: "oauth:alice".into(), profile: None };
        let alice = AsCaller::new(recording.clone(), caller).with_subject_token(Some(Secret::new("alice-token")));
        let key = AsCaller::new(recording.clone(), Caller { identity: "ci-bot".into(), profile: None });
        for supervisor in [&alice, &key] {
            supervisor.call_tool(("math", "add"), json!({}), None, Relay::default(), None).1.await.unwrap();
        }
        alice.call(CallSpec::one(Target::Exposed { name: "math__add".into() }, json!({}), None)).1.await.unwrap();
        let seen = recording.subjects.locked().clone();
        assert_eq!(seen, [Some("alice-token".to_owned()), None, Some("alice-token".to_owned())]);
    }
}
