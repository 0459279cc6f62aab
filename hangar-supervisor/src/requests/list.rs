//! `Request::List`: every server the caller's view sees.

use hangar_core::ipc::Reply;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar, Shown};

/// The handler of the unit variant `Request::List`.
pub(crate) struct List;

impl Apply for List {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let (caller, view) = (decide.caller(), decide.view());
        let summary = |server: &std::sync::Arc<crate::server::Server>| {
            let mut summary = view.summary(server);
            summary.instances = hangar.instances_seen(caller, view, server);
            summary
        };
        Ok(Reply::Servers(hangar.all_visible(view).iter().map(summary).collect()))
    }
}
