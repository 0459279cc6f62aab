//! The prober's loop: follows the link, keeps the [`Schedule`] in step with the supervisor's
//! targets, and starts each check when it is due.
//!
//! Checks run as tasks of their own, so a hung upstream delays nobody else's check; the
//! schedule keeps it to one in flight per server. The targets are fetched by a task too, one at
//! a time: every change seen meanwhile is folded into a single refetch after it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use hangar_core::access::Caller;
use hangar_core::ipc::{IpcError, ProbeTarget, Reply, Request};
use hangar_runtime::client::{Client, Link};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::{JoinError, JoinSet};

use crate::check;
use crate::schedule::Schedule;

/// After a failed targets request, the wait before asking again.
const REFETCH_BACKOFF: Duration = Duration::from_secs(1);

type Fetched = Result<Vec<ProbeTarget>, IpcError>;

/// Runs until the client's link channel closes.
pub async fn run(client: Client, mut links: UnboundedReceiver<Link>) {
    let mut checker = Checker::new(client);
    loop {
        checker.start_due_work(Instant::now());
        let wake = checker.wake_at();
        tokio::select! {
            // The link first: a check must not start on a link already known to be gone.
            biased;
            link = links.recv() => {
                let Some(link) = link else { return };
                checker.on_link(link);
                // Take the rest of a burst now, so it costs one targets request.
                while let Ok(link) = links.try_recv() {
                    checker.on_link(link);
                }
            }
            Some(fetched) = checker.fetch.join_next(), if !checker.fetch.is_empty() => checker.on_fetched(fetched),
            Some(ended) = checker.checks.join_next_with_id(), if !checker.checks.is_empty() => checker.on_check_ended(ended),
            () = sleep_until(wake) => {}
        }
    }
}

struct Checker {
    client: Client,
    schedule: Schedule,
    connected: bool,
    /// Checks wait after a reconnect until the targets were asked again, so a server stopped
    /// meanwhile is not checked on the strength of the old list.
    synced: bool,
    /// Something changed since the last targets request started.
    stale: bool,
    refetch_not_before: Option<Instant>,
    /// The targets request in flight, if any (at most one).
    fetch: JoinSet<Fetched>,
    checks: JoinSet<()>,
    /// Which server each check task is about, to free it however the task ends.
    checking: HashMap<tokio::task::Id, String>,
}

impl Checker {
    fn new(client: Client) -> Self {
        Checker {
            client,
            schedule: Schedule::default(),
            connected: false,
            synced: false,
            stale: false,
            refetch_not_before: None,
            fetch: JoinSet::new(),
            checks: JoinSet::new(),
            checking: HashMap::new(),
        }
    }

    fn on_link(&mut self, link: Link) {
        match link {
            Link::Up => {
                tracing::info!("following the supervisor");
                self.connected = true;
                self.synced = false;
                self.stale = true;
                self.refetch_not_before = None;
            }
            Link::Changed(change) => {
                tracing::debug!(mcp_server = %change.mcp_server_id, from = change.from.as_str(), to = change.to.as_str(), "state change");
                self.stale = true;
            }
            // The schedule depends neither on which tools a server has nor on who may call.
            Link::ToolsChanged(_) | Link::AuthChanged => {}
            Link::Down => {
                tracing::info!("lost the supervisor; health checks paused until it is back");
                self.connected = false;
                self.synced = false;
                // Its answer could only be the old link's failure; dropping the set aborts it.
                self.fetch = JoinSet::new();
            }
        }
    }

    fn start_due_work(&mut self, now: Instant) {
        if !self.connected {
            return;
        }
        let may_refetch = self.refetch_not_before.is_none_or(|at| at <= now);
        if self.stale && self.fetch.is_empty() && may_refetch {
            self.stale = false;
            self.refetch_not_before = None;
            self.fetch.spawn(targets(self.client.clone()));
        }
        if !self.synced {
            return;
        }
        for due in self.schedule.take_due(now) {
            let task = check::run(self.client.clone(), due.mcp_server.clone(), due.timeout_ms);
            let id = self.checks.spawn(task).id();
            self.checking.insert(id, due.mcp_server);
        }
    }

    /// The next moment something is due: a check, or a refetch held back by its backoff.
    fn wake_at(&self) -> Option<Instant> {
        if !self.connected {
            return None;
        }
        let check = self.schedule.next_due().filter(|_| self.synced);
        let refetch = self.refetch_not_before.filter(|_| self.stale && self.fetch.is_empty());
        check.into_iter().chain(refetch).min()
    }

    fn on_fetched(&mut self, fetched: Result<Fetched, JoinError>) {
        match fetched {
            Ok(Ok(targets)) => {
                self.schedule.reconcile(&targets, Instant::now());
                tracing::debug!(servers = self.schedule.len(), "health check schedule updated");
            }
            Ok(Err(err)) => {
                // Keep checking by the schedule we have; ask again shortly.
                tracing::warn!(error_type = err.kind.as_str(), reason = %err.message, "cannot fetch the health check targets");
                self.stale = true;
                self.refetch_not_before = Some(Instant::now() + REFETCH_BACKOFF);
            }
            Err(err) if err.is_cancelled() => return,
            Err(_) => {
                tracing::error!("the health check targets request panicked");
                self.stale = true;
                self.refetch_not_before = Some(Instant::now() + REFETCH_BACKOFF);
            }
        }
        self.synced = true;
    }

    fn on_check_ended(&mut self, ended: Result<(tokio::task::Id, ()), JoinError>) {
        let id = match ended {
            Ok((id, ())) => id,
            Err(err) => {
                if err.is_panic() {
                    tracing::error!("a health check panicked");
                }
                err.id()
            }
        };
        if let Some(mcp_server) = self.checking.remove(&id) {
            self.schedule.finished(&mcp_server);
        }
    }
}

async fn targets(client: Client) -> Fetched {
    match client.request(&Caller::hangar(), Request::Targets).await? {
        Reply::Targets(targets) => Ok(targets),
        _ => Err(IpcError::new(
            hangar_core::ipc::ErrorKind::Internal,
            "the supervisor answered `targets` with an unexpected reply",
        )),
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
