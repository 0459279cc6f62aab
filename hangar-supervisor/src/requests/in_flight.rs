//! `Request::InFlight`: the tool calls running upstream now. An admin sees every one; anyone
//! else only its own, on the servers (and its own instances) its view sees.

use hangar_core::ipc::Reply;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

/// The handler of the unit variant `Request::InFlight`.
pub(crate) struct InFlight;

impl Apply for InFlight {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let (view, me) = (decide.view(), &decide.caller().identity);
        let admin = view.is_admin();
        let listed = hangar
            .calls
            .in_flight
            .list(|server, identity| admin || (identity == me.as_str() && view.sees_unit(me, server)));
        Ok(Reply::InFlight(listed))
    }
}
