//! `Request::Rates`: audited calls and failures per minute (`hangar/journal_view.rs`).

use hangar_core::ipc::Rates;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for Rates {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        crate::hangar::journal_view::rates(hangar, decide.caller(), decide.view(), self.minutes).await
    }
}
