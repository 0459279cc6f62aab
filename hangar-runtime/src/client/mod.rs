//! A process's one connection to the supervisor's control socket, shared by every request.
//!
//! Each request gets a fresh id and waits on a oneshot in the pending map; one writer task
//! sends the encoded lines and one reader task routes replies back by id (see
//! [`connection`]). A background task keeps the connection up; while it is down, requests fail
//! at once instead of queueing, so the HTTP surfaces answer 503 promptly.
//!
//! Each connection proves the control key in its hello (read from the [`Endpoint`]'s key file
//! at every connect, so a restarted supervisor's new key is used) and names the client's role.
//!
//! A client made with [`Client::following`] also subscribes to state changes on every
//! connection and hands them, with the link going up and down, to a [`Link`] channel.
//!
//! A connection can stay up while the supervisor behind it answers nothing (it is stopped with
//! SIGSTOP, or its event loop is stuck). So the client notes when it last heard any frame, and
//! when nothing came for [`HEARTBEAT`] it sends a `ping`; [`Client::readiness`] counts the
//! supervisor as answering only if it heard from it within [`ANSWER_WITHIN`].

mod connection;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hangar_core::access::Caller;
use hangar_core::ipc::{self, Called, Check, ClientFrame, ErrorKind, Events, IpcError, Reply, Request};
use hangar_core::record::StateChange;
use hangar_core::sync::Unpoisoned;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// How long a request may wait when it carries no timeout of its own: the supervisor's default
/// call timeout plus slack, since starts and stops run handshakes and graceful exits.
const DEFAULT_BUDGET: Duration = Duration::from_secs(65);
/// Added to a call's own timeout, so the supervisor's timeout error wins over ours.
const CALL_SLACK: Duration = Duration::from_secs(5);
const DEFAULT_CALL_TIMEOUT_MS: u64 = 60_000;
/// After this long without a frame from the supervisor, the client pings it.
pub const HEARTBEAT: Duration = Duration::from_secs(1);
/// A supervisor not heard from for longer than this does not count as answering: three
/// heartbeats, so one slow answer on a busy machine is not an outage.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(3);

type Waiter = oneshot::Sender<Result<Reply, IpcError>>;

/// What a following client hears about its link, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Link {
    /// Connected and subscribed; changes from before this point may have been missed.
    Up,
    Changed(StateChange),
    /// A server's tool list changed.
    ToolsChanged(String),
    /// The config was reloaded: its `auth:` block may have changed.
    AuthChanged,
    /// The connection is gone; the client is reconnecting.
    Down,
}

/// Whether the supervisor answers, for readiness probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// Connected, and heard from within [`ANSWER_WITHIN`].
    Answering,
    /// No handshaken connection.
    Unreachable,
    /// Connected, but nothing came back for this long (it is stopped or stuck).
    Silent(Duration),
}

/// Where the supervisor is: its control socket, and the file holding the key this client
/// proves in its hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The supervisor's control socket.
    pub socket: PathBuf,
    /// The file holding the control key, read at every connect.
    pub key_file: PathBuf,
}

impl Endpoint {
    /// `socket`, and the key in `key_file` (`--control-key`), else beside the socket
    /// ([`crate::control_key::default_path`]).
    pub fn new(socket: PathBuf, key_file: Option<PathBuf>) -> Endpoint {
        let key_file = key_file.unwrap_or_else(|| crate::control_key::default_path(&socket));
        Endpoint { socket, key_file }
    }
}

impl From<PathBuf> for Endpoint {
    /// The socket, with its key beside it.
    fn from(socket: PathBuf) -> Endpoint {
        Endpoint::new(socket, None)
    }
}

/// A cheap-to-clone handle on the connection.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Handle>,
}

struct Handle {
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        // The reconnect loop holds only `Shared`; without this it would outlive every handle.
        self.task.abort();
    }
}

/// What the handle and the connection tasks share.
struct Shared {
    path: PathBuf,
    /// The control key's file, read at every connect.
    key_file: PathBuf,
    /// Who we are, in the hello (`api`, `prober`, ...).
    role: &'static str,
    /// Where state changes go, for a following client.
    follow: Option<mpsc::UnboundedSender<Link>>,
    next_id: AtomicU64,
    state: Mutex<LinkState>,
    /// When the last frame came from the supervisor, in milliseconds since `epoch` (an atomic,
    /// as every frame stores it).
    heard_ms: AtomicU64,
    epoch: Instant,
}

