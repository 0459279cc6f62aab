//! `Request::Events`: journal events, paged or followed (`hangar/journal_view.rs`).

use hangar_core::ipc::Events;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for Events {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, notices: Notices) -> Answered {
        let Events { since, limit, follow } = self;
        crate::hangar::journal_view::events(hangar, (decide.caller(), decide.view()), (since, limit, follow), notices)
            .await
    }
}
