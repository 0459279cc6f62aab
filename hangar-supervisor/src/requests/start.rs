//! `Request::Start`: a server started, by a view that may act.

use hangar_core::ipc::{Reply, Start};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};
use crate::server::Cause;

impl Apply for Start {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let view = decide.view();
        let server = decide.admin("start", &self.mcp_server, hangar.visible(view, &self.mcp_server))?;
        hangar.record_action(decide.caller(), view, &self.mcp_server, "start");
        Ok(Reply::Started(server.start(Cause::Explicit).await?))
    }
}