struct LinkState {
    /// The writer queue of the live connection; `None` while disconnected.
    writer: Option<mpsc::Sender<Vec<u8>>>,
    pending: HashMap<u64, Waiter>,
    /// Where notices about a relayed request go.
    relays: HashMap<u64, mpsc::UnboundedSender<serde_json::Value>>,
    /// What a request gets while there is no connection.
    down: IpcError,
}

impl Client {
    /// Starts connecting in the background as `role` (`api`, `prober`); must be called inside a
    /// tokio runtime.
    pub fn spawn(endpoint: impl Into<Endpoint>, role: &'static str) -> Self {
        Client::start(endpoint.into(), role, None)
    }

    /// Like [`Client::spawn`], and subscribes to state changes on every connection.
    pub fn following(endpoint: impl Into<Endpoint>, role: &'static str) -> (Self, mpsc::UnboundedReceiver<Link>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Client::start(endpoint.into(), role, Some(tx)), rx)
    }

    fn start(endpoint: Endpoint, role: &'static str, follow: Option<mpsc::UnboundedSender<Link>>) -> Self {
        let down = unreachable_error(&endpoint.socket);
        let shared = Arc::new(Shared {
            path: endpoint.socket,
            key_file: endpoint.key_file,
            role,
            follow,
            next_id: AtomicU64::new(1),
            state: Mutex::new(LinkState { writer: None, pending: HashMap::new(), relays: HashMap::new(), down }),
            heard_ms: AtomicU64::new(0),
            epoch: Instant::now(),
        });
        let task = tokio::spawn(connection::maintain(shared.clone()));
        Client { inner: Arc::new(Handle { shared, task }) }
    }

    /// `request` on behalf of `caller`: the supervisor answers within the caller's view.
    pub async fn request(&self, caller: &Caller, request: Request) -> Result<Reply, IpcError> {
        let id = self.inner.shared.next_id.fetch_add(1, Ordering::Relaxed);
        self.exchange(id, caller, request).await
    }

