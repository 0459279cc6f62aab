//! `Request::WhoAmI`: the caller as the supervisor judges it.

use std::sync::atomic::Ordering;

use hangar_core::ipc::{Reply, WhoAmI as Judged};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

/// The handler of the unit variant `Request::WhoAmI`.
pub(crate) struct WhoAmI;

impl Apply for WhoAmI {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let (caller, view) = (decide.caller(), decide.view());
        Ok(Reply::WhoAmI(Judged {
            identity: caller.identity.clone(),
            profile: caller.profile.clone(),
            admin: view.is_admin(),
            approver: view.is_approver(),
            hangar_tools: view.own_tools(hangar.front_door.load(Ordering::SeqCst)),
        }))
    }
}
