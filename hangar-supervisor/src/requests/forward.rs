//! `Request::Forward`: any other MCP request to one upstream (never a `tools/call`, which is
//! a call of its own). Only the front door forwards: its client addressed that upstream itself.

use std::time::Duration;

use hangar_core::ipc::{ErrorKind, Forward, IpcError, Reply};
use hangar_core::sync::UnpoisonedRw;

use super::{Answered, Apply, Notices};
use crate::hangar::MAX_CALL_TIMEOUT;
use crate::hangar::{Decision, Hangar};
use crate::server::DEFAULT_CALL_TIMEOUT;

impl Apply for Forward {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let Forward { mcp_server, method, params, timeout_ms, session } = self;
        if method == "tools/call" {
            return Err(IpcError::new(ErrorKind::InvalidArgument, "a tool call is a `call` request"));
        }
        let found = hangar.visible(decide.view(), &mcp_server);
        let server = decide.forward(&mcp_server, &method, &params, found)?;
        // An isolated server is asked on the caller's own instance.
        let server = server.serving(&decide.caller().identity, session.as_deref())?;
        let timeout = timeout_ms.map_or(DEFAULT_CALL_TIMEOUT, Duration::from_millis).min(MAX_CALL_TIMEOUT);
        let _permit = hangar.admit(&server)?;
        let forwarded = server.forward(&decide.caller().identity, &method, params, timeout).await;
        let mut answer = forwarded.map_err(|err| hangar.upstream_words(err, true))?;
        // Resource contents and prompt texts are kept clean of secrets as tool results are.
        let access = hangar.access.reading().clone();
        decide.redact(&access.redaction, &mcp_server, &mut answer)?;
        Ok(Reply::Forwarded(answer))
    }
}
