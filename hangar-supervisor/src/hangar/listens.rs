//! Held `subscriptions/listen` requests to 2026-07-28 upstreams: one per server, holding every
//! URI that live legacy sessions subscribed to through it, and, for a running HTTP upstream
//! (which has no other channel for what belongs to no request), its list changes
//! (`toolsListChanged`, `promptsListChanged`, `resourcesListChanged`). A listen is replaced when
//! what it must hold changes (the old one is cancelled upstream) and re-opened when the upstream
//! comes back after going down. What it brings is handled like any upstream notification: a
//! tools change refreshes the server's tools (and so reaches the front door's listeners), a
//! resource update goes to the subscribed sessions.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hangar_core::config::Mode;
use hangar_core::ipc::ErrorKind;
use hangar_core::sync::Unpoisoned;
use serde_json::json;
use tokio::task::JoinHandle;

use crate::server::Server;

/// How long one listen is held before it is opened again (a request needs some bound).
const LISTEN_FOR: Duration = Duration::from_secs(24 * 60 * 60);
/// How soon a listen is tried again after its upstream went down or was not running.
const RETRY: Duration = Duration::from_secs(1);
/// The longest wait between two listens of an upstream that keeps ending them at once.
const MAX_RETRY: Duration = Duration::from_secs(60);

/// What one server's listen must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wanted {
    /// Resource URIs, as the server knows them, that sessions subscribed to.
    pub uris: BTreeSet<String>,
    /// The server's list changes (a running 2026-07-28 HTTP upstream).
    pub news: bool,
}

/// One server's held listen: what it holds, and the task holding it (aborted on drop, which
/// drops the request and so cancels it upstream).
struct Held {
    wanted: Wanted,
    task: JoinHandle<()>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Default)]
pub struct Listens(Mutex<HashMap<String, Held>>);

impl Listens {
    /// Holds exactly the listens `wanted` names (server id → what to hold); `server` finds a
    /// server by id (one that is gone gets none). Needs a Tokio runtime.
    pub fn update(&self, wanted: BTreeMap<String, Wanted>, server: impl Fn(&str) -> Option<Arc<Server>>) {
        let mut held = self.0.locked();
        held.retain(|id, listen| wanted.get(id) == Some(&listen.wanted));
        for (id, wanted) in wanted {
            if (wanted.uris.is_empty() && !wanted.news) || held.contains_key(&id) {
                continue;
            }
            let Some(server) = server(&id) else { continue };
            let task = tokio::spawn(hold(server, listen_params(&wanted)));
            held.insert(id, Held { wanted, task });
        }
    }
}

/// The `subscriptions/listen` params that hold `wanted`.
fn listen_params(wanted: &Wanted) -> serde_json::Value {
    json!({"notifications": {
        "toolsListChanged": wanted.news,
        "promptsListChanged": wanted.news,
        "resourcesListChanged": wanted.news,
        "resourceSubscriptions": wanted.uris,
    }})
}

/// Whether `server` is a running 2026-07-28 HTTP upstream: one whose notifications outside any
/// request come only on a held listen (a stdio upstream prints them whenever it likes).
pub fn hears_news_by_listen(server: &Server) -> bool {
    // Asked of every server at every state change: the config first (no lock), then one short
    // lock, never the whole details.
    server.config().mode != Mode::Subprocess && server.serves_modern()
}

/// Holds the listen with `params` as long as it is wanted. Ends for an upstream that cannot
/// listen (a legacy one takes `resources/subscribe` itself, and sends the rest on its own GET
/// stream; one that refuses the method has no use for a retry).
async fn hold(server: Arc<Server>, params: serde_json::Value) {
    let mut retry = RETRY;
    loop {
        let opened = tokio::time::Instant::now();
        match server.listen(params.clone(), LISTEN_FOR).await {
            Err(err) if matches!(err.kind, ErrorKind::ProtocolMismatch | ErrorKind::UpstreamError) => {
                tracing::debug!(mcp_server = server.id(), kind = err.kind.as_str(), "no subscriptions/listen upstream");
                return;
            }
            // An upstream that keeps answering its listen at once is asked less and less often
            // (1 s, 2 s, ... a minute); one that is down is tried again every second.
            Ok(_) if opened.elapsed() < MAX_RETRY => {
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(MAX_RETRY);
            }
            _ => {
                retry = RETRY;
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}
