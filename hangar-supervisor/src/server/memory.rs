//! What a server keeps across a restart of the hangar (`journal::Remembered`, the `servers`
//! table): its lifecycle (dead record and backoff streak, `hangar_core::lifecycle::Memory`) and
//! its last known catalog (tools as declared, and the last answers to the prompt and resource
//! list methods), both under the key of the config they were learned with (`memory_key.rs`). A
//! config that changed since, in what the key covers, makes the memory stale: it is not used.
//!
//! Saved on every change (a transition, a new tool list, a new list answer), off the call path
//! (the journal's writer thread). Nothing of the config is kept but its digest; the catalog is
//! the upstream's declarations, which the front door hands its clients anyway.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use hangar_core::lifecycle::{Lifecycle, Memory};
use hangar_core::record::ToolInfo;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Inner, Server, Tools};
use crate::journal::Remembered;
use crate::upstream::RequestError;
use hangar_core::ipc::IpcError;

/// The list methods whose last answer is remembered, so the front door can list a cold server's
/// prompts and resources without starting it.
const REMEMBERED_LISTS: [&str; 3] = ["prompts/list", "resources/list", "resources/templates/list"];

/// A list method's last answer: its result, or the JSON-RPC error code the upstream refused it
/// with (a server without prompts says so once; it is not started again to say it again).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum ListAnswer {
    Result(Value),
    Refused { jsonrpc_code: i64 },
}

/// The catalog as saved.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Catalog {
    /// `tools/list` entries, as declared.
    tools: Vec<Value>,
    /// The last first-page answer to each of [`REMEMBERED_LISTS`], by method.
    #[serde(default)]
    lists: BTreeMap<String, ListAnswer>,
}

/// What a server starts with, from what the last run remembered.
#[derive(Default)]
pub(super) struct Restored {
    pub lifecycle: Lifecycle,
    pub failure_streak: u32,
    /// `Some` when a catalog was remembered (its tools may be none).
    pub tools: Option<Tools>,
    pub lists: BTreeMap<String, ListAnswer>,
}

/// What to start with, from `memory` if it was saved under `key` (`memory_key.rs`).
pub(super) fn restore(id: &str, key: &str, memory: Option<Remembered>) -> Restored {
    let Some(memory) = memory else { return Restored::default() };
    if memory.config_hash != key {
        tracing::info!(mcp_server = %id, "its config changed since the last run; what that run knew of it is not used");
        return Restored::default();
    }
    let saved = memory.lifecycle.as_deref().and_then(|json| serde_json::from_str::<Memory>(json).ok());
    let catalog = memory.catalog.as_deref().and_then(|json| serde_json::from_str::<Catalog>(json).ok());
    let restored = Restored {
        lifecycle: saved.as_ref().map(Lifecycle::restore).unwrap_or_default(),
        failure_streak: saved.as_ref().map_or(0, |m| m.failure_streak),
        lists: catalog.as_ref().map(|c| c.lists.clone()).unwrap_or_default(),
        tools: catalog.map(|c| tools_of(c.tools)),
    };
    tracing::info!(
        mcp_server = %id,
        state = restored.lifecycle.state().as_str(),
        tools = restored.tools.as_ref().map(|t| t.infos.len()),
        "restored what the last run knew"
    );
    restored
}

/// Tools from saved declarations, each checked as `tools/list` checks them.
fn tools_of(declared: Vec<Value>) -> Tools {
    let mut tools = Tools::default();
    for raw in declared {
        if let Ok(info) = serde_json::from_value::<ToolInfo>(raw.clone())
            && !info.name.is_empty()
        {
            tools.infos.push(info);
            tools.raw.push(raw);
        }
    }
    tools
}