    /// Like [`Client::request`], and the supervisor's notices about it (see `ipc::Relay`) arrive
    /// on the receiver while it runs. Dropping the future cancels the request at the supervisor.
    pub fn request_relayed(
        &self,
        caller: &Caller,
        request: Request,
    ) -> (mpsc::UnboundedReceiver<serde_json::Value>, impl Future<Output = Result<Reply, IpcError>> + Send + 'static)
    {
        let id = self.inner.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::unbounded_channel();
        self.inner.shared.lock().relays.insert(id, tx);
        let (client, caller) = (self.clone(), caller.clone());
        (rx, async move { client.exchange(id, &caller, request).await })
    }

    async fn exchange(&self, id: u64, caller: &Caller, request: Request) -> Result<Reply, IpcError> {
        let shared = &self.inner.shared;
        let budget = budget_for(&request);
        // Dropping the request (the HTTP client went away) must not leave its waiter behind.
        let _guard = PendingGuard { shared, id };
        let (tx, rx) = oneshot::channel();
        let writer = shared.register(id, tx)?;
        let line = ipc::encode(&ClientFrame::Request { id, op: request, caller: caller.clone() });
        // The budget covers queueing too: a supervisor that stops reading must not hold callers.
        let exchange = async {
            if writer.send(line).await.is_err() {
                return Err(shared.down_error());
            }
            // A dropped waiter means the connection went away meanwhile.
            rx.await.unwrap_or_else(|_| Err(shared.down_error()))
        };
        match tokio::time::timeout(budget, exchange).await {
            Ok(result) => result,
            Err(_) => Err(IpcError::new(
                ErrorKind::Timeout,
                format!("the supervisor did not answer within {} s", budget.as_secs()),
            )),
        }
    }

    pub fn is_connected(&self) -> bool {
        self.inner.shared.lock().writer.is_some()
    }

    /// Whether the supervisor answers: connected and heard from within [`ANSWER_WITHIN`].
    pub fn readiness(&self) -> Readiness {
        if !self.is_connected() {
            return Readiness::Unreachable;
        }
        match self.inner.shared.silent_for() {
            silent if silent > ANSWER_WITHIN => Readiness::Silent(silent),
            _ => Readiness::Answering,
        }
    }
}

fn budget_for(request: &Request) -> Duration {
    match request {
        Request::Call(spec) => match spec.called {
            Called::One { timeout_ms, .. } => {
                Duration::from_millis(timeout_ms.unwrap_or(DEFAULT_CALL_TIMEOUT_MS)).saturating_add(CALL_SLACK)
            }
            Called::Batch(_) => DEFAULT_BUDGET,
        },
        Request::Check(Check { timeout_ms, .. }) => Duration::from_millis(*timeout_ms).saturating_add(CALL_SLACK),
        // Followed events stream until the caller cancels (drops the request).
        Request::Events(Events { follow: true, .. }) => Duration::MAX,
        // A client's answer may wait for a person; the caller bounds it, and drops it if its
        // client leaves.
        Request::AwaitClientAnswer(_) => Duration::MAX,
        _ => DEFAULT_BUDGET,
    }
}

fn unreachable_error(path: &Path) -> IpcError {
    IpcError::new(ErrorKind::SupervisorUnavailable, format!("the supervisor is not reachable at {}", path.display()))
}

struct PendingGuard<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.relays.remove(&self.id);
        // Still waiting: our caller gave up (its own client went away, or a timeout). Tell the
        // supervisor, so the upstream call is cancelled too instead of running on for nobody.
        if state.pending.remove(&self.id).is_some()
            && let Some(writer) = &state.writer
        {
            let _ = writer.try_send(ipc::encode(&ClientFrame::Cancel { id: self.id }));
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, LinkState> {
        // A panic elsewhere must not take every later request down with it.
        self.state.locked()
    }

    /// Any frame from the supervisor counts as an answer.
    fn heard(&self) {
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.heard_ms.store(now, Ordering::Relaxed);
    }

    fn silent_for(&self) -> Duration {
        let heard = Duration::from_millis(self.heard_ms.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(heard)
    }

    fn down_error(&self) -> IpcError {
        self.lock().down.clone()
    }

    /// Files a waiter and hands back the writer queue, or fails at once while disconnected.
    fn register(&self, id: u64, waiter: Waiter) -> Result<mpsc::Sender<Vec<u8>>, IpcError> {
        let mut state = self.lock();
        match state.writer.clone() {
            Some(writer) => {
                state.pending.insert(id, waiter);
                Ok(writer)
            }
            None => Err(state.down.clone()),
        }
    }

    fn deliver(&self, id: u64, result: Result<Reply, IpcError>) -> bool {
        let waiter = self.lock().pending.remove(&id);
        match waiter {
            // The receiver may have timed out just now; nothing else to do then.
            Some(waiter) => waiter.send(result).is_ok(),
            None => false,
        }
    }

    fn link_up(&self, writer: mpsc::Sender<Vec<u8>>) {
        let mut state = self.lock();
        state.writer = Some(writer);
        state.down = unreachable_error(&self.path);
    }

    /// Ends the link and fails every request still waiting on it.
    fn link_down(&self, down: IpcError) {
        let waiters: Vec<Waiter> = {
            let mut state = self.lock();
            state.writer = None;
            state.down = down.clone();
            state.pending.drain().map(|(_, waiter)| waiter).collect()
        };
        for waiter in waiters {
            let _ = waiter.send(Err(down.clone()));
        }
    }

    /// Hands a notice to the request it is about, if its caller still listens.
    fn relay(&self, id: u64, message: serde_json::Value) {
        if let Some(relay) = self.lock().relays.get(&id) {
            let _ = relay.send(message);
        }
    }

    /// Tells a following client's owner about its link; a no-op for other clients.
    fn tell(&self, link: Link) {
        if let Some(follow) = &self.follow {
            let _ = follow.send(link);
        }
    }

    fn set_down_error(&self, down: IpcError) {
        self.lock().down = down;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fails_at_once_while_disconnected() {
        let client = Client::spawn(PathBuf::from("/nonexistent/hangar-test.sock"), "api");
        let err = client.request(&Caller::hangar(), Request::List).await.unwrap_err();
        assert_eq!(err.kind, ErrorKind::SupervisorUnavailable);
        assert_eq!(err.message, "the supervisor is not reachable at /nonexistent/hangar-test.sock");
        assert!(!client.is_connected());
    }

    #[test]
    fn calls_wait_longer_than_their_own_timeout() {
        let call = |timeout_ms| {
            let call = hangar_core::ipc::CallSpec::one(
                hangar_core::ipc::Target::tool("m", "t"),
                serde_json::json!({}),
                timeout_ms,
            );
            Request::Call(Box::new(call))
        };
        assert_eq!(budget_for(&call(None)), Duration::from_secs(65));
        assert_eq!(budget_for(&call(Some(120_000))), Duration::from_secs(125));
        assert_eq!(budget_for(&Request::List), Duration::from_secs(65));
    }
}

#[cfg(test)]
#[path = "socket_tests.rs"]
mod socket_tests;
