//! `Request::Call`: the call pipeline (`calls/mod.rs`). A legacy session's call whose session
//! the API did not check is checked here first, one round trip instead of two: the session must
//! be live and the caller's, and what it holds (its log level, what its client declared) is
//! carried in the call (`hangar_core::session_meta`) and told to the API first when the call is
//! relayed.

use hangar_core::ipc::{Asks, CallSpec, ErrorKind, IpcError};
use hangar_core::mcp::META_LOG_LEVEL;
use hangar_core::session_meta::{self, SESSION_NOTICE};
use serde_json::json;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for CallSpec {
    async fn apply(mut self, hangar: &Hangar, decide: &Decision<'_>, notices: Notices) -> Answered {
        if let Some(session) = self.unchecked_session.take() {
            in_session(&mut self, hangar, decide, &session, &notices)?;
        }
        hangar.call_spec(decide, self, notices).await
    }
}

/// Checks the call's session and carries what it holds. `relay.logs` asked for the log lines
/// only if the session wants them: off when it set no level, else told to the API first.
fn in_session(
    spec: &mut CallSpec,
    hangar: &Hangar,
    decide: &Decision<'_>,
    session: &str,
    notices: &Notices,
) -> Result<(), IpcError> {
    let extra = &mut spec.extra;
    let carried = hangar
        .sessions
        .with(|all, now| all.in_call(session, decide.caller(), now).map(|state| session_meta::carry(state, extra)));
    carried.map_err(|err| match err.kind {
        ErrorKind::NotFound => IpcError::new(ErrorKind::SessionNotFound, err.message),
        _ => err,
    })?;
    spec.stance.asks = Asks::declared_in(spec.extra.as_ref());
    let meta = spec.extra.as_ref().and_then(|extra| extra.get("_meta"));
    if meta.and_then(|meta| meta.get(META_LOG_LEVEL)).is_none() {
        spec.relay.logs = false;
    }
    // The API hears the level first, to pick the log lines it passes on; what the client may be
    // asked it asks for itself, should the upstream ask (rarely).
    if let Some(to) = notices
        && spec.relay.logs
    {
        let _ = to.send(json!({"method": SESSION_NOTICE, "params": {"_meta": meta}}));
    }
    Ok(())
}