impl Server {
    /// Saves what the next run should know of this server (under its lock, so saves are queued
    /// in the order of the changes).
    pub(super) fn remember(&self, inner: &Inner) {
        // An instance is its owner's for a while, not the hangar's to remember.
        if self.instance_of.is_some() {
            return;
        }
        let lifecycle = serde_json::to_string(&inner.lifecycle.memory(inner.failure_streak)).ok();
        let catalog = inner
            .catalog_known
            .then(|| Catalog { tools: inner.tools.raw.clone(), lists: inner.lists.clone() })
            .and_then(|catalog| serde_json::to_string(&catalog).ok());
        let updated_at_ms =
            SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(0));
        self.shared.journal.remember(Remembered {
            mcp_server: self.id.clone(),
            config_hash: self.memory_key.clone(),
            lifecycle,
            catalog,
            updated_at_ms,
        });
    }

    /// The remembered answer to a list method, for a server that is not running: the front
    /// door lists its prompts and resources without starting it. A refusal is the same error
    /// the upstream's refusal was.
    pub(super) fn remembered_list(&self, method: &str) -> Option<Result<Value, IpcError>> {
        let answer = {
            let inner = self.lock();
            if inner.process.is_some() {
                return None;
            }
            inner.lists.get(method).cloned()?
        };
        Some(match answer {
            ListAnswer::Result(result) => Ok(result),
            ListAnswer::Refused { jsonrpc_code } => Err(self.request_failure(
                method,
                RequestError::Rpc { method: method.to_owned(), code: jsonrpc_code, data: None, upstream: None },
            )),
        })
    }

    /// Keeps a running server's answer to a list method (a result, or a JSON-RPC refusal), for
    /// when it is not running.
    pub(super) fn keep_list(&self, method: &str, outcome: &Result<Value, RequestError>) {
        let answer = match outcome {
            Ok(result) => ListAnswer::Result(result.clone()),
            Err(RequestError::Rpc { code, .. }) => ListAnswer::Refused { jsonrpc_code: *code },
            // Timeouts and broken pipes say nothing about what it serves.
            Err(_) => return,
        };
        let mut inner = self.lock();
        if inner.lists.get(method) == Some(&answer) {
            return;
        }
        inner.lists.insert(method.to_owned(), answer);
        inner.catalog_known = true;
        self.remember(&inner);
    }
}

/// A remembered list method asked for its first page, with nothing else that could change the
/// answer (only `_meta`): the requests [`Server::remembered_list`] may answer and
/// [`Server::keep_list`] keeps.
pub(super) fn is_first_page(method: &str, params: &Value) -> bool {
    REMEMBERED_LISTS.contains(&method)
        && match params {
            Value::Null => true,
            Value::Object(map) => map.keys().all(|key| key == "_meta"),
            _ => false,
        }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_core::lifecycle::{Event, State};
    use serde_json::json;

    fn remembered(hash: &str, lifecycle: &Lifecycle, catalog: Option<Value>) -> Remembered {
        Remembered {
            mcp_server: "a".into(),
            config_hash: hash.into(),
            lifecycle: serde_json::to_string(&lifecycle.memory(3)).ok(),
            catalog: catalog.map(|c| c.to_string()),
            updated_at_ms: 0,
        }
    }

    #[test]
    fn memory_under_the_same_config_is_restored_and_a_stale_one_is_not() {
        let mut dead = Lifecycle::default();
        dead.apply(Event::Start, SystemTime::now()).unwrap();
        dead.apply(Event::GaveUp { retry_allowed_at: None }, SystemTime::now()).unwrap();
        let catalog = json!({"tools": [{"name": "add", "inputSchema": {}}, {"bad": 1}], "lists": {"prompts/list": {"result": {"prompts": []}}, "resources/list": {"refused": {"jsonrpc_code": -32601}}}});
        let restored = restore("a", "h1", Some(remembered("h1", &dead, Some(catalog.clone()))));
        assert_eq!(restored.lifecycle.state(), State::Dead);
        assert_eq!(restored.failure_streak, 3);
        let tools = restored.tools.unwrap();
        assert_eq!(
            tools.infos.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["add"],
            "malformed entries skipped"
        );
        assert!(restored.lists.contains_key("prompts/list"));

        let stale = restore("a", "h2", Some(remembered("h1", &dead, Some(catalog))));
        assert_eq!(stale.lifecycle.state(), State::Cold);
        assert!(stale.tools.is_none());

        let unreadable =
            Remembered { lifecycle: Some("{".into()), catalog: Some("[".into()), ..remembered("h1", &dead, None) };
        let restored = restore("a", "h1", Some(unreadable));
        assert_eq!(restored.lifecycle.state(), State::Cold);
        assert!(restored.tools.is_none());
    }

    #[test]
    fn only_first_pages_of_the_list_methods_are_remembered() {
        assert!(is_first_page("prompts/list", &json!({})));
        assert!(is_first_page("resources/list", &json!({"_meta": {"progressToken": 1}})));
        assert!(is_first_page("resources/templates/list", &Value::Null));
        assert!(!is_first_page("prompts/list", &json!({"cursor": "2"})));
        assert!(!is_first_page("tools/list", &json!({})));
        assert!(!is_first_page("prompts/get", &json!({})));
    }
}
