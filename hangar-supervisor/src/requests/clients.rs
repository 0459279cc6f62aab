//! `Request::Clients`: who is connected. An admin sees every open session and every identity
//! seen; anyone else only its own.

use hangar_core::ipc::Reply;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

/// The handler of the unit variant `Request::Clients`.
pub(crate) struct Clients;

impl Apply for Clients {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let admin = decide.view().is_admin();
        let me = decide.caller().identity.as_str();
        let sees = |identity: &str| admin || identity == me;
        let (sessions, held) = hangar.sessions.with(|all, now| (all.listed(now, sees), all.held(now)));
        let identities = hangar.calls.traffic.list(sees, |identity| held.get(identity).copied().unwrap_or_default());
        Ok(Reply::Clients(hangar_core::ipc::Clients { sessions, identities }))
    }
}
