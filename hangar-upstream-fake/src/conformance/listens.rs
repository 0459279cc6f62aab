//! 2026-07-28 `subscriptions/listen` with `resourceSubscriptions` and `toolsListChanged`: the
//! request is never answered (the stream stays open until the client cancels it);
//! `touch_resource {uri}` sends `notifications/resources/updated` on every open listen that
//! holds the URI, named by its subscription id, so a gateway's bridging of legacy subscriptions
//! can be tested end to end. Over HTTP a listen is a held event stream of its own (`sink`):
//! what it hears goes there, and a tools change (`test_trigger_tool_change`, from any request)
//! reaches the listens that asked for `toolsListChanged` as well, outside the gateway's calls.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::mpsc::Sender;

use hangar_core::sync::Unpoisoned;
use serde_json::{Value, json};

use super::peer::Peer;
use crate::protocol;

const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// One open listen.
#[derive(Debug)]
struct Listen {
    id: Value,
    uris: Vec<String>,
    tools: bool,
    /// Its own event stream (HTTP); `None` on stdio, where everything goes to stdout.
    sink: Option<Sender<Value>>,
}

impl Listen {
    /// Sends `message` on this listen's stream, else through `peer`; false once its stream is gone.
    fn tell(&self, message: Value, peer: Option<&dyn Peer>) -> bool {
        match (&self.sink, peer) {
            (Some(sink), _) => sink.send(message).is_ok(),
            (None, Some(peer)) => {
                peer.notify(message);
                true
            }
            (None, None) => true,
        }
    }
}

/// The open listens, by request id (as JSON text).
#[derive(Debug, Default)]
pub struct Listens(Mutex<HashMap<String, Listen>>);

impl Listens {
    fn open(&self) -> std::sync::MutexGuard<'_, HashMap<String, Listen>> {
        self.0.locked()
    }

    /// Opens the listen `id`: acknowledges the resource subscriptions it honours (all of them).
    pub fn listen(&self, id: &Value, params: Option<&Value>, peer: &dyn Peer) {
        self.open_listen(id, params, None, Some(peer));
    }

    /// Opens the listen `id` on an event stream of its own (HTTP): its acknowledgement and all
    /// it hears go to `sink`, until the stream is gone.
    pub fn listen_on(&self, id: &Value, params: Option<&Value>, sink: Sender<Value>) {
        self.open_listen(id, params, Some(sink), None);
    }

    fn open_listen(&self, id: &Value, params: Option<&Value>, sink: Option<Sender<Value>>, peer: Option<&dyn Peer>) {
        let asked = params.and_then(|p| p.get("notifications"));
        let uris: Vec<String> = asked
            .and_then(|n| n.get("resourceSubscriptions"))
            .and_then(Value::as_array)
            .map(|uris| uris.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        let tools = asked.and_then(|n| n.get("toolsListChanged")).and_then(Value::as_bool) == Some(true);
        let honoured = json!({
            "toolsListChanged": tools,
            "promptsListChanged": false,
            "resourcesListChanged": false,
            "resourceSubscriptions": uris,
        });
        let listen = Listen { id: id.clone(), uris, tools, sink };
        let acknowledged = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
            "params": {"notifications": honoured, "_meta": {SUBSCRIPTION_ID: id}}});
        if listen.tell(acknowledged, peer) {
            self.open().insert(id.to_string(), listen);
        }
    }

    /// The tools changed: each listen on a stream of its own that asked for it hears so (on
    /// stdio the change goes to stdout already).
    pub fn tools_changed(&self) {
        self.open().retain(|_, listen| {
            let Some(sink) = listen.sink.as_ref().filter(|_| listen.tools) else { return true };
            let mut changed = protocol::notification("notifications/tools/list_changed");
            changed["params"] = json!({"_meta": {SUBSCRIPTION_ID: listen.id}});
            sink.send(changed).is_ok()
        });
    }

    /// A `notifications/cancelled` for a listen closes it.
    pub fn cancelled(&self, msg: &Value) {
        if let Some(id) = msg.pointer("/params/requestId") {
            self.open().remove(&id.to_string());
        }
    }

    /// `uri` changed: each open listen holding it hears so. Answers how many did.
    pub fn touch(&self, uri: &str, peer: &dyn Peer) -> usize {
        let mut told = 0;
        self.open().retain(|_, listen| {
            if !listen.uris.iter().any(|u| u == uri) {
                return true;
            }
            let mut updated = protocol::notification("notifications/resources/updated");
            updated["params"] = json!({"uri": uri, "_meta": {SUBSCRIPTION_ID: listen.id}});
            let open = listen.tell(updated, Some(peer));
            told += usize::from(open);
            open
        });
        told
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

    #[test]
    fn a_listen_on_its_own_stream_hears_tool_changes_there_until_the_stream_goes() {
        let listens = Listens::default();
        let (sink, heard) = std::sync::mpsc::channel();
        listens.listen_on(&json!("l-1"), Some(&json!({"notifications": {"toolsListChanged": true}})), sink);
        assert_eq!(heard.recv().unwrap()["params"]["notifications"]["toolsListChanged"], true);
        listens.tools_changed();
        let changed = heard.recv().unwrap();
        assert_eq!(changed["method"], "notifications/tools/list_changed");
        assert_eq!(changed["params"]["_meta"][SUBSCRIPTION_ID], "l-1");
        drop(heard);
        listens.tools_changed();
        assert!(listens.open().is_empty(), "a listen whose stream is gone is forgotten");
    }
}
