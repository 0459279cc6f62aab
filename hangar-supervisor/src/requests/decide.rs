//! `Request::Decide`: a person approves or denies a call waiting for approval. Only an admin or
//! a profile with `approver: true` may, and never on its own call unless
//! `approvals.self_approve`; the decision releases the waiting call, wherever it waits, once.
//! The decider's request is audited (`approve` or `deny`, naming the server and tool), as the
//! call's own entry names the approval.

use hangar_core::approvals::{Decide, is_approval_id};
use hangar_core::ipc::{ErrorKind, IpcError, Reply};
use hangar_core::sync::UnpoisonedRw;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for Decide {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let (view, caller) = (decide.view(), decide.caller());
        if !view.is_approver() {
            return Err(IpcError::forbidden(
                "deciding approvals needs a profile with `approver: true` or `admin: true`",
            ));
        }
        if !is_approval_id(&self.id) {
            return Err(IpcError::new(ErrorKind::NotFound, "no pending approval has that id"));
        }
        let self_approve = hangar.access.reading().approvals.self_approve;
        let action = if self.approve { "approve" } else { "deny" };
        let decided = hangar.calls.approvals.decide(
            &self.id,
            (&caller.identity, self.approve),
            |approval| {
                decide.decision(action, &approval.mcp_server, &approval.tool);
                if approval.identity == caller.identity && !self_approve {
                    return Err(IpcError::forbidden(
                        "this is your own call: someone else decides (approvals.self_approve is off)",
                    ));
                }
                Ok(())
            },
            &hangar.shared.journal,
        )?;
        Ok(Reply::Decided(Box::new(decided)))
    }
}
