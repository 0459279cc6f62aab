//! Request handling: one JSON-RPC message in, at most one reply out.
//! Kept free of I/O (besides stderr logs and flag-file checks) so it can be
//! unit-tested.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

use crate::log::{log, log_fault};
use crate::protocol::{self, Incoming};
use crate::tools;

pub const SERVER_NAME: &str = "hangar-upstream-fake";
pub const SERVER_VERSION: &str = "0.1.0";
const MODERN_VERSIONS: [&str; 2] = ["2026-07-28", "2025-11-25"];
const LEGACY_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
const OLDEST_VERSION: &str = "2024-11-05";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Answers both `server/discover` and `initialize`.
    Modern,
    /// 2024-11-05 only; `server/discover` is "method not found".
    Legacy,
    /// Like `Legacy`, but `server/discover` is never answered at all.
    LegacySilent,
}

impl Mode {
    pub fn label(self) -> &'static str {
        match self {
            Mode::Modern => "modern",
            Mode::Legacy => "legacy",
            Mode::LegacySilent => "legacy-silent",
        }
    }
}

/// Tools served while a flag file exists, instead of the regular ones.
#[derive(Debug)]
pub struct AltTools {
    pub tools: Vec<String>,
    pub flag: PathBuf,
    /// Declared instead of each alternate tool's own description.
    pub description: Option<String>,
}

#[derive(Debug)]
pub struct State {
    pub mode: Mode,
    pub sentinel: String,
    pub tools: Vec<String>,
    pub alt: Option<AltTools>,
    pub fail_flag: Option<PathBuf>,
    pub hang: bool,
    pub hang_flag: Option<PathBuf>,
    /// Stdio only: exit right after answering the handshake.
    pub exit_after_handshake: bool,
    /// Stdio only: wait this long before answering the handshake.
    pub handshake_delay: Option<std::time::Duration>,
}

impl State {
    pub fn new(mode: Mode, sentinel: String, tools: Vec<String>) -> Self {
        Self {
            mode,
            sentinel,
            tools,
            alt: None,
            fail_flag: None,
            hang: false,
            hang_flag: None,
            exit_after_handshake: false,
            handshake_delay: None,
        }
    }

    /// The tool set in force right now (flag files are re-checked each time).
    pub fn active_tools(&self) -> &[String] {
        match &self.alt {
            Some(alt) if alt.flag.exists() => &alt.tools,
            _ => &self.tools,
        }
    }

    /// The `tools/list` entry of a tool in force, with the alternate description while it applies.
    pub fn declare(&self, name: &str) -> Value {
        let mut spec = tools::spec(name);
        if let Some(alt) = &self.alt
            && let Some(description) = &alt.description
            && alt.flag.exists()
        {
            spec["description"] = description.as_str().into();
        }
        spec
    }

    /// True while nothing at all may be answered.
    pub fn silenced(&self) -> bool {
        self.hang || self.hang_flag.as_ref().is_some_and(|f| f.exists())
    }

    fn failing(&self) -> bool {
        self.fail_flag.as_ref().is_some_and(|f| f.exists())
    }

    /// Adds the modern-era result fields; legacy servers never send them.
    fn finish(&self, mut result: Value, cacheable: bool) -> Value {
        if self.mode == Mode::Modern
            && let Some(obj) = result.as_object_mut()
        {
            obj.insert("resultType".into(), "complete".into());
            if cacheable {
                obj.insert("ttlMs".into(), 0.into());
                obj.insert("cacheScope".into(), "public".into());
            }
        }
        result
    }
}

