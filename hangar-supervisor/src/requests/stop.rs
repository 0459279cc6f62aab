//! `Request::Stop`: a server stopped, by a view that may act.

use hangar_core::ipc::{Reply, Stop};
use hangar_core::lifecycle::StopReason;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for Stop {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let view = decide.view();
        let server = decide.admin("stop", &self.mcp_server, hangar.visible(view, &self.mcp_server))?;
        hangar.record_action(decide.caller(), view, &self.mcp_server, "stop");
        Ok(Reply::Stopped(server.stop(StopReason::UserRequest).await))
    }
}
