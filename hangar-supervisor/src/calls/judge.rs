//! Stage 2 of the call pipeline: the caller's [`Decision`] on the call. The view's rules judge
//! the tool (a denied one is refused as forbidden) and the call's audit entry is begun; it is
//! finished with the answer. Then the profile's rules on calls judge the tool and its arguments
//! (`hangar_core::rules`), the same for every surface: the first that matches is recorded in the
//! entry, and a denial refuses the call; a rule that asks a person to approve is handed on, and
//! the call waits for the decision before admission (`approve.rs`).

use std::sync::Arc;

use hangar_core::ipc::IpcError;
use hangar_core::rules::Verdict;
use serde_json::Value;

use super::resolve::Found;
use crate::hangar::Decision;
use crate::server::Server;

/// The server and tool a judged call may go to, and the rule asking a person to approve it
/// first, if one does.
pub(super) struct Judged {
    pub(super) server: Arc<Server>,
    pub(super) tool: String,
    pub(super) approve: Option<Verdict>,
}

/// Stage 2: where the call may go, or why not.
pub(super) fn call(decide: &Decision<'_>, found: Found, arguments: &Value) -> Result<Judged, IpcError> {
    let (server, tool) = decide.call(&found.mcp_server, &found.tool, arguments, found.found)?;
    let approve = decide.rules(&server, &tool, arguments)?;
    Ok(Judged { server, tool, approve })
}