/// Handles one parsed message; `None` means "send nothing".
pub fn handle(state: &State, msg: &Value) -> Option<Value> {
    let (id, method, params) = match protocol::classify(msg) {
        Incoming::Request { id, method, params } => (id, method, params),
        Incoming::Notification => {
            // Tests read this line from the hangar's logs endpoint to see a cancellation arrive.
            if msg.get("method").and_then(Value::as_str) == Some("notifications/cancelled") {
                log(&format!("cancelled request {}", msg.pointer("/params/requestId").unwrap_or(&Value::Null)));
            }
            return None;
        }
        Incoming::Response { id } => {
            log(&format!("the hangar answered our request {id}: {msg}"));
            return None;
        }
        Incoming::Invalid { id } => {
            if state.silenced() {
                return None;
            }
            return Some(protocol::error(&id, protocol::INVALID_REQUEST, "invalid request", None));
        }
    };
    if state.silenced() {
        log_fault(&state.sentinel, &format!("dropping {method} request {id} (hang)"));
        return None;
    }
    if state.failing() {
        log_fault(&state.sentinel, &format!("failing {method} request {id} (fail-flag present)"));
        return Some(scripted_failure(state, id, "fail-flag"));
    }
    let ok = |result| Some(protocol::success(id, result));
    match method {
        "server/discover" => match state.mode {
            Mode::Modern => ok(discover(state)),
            Mode::Legacy => Some(method_not_found(id)),
            Mode::LegacySilent => {
                log("not answering server/discover (legacy-silent)");
                None
            }
        },
        "initialize" => ok(initialize(state, params)),
        "ping" => ok(json!({})),
        "tools/list" => {
            let tools: Vec<Value> = state.active_tools().iter().map(|t| state.declare(t)).collect();
            ok(state.finish(json!({"tools": tools}), true))
        }
        "tools/call" => Some(call(state, id, params)),
        _ => Some(method_not_found(id)),
    }
}

/// The error for a deliberate failure: message and data both carry the
/// sentinel.
pub fn scripted_failure(state: &State, id: &Value, fault: &str) -> Value {
    protocol::error(
        id,
        protocol::INTERNAL_ERROR,
        &format!("scripted failure {}", state.sentinel),
        Some(json!({"fault": fault, "sentinel": state.sentinel})),
    )
}

fn method_not_found(id: &Value) -> Value {
    protocol::error(id, protocol::METHOD_NOT_FOUND, "method not found", None)
}

fn server_info() -> Value {
    json!({"name": SERVER_NAME, "version": SERVER_VERSION})
}

fn capabilities() -> Value {
    json!({"tools": {"listChanged": true}})
}

fn discover(state: &State) -> Value {
    state.finish(
        json!({
            "supportedVersions": MODERN_VERSIONS,
            "capabilities": capabilities(),
            "_meta": {"io.modelcontextprotocol/serverInfo": server_info()},
        }),
        true,
    )
}

fn initialize(state: &State, params: Option<&Value>) -> Value {
    let version = match state.mode {
        Mode::Modern => params
            .and_then(|p| p.get("protocolVersion"))
            .and_then(Value::as_str)
            .filter(|v| LEGACY_VERSIONS.contains(v))
            .unwrap_or(LEGACY_VERSIONS[0]),
        Mode::Legacy | Mode::LegacySilent => OLDEST_VERSION,
    };
    json!({
        "protocolVersion": version,
        "capabilities": capabilities(),
        "serverInfo": server_info(),
    })
}

fn call(state: &State, id: &Value, params: Option<&Value>) -> Value {
    let invalid = |msg: &str| protocol::error(id, protocol::INVALID_PARAMS, msg, None);
    let Some(name) = params.and_then(|p| p.get("name")).and_then(Value::as_str) else {
        return invalid("missing tool name");
    };
    if !state.active_tools().iter().any(|t| t == name) {
        // Tests read this line from the hangar's logs endpoint: a name that reached us undeclared.
        log(&format!("asked for an undeclared tool: {name:?}"));
        return invalid(&format!("unknown tool: {name}"));
    }
    let args = match params.and_then(|p| p.get("arguments")) {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(args)) => args.clone(),
        Some(_) => return invalid("arguments must be an object"),
    };
    if name == tools::RPC_ERROR {
        let message = args.get("message").and_then(Value::as_str).unwrap_or("rpc_error as asked");
        let code = args.get("code").and_then(Value::as_i64).unwrap_or(protocol::INTERNAL_ERROR);
        return protocol::error(id, code, message, args.get("data").cloned());
    }
    // `echo_meta` answers the `_meta` its request carried (trace context included), so a test
    // can see what reached the upstream.
    let outcome = if name == tools::ECHO_META {
        tools::echo_meta(params.and_then(|p| p.get("_meta")))
    } else {
        tools::call(name, &args)
    };
    let mut result = json!({
        "content": [{"type": "text", "text": outcome.text}],
        "isError": outcome.is_error,
    });
    if let (Some(structured), Some(obj)) = (outcome.structured, result.as_object_mut()) {
        obj.insert("structuredContent".into(), structured);
    }
    protocol::success(id, state.finish(result, false))
}

#[cfg(test)]
#[path = "handler_tests.rs"]
mod tests;
