//! The 2026-07-28 era: stateless, every request carries its version in `params._meta` and
//! mirrors its method (and name) in headers.

use axum::http::{HeaderMap, StatusCode};
use hangar_core::echo::bounded;
use hangar_core::jsonrpc::{self, Message, RpcError};
use hangar_core::mcp::{
    HEADER_METHOD, HEADER_NAME, HEADER_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION,
    META_SERVER_INFO, MODERN_REVISION, PROTOCOL_ERRORS, TASK_METHODS, UNSUPPORTED_VERSION,
};
use serde_json::{Map, Value, json};

use super::about::server_info;
use super::dispatch::{self, Request};
use super::era::Era;
use super::errors::header_mismatch;
use super::headers::{single, unwrap_encoded};
use super::id::{Id, Incoming};
use super::reply::McpReply;
use crate::state::Calling;

/// Versions served on this path.
const SUPPORTED: [&str; 1] = [MODERN_REVISION];
/// What only 2026-07-28 serves.
const OWN_METHODS: [&str; 5] =
    ["server/discover", "subscriptions/listen", TASK_METHODS[0], TASK_METHODS[1], TASK_METHODS[2]];
/// Results a client may cache (they carry `ttlMs` and `cacheScope`).
const CACHEABLE: [&str; 6] =
    ["server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"];

/// Results say they are complete (and, where cacheable, for how long); errors follow the
/// error table's statuses.
static MODERN: Era = Era { own_methods: &OWN_METHODS, finish, error_status, mirrors_params: true };

/// Whether a request takes this path: its `_meta` names a version, or its header says 2026-07-28.
pub fn is_modern(headers: &HeaderMap, body: &Value) -> bool {
    let by_meta = body.get("params").and_then(|p| p.get("_meta")).and_then(|m| m.get(META_PROTOCOL_VERSION)).is_some();
    by_meta || single(headers, HEADER_PROTOCOL_VERSION).ok().flatten().as_deref() == Some(MODERN_REVISION)
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
    let (id, method, params) = match jsonrpc::classify(body.body, body.id) {
        Ok(Message::Request { id, method, params }) => (id, method, params),
        // Nothing to answer, so nothing to validate.
        Ok(Message::Notification { .. }) => return Ok(Checked::Notification),
        Ok(Message::Response { .. }) => {
            let err =
                RpcError::invalid_request("Invalid Request: this server sends no requests, so it takes no responses");
            return Err(McpReply::error(bad, &Value::Null, &err));
        }
        Err(invalid) => return Err(McpReply::error(bad, &invalid.id, &invalid.error)),
    };
    let fail = |status: StatusCode, err: RpcError| McpReply::error(status, &id, &err);

    let meta = params.as_ref().and_then(|p| p.get("_meta")).and_then(Value::as_object);
    let Some(version) = meta.and_then(|m| m.get(META_PROTOCOL_VERSION)).and_then(Value::as_str) else {
        return Err(fail(
            bad,
            RpcError::invalid_params(format!("Invalid params: _meta must carry {META_PROTOCOL_VERSION}")),
        ));
    };
    if !meta.and_then(|m| m.get(META_CLIENT_CAPABILITIES)).is_some_and(Value::is_object) {
        return Err(fail(
            bad,
            RpcError::invalid_params(format!("Invalid params: _meta must carry {META_CLIENT_CAPABILITIES}")),
        ));
    }
    // A version header that contradicts `_meta` is a mismatch even when the version itself is
    // unknown: the client's two statements disagree, and that is what it must fix first.
    let version_header = single(headers, HEADER_PROTOCOL_VERSION).map_err(|err| fail(bad, err))?;
    if let Some(header) = &version_header
        && header != version
    {
        return Err(fail(bad, differs(HEADER_PROTOCOL_VERSION, header, version)));
    }
    if !SUPPORTED.contains(&version) {
        let version = bounded(version);
        let err = RpcError::new(UNSUPPORTED_VERSION, format!("Unsupported protocol version: {version}"))
            .with_data(json!({"supported": SUPPORTED, "requested": version}));
        return Err(fail(bad, err));
    }
    if version_header.is_none() {
        return Err(fail(bad, missing(HEADER_PROTOCOL_VERSION)));
    }
    check_mirrors(headers, &method, params.as_ref()).map_err(|err| fail(bad, err))?;
    if !MODERN.serves(&method) {
        return Err(fail(StatusCode::NOT_FOUND, RpcError::method_not_found(&method)));
    }
    Ok(Checked::Request { id, method, params })
}

fn missing(name: &str) -> RpcError {
    header_mismatch(format!("Header mismatch: {name} header is missing"))
}

fn differs(name: &str, header: &str, body: &str) -> RpcError {
    let (header, body) = (bounded(header), bounded(body));
    header_mismatch(format!("Header mismatch: {name} header is `{header}` but the body says `{body}`"))
}

/// `Mcp-Method`, and `Mcp-Name` where the method names something, must mirror the body.
fn check_mirrors(headers: &HeaderMap, method: &str, params: Option<&Value>) -> Result<(), RpcError> {
    match single(headers, HEADER_METHOD)? {
        None => return Err(missing(HEADER_METHOD)),
        Some(m) if m != method => return Err(differs(HEADER_METHOD, &m, method)),
        Some(_) => {}
    }
    let field = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        // SEP-2663's routing header: `Mcp-Name` carries the task id.
        m if TASK_METHODS.contains(&m) => "taskId",
        _ => return Ok(()),
    };
    let in_body = params.and_then(|p| p.get(field)).and_then(Value::as_str);
    let in_header = single(headers, HEADER_NAME)?.map(|v| unwrap_encoded(HEADER_NAME, &v)).transpose()?;
    match (in_header, in_body) {
        // The body lacks the name as well: the method itself reports that.
        (None, None) => Ok(()),
        (None, Some(_)) => Err(missing(HEADER_NAME)),
        (Some(header), Some(body)) if header == body => Ok(()),
        (Some(header), body) => Err(differs(HEADER_NAME, &header, body.unwrap_or(""))),
    }
}

pub async fn handle(app: &Calling, headers: &HeaderMap, mut body: Incoming) -> McpReply {
    let progress_token = body.progress_token.take();
    match validate(headers, body) {
        Ok(Checked::Request { id, method, params }) => {
            dispatch::dispatch(
                app,
                headers,
                &MODERN,
                Request { id, method, params, progress_token, session: None, session_unchecked: false },
            )
            .await
        }
        Ok(Checked::Notification) => McpReply::accepted(),
        Err(reply) => reply,
    }
}

fn finish(method: &str, result: Value) -> Value {
    if CACHEABLE.contains(&method) { cacheable(result) } else { complete(result) }
}

/// The protocol's own errors (passed on from an upstream) are 400s, per the error table;
/// unknown tools and bad arguments are answered with 200.
fn error_status(err: &RpcError) -> StatusCode {
    if PROTOCOL_ERRORS.contains(&err.code) { StatusCode::BAD_REQUEST } else { StatusCode::OK }
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
        meta.insert(META_SERVER_INFO.into(), server_info());
    }
    Value::Object(result)
}

/// Results a client may cache; ours change with configuration only, so no caching time. Public
/// here; `dispatch::scoped` makes those filtered per caller private once `auth` is configured.
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
