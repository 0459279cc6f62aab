//! `Request::Logs`: a server's last log lines, for a view that may read them.

use hangar_core::ipc::{ErrorKind, IpcError, Logs, MAX_LOG_LINES, Reply};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for Logs {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let Logs { mcp_server, lines } = self;
        let found = hangar.visible_unit(decide.caller(), decide.view(), &mcp_server);
        // An instance's log is its owner's to read (`visible_unit` let no one else's through);
        // any other log an admin's.
        let server = match found {
            Ok(server) if server.instance_of().is_some() => server,
            found => decide.admin_read("logs", &mcp_server, found)?,
        };
        if !(1..=MAX_LOG_LINES).contains(&lines) {
            return Err(IpcError::new(
                ErrorKind::InvalidArgument,
                format!("lines must be from 1 to {MAX_LOG_LINES}, got {lines}"),
            ));
        }
        Ok(Reply::Logs(server.log().tail(lines)))
    }
}
