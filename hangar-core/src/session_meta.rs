//! What a legacy session's call tells its upstream from the session: the log level its client
//! set (`logging/setLevel`) and what it declared at `initialize` that an upstream may use (what
//! it can be asked, and MCP Apps), in the call's `_meta` as a 2026-07-28 client would send them.
//! The client's own `_meta` keys win. The supervisor adds them to a session's front-door call
//! as it checks the session (and tells the API what it added, [`SESSION_NOTICE`]); the API adds
//! them to the calls it checks the session for itself.

use serde_json::{Map, Value, json};

use crate::ipc::SessionState;
use crate::mcp::{CLIENT_REQUESTS, EXTENSION_UI, META_CLIENT_CAPABILITIES, META_LOG_LEVEL};

/// The first notice of a call whose session the supervisor checked, when the session set a log
/// level and the call relays log lines: `params._meta` is what the call carries from its
/// session, so that the API knows the level before the upstream's first line. Never sent to a
/// client.
pub const SESSION_NOTICE: &str = "hangar/session";

/// Adds the session's log level and declared capabilities to a call's params (`extra`: the
/// client's other `tools/call` params), beside what the client put in its `_meta`.
pub fn carry(state: &SessionState, extra: &mut Option<Value>) {
    let params = extra.get_or_insert_with(|| json!({}));
    let Value::Object(params) = params else { return };
    let Value::Object(meta) = params.entry("_meta").or_insert_with(|| json!({})) else { return };
    if let Some(level) = &state.log_level {
        meta.entry(META_LOG_LEVEL).or_insert_with(|| json!(level));
    }
    meta.entry(META_CLIENT_CAPABILITIES).or_insert_with(|| declared_upstream(&state.capabilities));
}

/// The part of a client's `initialize` capabilities an upstream hears with its calls: what it
/// can be asked, and the MCP Apps extension if it declared it (the hangar's own extensions,
/// tasks, stay the hangar's).
pub fn declared_upstream(capabilities: &Value) -> Value {
    let askable = CLIENT_REQUESTS
        .iter()
        .filter_map(|(_, capability)| Some(((*capability).to_owned(), capabilities.get(*capability)?.clone())));
    let mut declared: Map<String, Value> = askable.collect();
    if let Some(apps) = capabilities.get("extensions").and_then(|e| e.get(EXTENSION_UI)) {
        declared.insert("extensions".into(), json!({EXTENSION_UI: apps}));
    }
    Value::Object(declared)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn state(capabilities: Value, log_level: Option<&str>) -> SessionState {
        SessionState {
            version: "2025-11-25".into(),
            capabilities,
            log_level: log_level.map(str::to_owned),
            subscriptions: vec![],
        }
    }

    #[test]
    fn a_call_hears_what_its_session_declared_and_its_level() {
        let capabilities = json!({
            "roots": {"listChanged": true},
            "sampling": {},
            "experimental": {"x": 1},
            "extensions": {EXTENSION_UI: {"mimeTypes": ["text/html"]}, "io.modelcontextprotocol/tasks": {}},
        });
        let mut extra = None;
        carry(&state(capabilities, Some("debug")), &mut extra);
        let meta = &extra.unwrap()["_meta"];
        assert_eq!(meta[META_LOG_LEVEL], "debug");
        assert_eq!(
            meta[META_CLIENT_CAPABILITIES],
            json!({"roots": {"listChanged": true}, "sampling": {},
                   "extensions": {EXTENSION_UI: {"mimeTypes": ["text/html"]}}})
        );
    }

    #[test]
    fn the_clients_own_meta_wins_and_other_params_stay() {
        let mut extra = Some(json!({"requestState": "s", "_meta": {META_LOG_LEVEL: "error", "k": 1}}));
        carry(&state(json!({"elicitation": {}}), Some("debug")), &mut extra);
        let extra = extra.unwrap();
        assert_eq!(extra["requestState"], "s");
        assert_eq!(extra["_meta"][META_LOG_LEVEL], "error");
        assert_eq!(extra["_meta"]["k"], 1);
        assert_eq!(extra["_meta"][META_CLIENT_CAPABILITIES], json!({"elicitation": {}}));
    }

    #[test]
    fn only_what_an_upstream_may_use_is_declared() {
        assert_eq!(declared_upstream(&json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})), json!({}));
        assert_eq!(declared_upstream(&json!({"sampling": {}, "experimental": {}})), json!({"sampling": {}}));
        assert_eq!(declared_upstream(&json!({})), json!({}));
    }

    #[test]
    fn without_a_level_none_is_sent() {
        let mut extra = None;
        carry(&state(json!({}), None), &mut extra);
        assert_eq!(extra.unwrap(), json!({"_meta": {META_CLIENT_CAPABILITIES: {}}}));
    }
}
