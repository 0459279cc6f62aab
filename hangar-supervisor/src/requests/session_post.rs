//! `Request::SessionPost`: a message for the session's stream.

use hangar_core::ipc::{Reply, SessionPost};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for SessionPost {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let SessionPost { session_id, message } = self;
        let caller = decide.caller();
        hangar.sessions.with(|all, _| all.seen_as(&session_id, caller));
        hangar.sessions.with(|all, now| all.post(&session_id, &caller.identity, message, now))?;
        Ok(Reply::Posted)
    }
}
