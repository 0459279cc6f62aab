//! 2026-07-28 `subscriptions/listen` with `resourceSubscriptions`: the request is never
//! answered (the stream stays open until the client cancels it); `touch_resource {uri}` sends
//! `notifications/resources/updated` on every open listen that holds the URI, named by its
//! subscription id, so a gateway's bridging of legacy subscriptions can be tested end to end.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{Value, json};

use super::peer::Peer;
use crate::protocol;

const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The open listens: request id (as JSON text) → the resource URIs it holds.
#[derive(Debug, Default)]
pub struct Listens(Mutex<HashMap<String, (Value, Vec<String>)>>);

impl Listens {
    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Value, Vec<String>)>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens the listen `id`: acknowledges the resource subscriptions it honours (all of them).
    pub fn listen(&self, id: &Value, params: Option<&Value>, peer: &dyn Peer) {
        let uris: Vec<String> = params
            .and_then(|p| p.pointer("/notifications/resourceSubscriptions"))
            .and_then(Value::as_array)
            .map(|uris| uris.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        let honoured = json!({
            "toolsListChanged": false,
            "promptsListChanged": false,
            "resourcesListChanged": false,
            "resourceSubscriptions": uris,
        });
        peer.notify(json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": honoured, "_meta": {SUBSCRIPTION_ID: id}}}));
        self.open().insert(id.to_string(), (id.clone(), uris));
    }

    /// A `notifications/cancelled` for a listen closes it.
    pub fn cancelled(&self, msg: &Value) {
        if let Some(id) = msg.pointer("/params/requestId") {
            self.open().remove(&id.to_string());
        }
    }

    /// `uri` changed: each open listen holding it hears so. Answers how many did.
    pub fn touch(&self, uri: &str, peer: &dyn Peer) -> usize {
        let open = self.open();
        let holding: Vec<&Value> =
            open.values().filter(|(_, uris)| uris.iter().any(|u| u == uri)).map(|(id, _)| id).collect();
        for id in &holding {
            let mut updated = protocol::notification("notifications/resources/updated");
            updated["params"] = json!({"uri": uri, "_meta": {SUBSCRIPTION_ID: id}});
            peer.notify(updated);
        }
        holding.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::peer::CollectingPeer;
    use super::*;

    #[test]
    fn a_touched_uri_reaches_the_listens_that_hold_it_until_cancelled() {
        let (listens, peer) = (Listens::default(), CollectingPeer::default());
        listens.listen(&json!(7), Some(&json!({"notifications": {"resourceSubscriptions": ["a://x"]}})), &peer);
        assert_eq!(peer.take()[0]["params"]["notifications"]["resourceSubscriptions"], json!(["a://x"]));
        assert_eq!(listens.touch("a://y", &peer), 0);
        assert_eq!(listens.touch("a://x", &peer), 1);
        let updated = peer.take();
        assert_eq!(updated[0]["method"], "notifications/resources/updated");
        assert_eq!(updated[0]["params"]["uri"], "a://x");
        assert_eq!(updated[0]["params"]["_meta"][SUBSCRIPTION_ID], 7);
        listens.cancelled(&json!({"method": "notifications/cancelled", "params": {"requestId": 7}}));
        assert_eq!(listens.touch("a://x", &peer), 0);
    }
}
