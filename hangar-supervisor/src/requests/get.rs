//! `Request::Get`: one server's record, as the caller's view sees it.

use hangar_core::ipc::{Get, Reply};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar, Shown};

impl Apply for Get {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let view = decide.view();
        Ok(Reply::Server(Box::new(view.details(&*hangar.visible(view, &self.mcp_server)?))))
    }
}
