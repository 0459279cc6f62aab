//! The connections of a server whose every caller brings their own credential: `auth.oauth`
//! with `per: user` (each caller's connected account) or `auth.token_exchange` (a token
//! exchanged from the one the caller came with).
//!
//! Such a server's own connection (its start, health checks) holds no credential, so it checks
//! reachability only: an upstream that answers 401 is there. Each caller gets a connection of
//! their own ([`Callers`]), opened at their first call with their token: its own MCP handshake
//! and session (an SDK's resource server binds a session to the principal that opened it), so
//! no caller's request ever carries another's token or rides another's session. The server's
//! tools are learned at the first caller's connection, with that caller's token.
//!
//! Notifications a caller's connection sends outside any call are not passed on to anyone:
//! they would be that caller's alone, and no session is known to be theirs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use hangar_core::ipc::{ErrorKind, IpcError};
use hangar_core::sync::Unpoisoned;
use tokio::sync::{OnceCell, mpsc};

use super::Server;
use super::start::list_tools;
use crate::credentials::bearer::Bearer;
use crate::credentials::exchange::Exchanger;
use crate::credentials::user_tokens::UserTokens;
use crate::upstream::{CallerTokenMissing, HttpUpstream, RequestError, Upstream};

/// The most callers with a connection open at once; past it, the oldest is closed (its caller's
/// next call opens it again).
const MAX_CALLERS: usize = 1024;

/// Where each caller's token comes from: one source per server, shared by its connections.
#[derive(Clone)]
enum Source {
    User(Arc<UserTokens>),
    Exchange(Arc<Exchanger>),
}

/// One server's per-caller connections, for the run (generation) they were opened in.
#[derive(Default)]
pub(super) struct Callers {
    source: OnceLock<Source>,
    links: Mutex<Links>,
}

#[derive(Default)]
struct Links {
    generation: u64,
    /// Each caller's connection (opened once, however many of their calls wait), and when they
    /// last used it.
    by_identity: HashMap<String, (Instant, Link)>,
}

/// One caller's connection, opened by the first of their calls that needs it.
type Link = Arc<OnceCell<Arc<Upstream>>>;

impl Callers {
    /// The connection cell of `identity` in run `generation` (a new run starts afresh).
    fn cell(&self, generation: u64, identity: &str) -> Link {
        let mut links = self.links.locked();
        if links.generation != generation {
            links.generation = generation;
            links.by_identity.clear();
        }
        if links.by_identity.len() >= MAX_CALLERS
            && !links.by_identity.contains_key(identity)
            && let Some(oldest) = links.by_identity.iter().min_by_key(|(_, (at, _))| *at).map(|(id, _)| id.clone())
        {
            links.by_identity.remove(&oldest);
        }
        let entry = links.by_identity.entry(identity.to_owned()).or_insert_with(|| (Instant::now(), Arc::default()));
        entry.0 = Instant::now();
        entry.1.clone()
    }

    /// Closes `identity`'s connection: its next call opens another.
    fn drop_link(&self, identity: &str) {
        self.links.locked().by_identity.remove(identity);
    }
}

impl Server {
    /// Whether every caller of this server brings their own credential.
    pub(crate) fn per_caller(&self) -> bool {
        self.config.auth.as_ref().is_some_and(|auth| auth.per_caller())
    }

