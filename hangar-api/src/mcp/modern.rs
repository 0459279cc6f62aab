//! The 2026-07-28 era: stateless, every request carries its version in `params._meta` and
//! mirrors its method (and name) in headers.

use axum::http::{HeaderMap, StatusCode};
use hangar_core::echo::bounded;
use serde_json::{Map, Value, json};

use super::errors::{RpcError, UNSUPPORTED_VERSION};
use super::headers::{single, unwrap_encoded};
use super::id::{Id, Incoming};
use super::message::{self, Message};
use super::methods::{self, INSTRUCTIONS};
use super::reply::McpReply;
use super::{front_door, stream, subscriptions};
use crate::app::AppState;

pub const VERSION: &str = "2026-07-28";
/// Versions served on this path.
pub const SUPPORTED: [&str; 1] = [VERSION];
/// Every version the endpoint speaks, both eras, for `server/discover`.
pub const ALL_VERSIONS: [&str; 5] = [VERSION, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
const VERSION_HEADER: &str = "MCP-Protocol-Version";
const METHODS: [&str; 10] = [
    "server/discover",
    "completion/complete",
    "subscriptions/listen",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];
/// Header mismatch, missing capability, unsupported version: answered with HTTP 400.
const PROTOCOL_ERRORS: [i64; 3] = [-32020, -32021, -32022];
/// Results a client may cache (they carry `ttlMs` and `cacheScope`).
const CACHEABLE: [&str; 5] =
    ["tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"];

/// Whether a request takes this path: its `_meta` names a version, or its header says 2026-07-28.
pub fn is_modern(headers: &HeaderMap, body: &Value) -> bool {
    let by_meta = body.get("params").and_then(|p| p.get("_meta")).and_then(|m| m.get(META_VERSION)).is_some();
    by_meta || single(headers, VERSION_HEADER).ok().flatten().as_deref() == Some(VERSION)
}

/// A request that passed every check, ready to dispatch.
#[derive(Debug, PartialEq)]
pub enum Checked {
    Notification,
    Request { id: Id, method: String, params: Option<Value> },
}

/// The checks of the 2026-07-28 error table, in its order: message shape, `_meta`, version,
/// headers, method. One exception, noted below, keeps the spec's precedence for contradictions.
pub fn validate(headers: &HeaderMap, body: Incoming) -> Result<Checked, McpReply> {
    let bad = StatusCode::BAD_REQUEST;
    let (id, method, params) = match message::parse(body) {
        Ok(Message::Request { id, method, params }) => (id, method, params),
        // Nothing to answer, so nothing to validate.
        Ok(Message::Notification { .. }) => return Ok(Checked::Notification),
        Ok(Message::Response) => {
            let err =
                RpcError::invalid_request("Invalid Request: this server sends no requests, so it takes no responses");
            return Err(McpReply::error(bad, &Value::Null, &err));
        }
        Err(invalid) => return Err(McpReply::error(bad, &invalid.id, &invalid.error)),
    };
    let fail = |status: StatusCode, err: RpcError| McpReply::error(status, &id, &err);

    let meta = params.as_ref().and_then(|p| p.get("_meta")).and_then(Value::as_object);
    let Some(version) = meta.and_then(|m| m.get(META_VERSION)).and_then(Value::as_str) else {
        return Err(fail(bad, RpcError::invalid_params(format!("Invalid params: _meta must carry {META_VERSION}"))));
    };
    if !meta.and_then(|m| m.get(META_CAPABILITIES)).is_some_and(Value::is_object) {
        return Err(fail(
            bad,
            RpcError::invalid_params(format!("Invalid params: _meta must carry {META_CAPABILITIES}")),
        ));
    }
    // A version header that contradicts `_meta` is a mismatch even when the version itself is
    // unknown: the client's two statements disagree, and that is what it must fix first.
    let version_header = single(headers, VERSION_HEADER).map_err(|err| fail(bad, err))?;
    if let Some(header) = &version_header
        && header != version
    {
        return Err(fail(bad, differs(VERSION_HEADER, header, version)));
    }
    if !SUPPORTED.contains(&version) {
        let version = bounded(version);
        let err = RpcError::new(UNSUPPORTED_VERSION, format!("Unsupported protocol version: {version}"))
            .with_data(json!({"supported": SUPPORTED, "requested": version}));
        return Err(fail(bad, err));
    }
    if version_header.is_none() {
        return Err(fail(bad, missing(VERSION_HEADER)));
    }
    check_mirrors(headers, &method, params.as_ref()).map_err(|err| fail(bad, err))?;
    if !METHODS.contains(&method.as_str()) {
        return Err(fail(StatusCode::NOT_FOUND, RpcError::method_not_found(&method)));
    }
    Ok(Checked::Request { id, method, params })
}

fn missing(name: &str) -> RpcError {
    RpcError::header_mismatch(format!("Header mismatch: {name} header is missing"))
}

fn differs(name: &str, header: &str, body: &str) -> RpcError {
    let (header, body) = (bounded(header), bounded(body));
    RpcError::header_mismatch(format!("Header mismatch: {name} header is `{header}` but the body says `{body}`"))
}

/// `Mcp-Method`, and `Mcp-Name` where the method names something, must mirror the body.
fn check_mirrors(headers: &HeaderMap, method: &str, params: Option<&Value>) -> Result<(), RpcError> {
    match single(headers, "Mcp-Method")? {
        None => return Err(missing("Mcp-Method")),
        Some(m) if m != method => return Err(differs("Mcp-Method", &m, method)),
        Some(_) => {}
    }
    let field = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return Ok(()),
    };
    let in_body = params.and_then(|p| p.get(field)).and_then(Value::as_str);
    let in_header = single(headers, "Mcp-Name")?.map(|v| unwrap_encoded("Mcp-Name", &v)).transpose()?;
    match (in_header, in_body) {
        // The body lacks the name as well: the method itself reports that.
        (None, None) => Ok(()),
        (None, Some(_)) => Err(missing("Mcp-Name")),
        (Some(header), Some(body)) if header == body => Ok(()),
        (Some(header), body) => Err(differs("Mcp-Name", &header, body.unwrap_or(""))),
    }
}

