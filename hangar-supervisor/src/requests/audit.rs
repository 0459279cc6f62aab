//! `Request::Audit`: the audit trail, as the caller's view sees it (`hangar/journal_view.rs`).

use hangar_core::journal::AuditQuery;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for AuditQuery {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        crate::hangar::journal_view::audit_page(hangar, decide.caller(), decide.view(), self).await
    }
}
