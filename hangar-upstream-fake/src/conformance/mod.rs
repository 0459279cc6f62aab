//! `--conformance`: the fixtures the official MCP conformance suite's server
//! scenarios call (tools, resources, prompts, completions, logging,
//! progress, input_required), served on both eras the way every SDK's
//! "conformance server" serves them. The hangar runs this behind its front
//! door so the suite grades the gateway's pass-through.
//!
//! This file: the server's state and the dispatch of one message. The era
//! is chosen per request (`request::Req`), since the hangar may speak either.

mod asking;
mod completion;
mod content;
pub mod custom_headers;
mod inputs;
mod listens;
mod mrtr;
pub mod peer;
mod prompts;
mod request;
mod resources;
mod state_token;
pub mod stdio;
mod streaming;
mod tasks;
mod tools;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use hangar_core::sync::Unpoisoned;
use serde_json::{Map, Value, json};

use self::peer::Peer;
use self::request::{Answer, Era, LegacySetup, Level, MODERN_VERSION, Req};
use crate::protocol::{self, Incoming};

const SERVER_NAME: &str = "hangar-upstream-fake-conformance";
const LEGACY_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// Methods whose results carry caching hints on 2026-07-28.
const CACHEABLE: [&str; 6] =
    ["server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"];

#[derive(Debug, Default)]
pub struct Server {
    legacy: Mutex<LegacySetup>,
    dynamic_tool: AtomicBool,
    dynamic_prompt: AtomicBool,
    signer: state_token::Signer,
    native_tasks: tasks::NativeTasks,
    listens: listens::Listens,
}

