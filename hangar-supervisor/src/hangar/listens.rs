//! Legacy sessions' resource subscriptions bridged to 2026-07-28 upstreams: one
//! `subscriptions/listen` per server, holding every URI that live sessions subscribed to through
//! it, replaced when that set changes (the old one is cancelled upstream) and re-opened when the
//! upstream comes back after going down. The updates it brings are unsolicited notifications,
//! which the sessions' registry hands to the subscribed sessions.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hangar_core::ipc::ErrorKind;
use serde_json::json;
use tokio::task::JoinHandle;

use crate::server::Server;

/// How long one listen is held before it is opened again (a request needs some bound).
const LISTEN_FOR: Duration = Duration::from_secs(24 * 60 * 60);
/// How soon a listen is tried again after its upstream went down or was not running.
const RETRY: Duration = Duration::from_secs(1);

/// One server's held listen: the URIs it holds, and the task holding it (aborted on drop, which
/// drops the request and so cancels it upstream).
struct Held {
    uris: BTreeSet<String>,
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
    /// Holds exactly the listens `wanted` names (server id → upstream URIs); `server` finds a
    /// server by id (one that is gone gets none). Needs a Tokio runtime.
    pub fn update(&self, wanted: BTreeMap<String, BTreeSet<String>>, server: impl Fn(&str) -> Option<Arc<Server>>) {
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        held.retain(|id, listen| wanted.get(id) == Some(&listen.uris));
        for (id, uris) in wanted {
            if uris.is_empty() || held.contains_key(&id) {
                continue;
            }
            let Some(server) = server(&id) else { continue };
            let task = tokio::spawn(hold(server, uris.iter().cloned().collect()));
            held.insert(id, Held { uris, task });
        }
    }
}

/// Holds the listen for `uris` as long as it is wanted. Ends for an upstream that cannot listen
/// (a legacy one takes `resources/subscribe` itself; one that refuses the method has no use for
/// a retry).
async fn hold(server: Arc<Server>, uris: Vec<String>) {
    let params = json!({"notifications": {"resourceSubscriptions": uris}});
    loop {
        match server.listen(params.clone(), LISTEN_FOR).await {
            Err(err) if matches!(err.kind, ErrorKind::ProtocolMismatch | ErrorKind::UpstreamError) => {
                tracing::debug!(mcp_server = server.id(), kind = err.kind.as_str(), "no subscriptions/listen upstream");
                return;
            }
            _ => tokio::time::sleep(RETRY).await,
        }
    }
}
