//! `Request::Tools`: one server's tools, as the caller's view sees them.

use hangar_core::ipc::{Reply, Tools};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar, Shown};

impl Apply for Tools {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let view = decide.view();
        Ok(Reply::Tools(view.tools(&*hangar.visible(view, &self.mcp_server)?)))
    }
}
