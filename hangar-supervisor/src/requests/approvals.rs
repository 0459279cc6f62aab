//! `Request::Approvals`: the calls waiting for a person's approval, and those decided lately.
//! Whoever may decide them (an admin, a profile with `approver: true`) sees all; anyone else
//! sees its own calls' only.

use hangar_core::ipc::Reply;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

/// The handler of the unit variant `Request::Approvals`.
pub(crate) struct Approvals;

impl Apply for Approvals {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let (view, identity) = (decide.view(), &decide.caller().identity);
        let all = view.is_approver();
        let listed =
            hangar.calls.approvals.list(|a| all || (a.identity == *identity && view.sees_server(&a.mcp_server)));
        Ok(Reply::Approvals(listed))
    }
}
