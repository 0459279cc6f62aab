//! `Request::Get`: one server's record, as the caller's view sees it.

use hangar_core::ipc::{Get, Reply};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar, Shown};

impl Apply for Get {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let (caller, view) = (decide.caller(), decide.view());
        let server = hangar.visible_unit(caller, view, &self.mcp_server)?;
        let mut details = view.details(&server);
        details.instances = hangar.instances_seen(caller, view, &server);
        Ok(Reply::Server(Box::new(details)))
    }
}
