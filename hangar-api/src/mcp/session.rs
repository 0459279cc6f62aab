//! Legacy `Mcp-Session-Id`s. The supervisor keeps the sessions (its `sessions.rs`: owner, TTL,
//! log level, subscriptions, stream), so every API instance sees the same ones; this file mints
//! the ids and speaks to the supervisor about them.
//!
//! An id is `hgr1-<negotiated version>-<32 random lower-case hex>` (128 random bits, so ids are
//! not guessed); an id in another shape is unknown without asking anyone.

use axum::http::StatusCode;
use hangar_core::ipc::{ErrorKind, IpcError, SessionChange, SessionState};
use hangar_core::jsonrpc::{INVALID_PARAMS, RpcError};
use hangar_core::mcp::LEGACY_REVISIONS;
use serde_json::{Value, json};

use super::errors::session_not_found;
use super::reply::McpReply;
use crate::state::Calling;

use crate::random;

const PREFIX: &str = "hgr1-";
const RANDOM_HEX: usize = 32;

pub fn mint(version: &str) -> String {
    format!("{PREFIX}{version}-{}", random::hex(RANDOM_HEX / 2))
}

/// The negotiated version an id carries, if it is one of ours. In a fleet an id ends in its
/// owner's tag (`hangar_core::cluster`); one whose tag does not open here is still this shape,
/// so it is an unknown session (404), not a malformed request.
pub fn parse(id: &str) -> Option<&str> {
    let id = hangar_core::cluster::split_tag(id).map_or(id, |(bare, _)| bare);
    let (version, hex) = id.strip_prefix(PREFIX)?.rsplit_once('-')?;
    let hex_ok = hex.len() == RANDOM_HEX && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    (hex_ok && LEGACY_REVISIONS.contains(&version)).then_some(version)
}

/// What a request changes in its session, carried by the same round trip that checks it.
pub fn change(method: &str, params: Option<&Value>) -> Option<SessionChange> {
    let text = |key| params.and_then(|p| p.get(key)).and_then(Value::as_str).map(str::to_owned);
    match method {
        "logging/setLevel" => text("level").map(SessionChange::LogLevel),
        "resources/subscribe" => text("uri").map(SessionChange::Subscribe),
        "resources/unsubscribe" => text("uri").map(SessionChange::Unsubscribe),
        _ => None,
    }
}

/// The capabilities an `initialize` declares (`{}` when it declares none).
pub fn client_capabilities(params: Option<&Value>) -> Value {
    params.and_then(|p| p.get("capabilities")).filter(|c| c.is_object()).cloned().unwrap_or_else(|| json!({}))
}

/// The longest client name and version kept (`clientInfo`, shown on `GET /api/clients`).
const MAX_CLIENT_INFO: usize = 64;

/// What an `initialize`'s `clientInfo` says: `name version`, printable characters only, cut at
/// [`MAX_CLIENT_INFO`]; `None` without a name.
pub fn client_info(params: Option<&Value>) -> Option<String> {
    let info = params?.get("clientInfo")?;
    let name = info.get("name")?.as_str()?;
    let said = match info.get("version").and_then(Value::as_str) {
        Some(version) => format!("{name} {version}"),
        None => name.to_owned(),
    };
    let kept: String = said.chars().filter(|c| !c.is_control()).take(MAX_CLIENT_INFO).collect();
    (!kept.trim().is_empty()).then_some(kept)
}

/// The session `id` at the supervisor, with `change` applied: its state, or the status and
/// error to answer (404 for a session it does not know).
pub async fn check(
    app: &Calling,
    id: &str,
    change: Option<SessionChange>,
) -> Result<SessionState, (StatusCode, RpcError)> {
    app.supervisor.session_use(id, change).await.map_err(|err| match err.kind {
        ErrorKind::NotFound => (StatusCode::NOT_FOUND, session_not_found()),
        ErrorKind::InvalidArgument => (StatusCode::OK, RpcError::invalid_params(err.message)),
        _ => (failure_status(&err), RpcError::internal(err.message)),
    })
}

/// The HTTP status of a session request the supervisor could not answer.
pub fn failure_status(err: &IpcError) -> StatusCode {
    match err.kind {
        ErrorKind::NotFound => StatusCode::NOT_FOUND,
        ErrorKind::InvalidArgument => StatusCode::BAD_REQUEST,
        ErrorKind::SupervisorUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::ConcurrencyLimited => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The JSON-RPC error of a session the supervisor would not open: its words, and (for a limit
/// reached) the `error_type` and the limit's key path in `data`, as the hangar's tools say them.
pub fn open_failure(err: IpcError) -> RpcError {
    let data = (err.kind == ErrorKind::ConcurrencyLimited)
        .then(|| json!({"error_type": err.kind.as_str(), "details": err.details}));
    let error = RpcError::internal(err.message);
    match data {
        Some(data) => error.with_data(data),
        None => error,
    }
}

/// A subscription is the session's once recorded: an upstream that cannot take
/// `resources/subscribe` itself (a 2026-07-28 one, one without subscriptions) does not fail it.
/// A resource nobody has is still an error.
pub fn subscription_kept(mut reply: McpReply) -> McpReply {
    if let Some(answer) = &mut reply.body
        && answer.outcome.as_ref().is_err_and(|err| err.code != INVALID_PARAMS)
    {
        answer.outcome = Ok(json!({}));
    }
    reply
}

/// Tells the supervisor where the session's subscription to `uri` lives upstream, so it holds
/// that server's `subscriptions/listen` (2026-07-28) and names the updates as the client wrote
/// the URI. A URI no server has stays the plain record it is.
pub async fn bridge_subscription(app: &Calling, session_id: &str, uri: String) {
    let Some((mcp_server, upstream_uri)) = super::front_door::resource_owner_of(&app.supervisor, &uri).await else {
        return;
    };
    let change = SessionChange::SubscribeUpstream { uri, mcp_server, upstream_uri };
    if let Err(err) = app.supervisor.session_use(session_id, Some(change)).await {
        tracing::debug!(kind = err.kind.as_str(), "a subscription was not bridged upstream");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_ids_parse_back_to_their_version() {
        let id = mint("2025-06-18");
        assert!(id.starts_with("hgr1-2025-06-18-"));
        assert_eq!(id.len(), "hgr1-2025-06-18-".len() + 32);
        assert_eq!(parse(&id), Some("2025-06-18"));
        assert_ne!(mint("2025-06-18"), id);
    }

    #[test]
    fn foreign_ids_are_unknown() {
        for id in [
            "",
            "hgr1-",
            "abc",
            "hgr1-2025-06-18-0123",
            "hgr1-2025-06-18-0123456789ABCDEF0123456789abcdef",
            "hgr1-2030-01-01-0123456789abcdef0123456789abcdef",
            "hgr2-2025-06-18-0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(parse(id), None, "{id}");
        }
        assert_eq!(parse("hgr1-2024-11-05-0123456789abcdef0123456789abcdef"), Some("2024-11-05"));
    }
}
