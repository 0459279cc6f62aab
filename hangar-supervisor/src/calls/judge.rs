//! Stage 2 of the call pipeline: the caller's [`Decision`] on the call. The view's rules judge
//! the tool (a denied one is refused as forbidden) and the call's audit entry is begun; it is
//! finished with the answer. Then the profile's rules on calls judge the tool and its arguments
//! (`hangar_core::rules`), the same for every surface: the first that matches is recorded in the
//! entry, and a denial refuses the call. Approvals belong here.

use std::sync::Arc;

use hangar_core::ipc::IpcError;
use serde_json::Value;

use super::resolve::Found;
use crate::hangar::Decision;
use crate::server::Server;

/// Stage 2: the server and tool the call may go to, or why not.
pub(super) fn call(decide: &Decision<'_>, found: Found, arguments: &Value) -> Result<(Arc<Server>, String), IpcError> {
    let (server, tool) = decide.call(&found.mcp_server, &found.tool, arguments, found.found)?;
    decide.rules(&server, &tool, arguments)?;
    Ok((server, tool))
}