pub async fn handle(app: &AppState, headers: &HeaderMap, mut body: Incoming) -> McpReply {
    let raw_token = body.progress_token.take();
    let (id, method, params) = match validate(headers, body) {
        Ok(Checked::Request { id, method, params }) => (id, method, params),
        Ok(Checked::Notification) => return McpReply::accepted(),
        Err(reply) => return reply,
    };
    if method == "tools/call"
        && stream::accepts_event_stream(headers)
        && let Some(wanted) = stream::Wanted::from_params(params.as_ref(), raw_token)
    {
        match stream::front_door_call(app, &id, params.clone(), wanted, complete).await {
            Ok(Some(reply)) => return reply,
            Ok(None) => {}
            Err(err) => return McpReply::error(StatusCode::OK, &id, &err),
        }
    }
    if method == "subscriptions/listen" {
        let front_door = front_door::enabled(&app.supervisor).await;
        return subscriptions::listen(app, &id, params.as_ref(), front_door);
    }
    let result = match method.as_str() {
        "server/discover" => Ok(discover(&front_door::capabilities(&app.supervisor).await)),
        _ => match methods::shared(app, &method, params).await {
            Some(Ok(result)) if CACHEABLE.contains(&method.as_str()) => Ok(cacheable(result)),
            Some(result) => result.map(complete),
            None => Err(RpcError::method_not_found(&method)),
        },
    };
    match result {
        Ok(result) => McpReply::result(&id, result),
        // The protocol's own errors (passed on from an upstream) are 400s, per the error table.
        Err(err) if PROTOCOL_ERRORS.contains(&err.code) => McpReply::error(StatusCode::BAD_REQUEST, &id, &err),
        // Unknown tools and bad arguments are answered with 200, per the error table.
        Err(err) => McpReply::error(StatusCode::OK, &id, &err),
    }
}

pub fn discover(capabilities: &Value) -> Value {
    cacheable(json!({
        "supportedVersions": ALL_VERSIONS,
        "capabilities": capabilities,
        "instructions": INSTRUCTIONS,
    }))
}

/// Every 2026-07-28 result says it is complete and who answered (a legacy upstream's result is
/// bridged here too: it gains `resultType`).
fn complete(result: Value) -> Value {
    let mut result = match result {
        Value::Object(map) => map,
        other => Map::from_iter([("value".to_owned(), other)]),
    };
    result.entry("resultType").or_insert_with(|| Value::from("complete"));
    let meta = result.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        meta.insert(META_SERVER_INFO.into(), methods::server_info());
    }
    Value::Object(result)
}

/// Results a client may cache; ours change with configuration only, so no caching time.
fn cacheable(result: Value) -> Value {
    let mut result = complete(result);
    if let Value::Object(map) = &mut result {
        map.insert("ttlMs".into(), json!(0));
        map.insert("cacheScope".into(), json!("public"));
    }
    result
}

#[cfg(test)]
#[path = "modern_tests.rs"]
mod tests;