    /// The token source of this server's callers.
    fn caller_source(&self) -> Result<Source, IpcError> {
        if let Some(source) = self.callers.source.get() {
            return Ok(source.clone());
        }
        let auth = self.config.auth.as_ref();
        let endpoint = self.config.endpoint.as_deref().unwrap_or_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|_| IpcError::new(ErrorKind::Internal, "cannot set up an HTTP client"))?;
        let source = match (auth.and_then(|a| a.oauth.as_ref()), auth.and_then(|a| a.token_exchange.as_ref())) {
            (Some(oauth), _) => {
                let vault = self.shared.vault.get().cloned();
                Source::User(Arc::new(UserTokens::new(http, &self.id, endpoint, oauth, vault)))
            }
            (None, Some(exchange)) => {
                Source::Exchange(Arc::new(Exchanger::new(http, exchange, self.shared.subjects.clone())))
            }
            (None, None) => {
                return Err(IpcError::new(ErrorKind::Internal, "this server's callers bring no credential"));
            }
        };
        Ok(self.callers.source.get_or_init(|| source).clone())
    }

    /// The tokens of a `per: user` server's callers, for the connect flow to store into.
    #[allow(dead_code)] // the connect flow's, being built
    pub(crate) fn user_tokens(&self) -> Option<Arc<UserTokens>> {
        match self.caller_source().ok()? {
            Source::User(tokens) => Some(tokens),
            Source::Exchange(_) => None,
        }
    }

    /// `identity`'s own connection to this (running) server: the one open, or a new one,
    /// handshaken with their token. A caller with no token is refused before anything is
    /// sent ([`RequestError::NoCallerToken`] in the hangar's words).
    pub(crate) async fn caller_link(self: &Arc<Self>, identity: &str) -> Result<Arc<Upstream>, IpcError> {
        let generation = self.lock().generation;
        let cell = self.callers.cell(generation, identity);
        let link = cell.get_or_try_init(|| self.open_caller_link(identity, generation)).await;
        if link.is_err() {
            self.callers.drop_link(identity);
        }
        link.cloned()
    }

    /// `identity`'s own connection to this server, the server started first if it is not
    /// running (reachability only).
    pub(super) async fn ready_caller_link(self: &Arc<Self>, identity: &str) -> Result<Arc<Upstream>, IpcError> {
        self.ready_upstream().await?;
        self.caller_link(identity).await
    }

    /// A request (`what`) on `identity`'s own connection failed: a refused or missing token, or a
    /// closed or lost session (404), closes that connection (their next request opens another);
    /// the failure is told in [`Server::caller_failure`]'s words. The server's own state does
    /// not change: the fault is that caller's alone.
    pub(super) fn caller_request_failed(&self, identity: &str, what: &str, err: RequestError) -> IpcError {
        if matches!(
            err,
            RequestError::Unauthorized { .. }
                | RequestError::NoCallerToken { .. }
                | RequestError::Closed { .. }
                | RequestError::Status { status: 404, .. }
        ) {
            self.callers.drop_link(identity);
        }
        self.caller_failure(what, err)
    }

    async fn open_caller_link(self: &Arc<Self>, identity: &str, generation: u64) -> Result<Arc<Upstream>, IpcError> {
        let bearer = match self.caller_source()? {
            Source::User(tokens) => Bearer::User { identity: identity.to_owned(), tokens },
            Source::Exchange(exchanger) => Bearer::Exchange { identity: identity.to_owned(), exchanger },
        };
        let endpoint = self.config.endpoint.as_deref().unwrap_or_default();
        let headers: Vec<(&str, &str)> = self.config.auth_headers().collect();
        // Its notifications outside a call are its caller's alone: passed on to no one.
        let (notices_tx, mut notices_rx) = mpsc::unbounded_channel();
        tokio::spawn(async move { while notices_rx.recv().await.is_some() {} });
        let link = HttpUpstream::new(endpoint, &headers, None, None, self.log.clone(), notices_tx)
            .map_err(|err| IpcError::new(ErrorKind::Internal, err))?
            .with_bearer(bearer);
        let upstream = Arc::new(Upstream::http(link));
        let deadline = Instant::now() + self.config.handshake_timeout();
        let what = "connection for this caller";
        let handshake = upstream.handshake(deadline).await.map_err(|err| self.caller_failure(what, err))?;
        tracing::debug!(mcp_server = %self.id, era = ?handshake.era, "a caller's connection is open");
        let unknown = {
            let mut inner = self.lock();
            if inner.generation == generation && inner.declared.is_none() {
                inner.declared = Some(handshake.capabilities);
            }
            inner.tools.infos.is_empty()
        };
        if unknown {
            let tools =
                list_tools(&upstream, deadline, &self.log).await.map_err(|err| self.caller_failure(what, err))?;
            self.apply_tools(generation, tools);
        }
        Ok(upstream)
    }

    /// A caller's connection's failure in the hangar's words. A caller without a token, or
    /// whose token the upstream refused, is told to connect (or why they cannot); nothing of
    /// the server's own state changes, since the fault is that caller's alone.
    fn caller_failure(&self, what: &str, err: RequestError) -> IpcError {
        let per_user = self.config.auth.as_ref().is_some_and(|auth| auth.per_user());
        let missing = match &err {
            RequestError::NoCallerToken { why, .. } => Some(*why),
            RequestError::Unauthorized { .. } if per_user => Some(CallerTokenMissing::NotConnected),
            _ => None,
        };
        match missing {
            Some(CallerTokenMissing::NotConnected) => IpcError::new(
                ErrorKind::UpstreamUnauthorized,
                format!("`{}` needs your own account: connect it, then call again", self.id),
            )
            .with_details(serde_json::json!({ CONNECT_DETAIL: self.id })),
            Some(CallerTokenMissing::NoSubject) => IpcError::new(
                ErrorKind::UpstreamUnauthorized,
                format!(
                    "`{}` is called on your behalf with a token exchanged from your own OAuth token; you came with an API key, which cannot be exchanged: sign in with OAuth",
                    self.id
                ),
            ),
            Some(CallerTokenMissing::ExchangeFailed) => IpcError::new(
                ErrorKind::UpstreamUnauthorized,
                format!(
                    "`{}` is called on your behalf with a token exchanged from your own OAuth token, and the exchange failed (the server's log says why); try again in a few seconds",
                    self.id
                ),
            ),
            None => self.request_failure(what, err),
        }
    }
}

/// The detail of an error that asks the caller to connect their account to the server it names.
pub(crate) const CONNECT_DETAIL: &str = "connect_mcp_server";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_keeps_one_cell_per_run_and_the_oldest_caller_goes_past_the_bound() {
        let callers = Callers::default();
        let alice = callers.cell(1, "alice");
        assert!(Arc::ptr_eq(&alice, &callers.cell(1, "alice")), "one cell per caller, however many calls");
        assert!(!Arc::ptr_eq(&alice, &callers.cell(1, "bob")), "bob's is his own");
        assert!(!Arc::ptr_eq(&alice, &callers.cell(2, "alice")), "a new run starts afresh");
        assert_eq!(callers.links.locked().by_identity.len(), 1, "the old run's cells are gone");
        // alice's last use is strictly older than everyone's after her.
        std::thread::sleep(Duration::from_millis(2));

        for n in 0..MAX_CALLERS {
            callers.cell(2, &format!("caller-{n}"));
        }
        let links = callers.links.locked();
        assert_eq!(links.by_identity.len(), MAX_CALLERS);
        assert!(!links.by_identity.contains_key("alice"), "the least recently used caller went first");
        drop(links);
        callers.drop_link("caller-1");
        assert!(!callers.links.locked().by_identity.contains_key("caller-1"));
    }
}