impl Server {
    fn legacy(&self) -> MutexGuard<'_, LegacySetup> {
        // The setup is plain data: a panicked writer leaves nothing half-done.
        self.legacy.locked()
    }

    fn dynamic_tool(&self) -> bool {
        self.dynamic_tool.load(Ordering::SeqCst)
    }

    fn dynamic_prompt(&self) -> bool {
        self.dynamic_prompt.load(Ordering::SeqCst)
    }

    /// Adds or removes the dynamic tool and tells the client its list changed.
    fn toggle_tool(&self, peer: &dyn Peer) -> String {
        let now = !self.dynamic_tool.fetch_xor(true, Ordering::SeqCst);
        peer.notify(protocol::notification("notifications/tools/list_changed"));
        self.listens.tools_changed();
        format!("{} {}", tools::DYNAMIC_TOOL, if now { "added" } else { "removed" })
    }

    fn toggle_prompt(&self, peer: &dyn Peer) -> String {
        let now = !self.dynamic_prompt.fetch_xor(true, Ordering::SeqCst);
        peer.notify(protocol::notification("notifications/prompts/list_changed"));
        format!("{} {}", prompts::DYNAMIC_PROMPT, if now { "added" } else { "removed" })
    }

    /// Holds `msg` on an event stream of its own if it is a `subscriptions/listen` request
    /// (HTTP): its acknowledgement and all it hears go to `sink`. Whether it was one.
    pub fn hold_listen(&self, msg: &Value, sink: std::sync::mpsc::Sender<Value>) -> bool {
        match protocol::classify(msg) {
            Incoming::Request { id, method: "subscriptions/listen", params } => {
                self.listens.listen_on(id, params, sink);
                true
            }
            _ => false,
        }
    }

    /// Handles one message; `None` means "send nothing" (notifications, and
    /// responses, which the transport routes to `peer` itself).
    pub fn handle(&self, msg: &Value, peer: &dyn Peer) -> Option<Value> {
        let (id, method, params) = match protocol::classify(msg) {
            Incoming::Request { id, method, params } => (id, method, params),
            Incoming::Notification => {
                if msg.get("method").and_then(Value::as_str) == Some("notifications/cancelled") {
                    self.listens.cancelled(msg);
                }
                return None;
            }
            Incoming::Response { .. } => return None,
            Incoming::Invalid { id } => {
                return Some(protocol::error(&id, protocol::INVALID_REQUEST, "invalid request", None));
            }
        };
        if method == "subscriptions/listen" {
            // Never answered: the stream stays open until the client cancels it.
            self.listens.listen(id, params, peer);
            return None;
        }
        let params = match params {
            None => Map::new(),
            Some(Value::Object(params)) => params.clone(),
            Some(_) => return Some(protocol::error(id, protocol::INVALID_PARAMS, "params must be an object", None)),
        };
        let setup = self.legacy().clone();
        let answer = match Req::new(params, &setup) {
            Ok(req) => {
                let answer = self.dispatch(method, &req, peer);
                finish(method, req.era, answer)
            }
            Err(refused) => refused,
        };
        Some(match answer {
            Answer::Result(result) => protocol::success(id, result),
            Answer::Error { code, message, data } => protocol::error(id, code, &message, data),
        })
    }

    fn dispatch(&self, method: &str, req: &Req, peer: &dyn Peer) -> Answer {
        let legacy = req.era == Era::Legacy;
        match method {
            "server/discover" => Answer::Result(discover()),
            "initialize" if legacy => self.initialize(req),
            "ping" if legacy => Answer::Result(json!({})),
            "logging/setLevel" if legacy => self.set_level(req),
            "resources/subscribe" | "resources/unsubscribe" if legacy => resources::subscribe(req),
            "tools/list" => Answer::Result(tools::list(self)),
            "tools/call" => tools::call(self, req, peer),
            "resources/list" => Answer::Result(resources::list()),
            "resources/templates/list" => Answer::Result(resources::templates()),
            "resources/read" => resources::read(req),
            "prompts/list" => Answer::Result(prompts::list(self)),
            "prompts/get" => prompts::get(self, req, peer),
            "completion/complete" => completion::complete(req),
            "tasks/get" | "tasks/update" | "tasks/cancel" if !legacy => self.native_tasks.handle(method, req),
            // Removed on 2026-07-28 (initialize, ping, ...) or never known.
            _ => Answer::error(protocol::METHOD_NOT_FOUND, "method not found"),
        }
    }

    fn initialize(&self, req: &Req) -> Answer {
        let asked = req.params.get("protocolVersion").and_then(Value::as_str);
        let version = asked.filter(|v| LEGACY_VERSIONS.contains(v)).unwrap_or(LEGACY_VERSIONS[0]);
        // A new initialize starts a new connection's setup.
        *self.legacy() = LegacySetup {
            capabilities: req.params.get("capabilities").cloned().unwrap_or_else(|| json!({})),
            log_level: None,
        };
        let mut capabilities = capabilities();
        capabilities["resources"]["subscribe"] = true.into();
        Answer::Result(json!({"protocolVersion": version, "capabilities": capabilities, "serverInfo": server_info()}))
    }

    fn set_level(&self, req: &Req) -> Answer {
        match req.params.get("level").and_then(Value::as_str).and_then(Level::parse) {
            Some(level) => {
                self.legacy().log_level = Some(level);
                Answer::Result(json!({}))
            }
            None => Answer::invalid("level must be a log level"),
        }
    }
}

fn server_info() -> Value {
    json!({"name": SERVER_NAME, "version": crate::handler::SERVER_VERSION})
}

/// What both eras declare. `listChanged`: the trigger tools announce changes.
fn capabilities() -> Value {
    json!({
        "tools": {"listChanged": true},
        "prompts": {"listChanged": true},
        "resources": {},
        "logging": {},
        "completions": {},
    })
}

fn discover() -> Value {
    json!({"supportedVersions": [MODERN_VERSION], "capabilities": capabilities()})
}

/// Adds what every 2026-07-28 result carries: `resultType`, the server's
/// identity, and caching hints where the method is cacheable. Legacy
/// results go out as the fixtures built them.
fn finish(method: &str, era: Era, answer: Answer) -> Answer {
    let modern = era == Era::Modern || method == "server/discover";
    match answer {
        Answer::Result(Value::Object(mut result)) if modern => {
            let complete = !result.contains_key("resultType");
            if complete {
                result.insert("resultType".into(), "complete".into());
                if CACHEABLE.contains(&method) {
                    // Lists change when the triggers run: never serve them stale.
                    result.insert("ttlMs".into(), 0.into());
                    result.insert("cacheScope".into(), "public".into());
                }
            }
            let meta = result.entry("_meta").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert("io.modelcontextprotocol/serverInfo".into(), server_info());
            }
            Answer::Result(Value::Object(result))
        }
        other => other,
    }
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
