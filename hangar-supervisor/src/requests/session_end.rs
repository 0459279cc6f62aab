//! `Request::SessionEnd`: the session is over (its stream with it).

use hangar_core::ipc::{Reply, SessionEnd};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for SessionEnd {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let identity = &decide.caller().identity;
        let ended = hangar.sessions.with(|all, now| all.end(&self.session_id, identity, now));
        hangar.hold_listens();
        ended.map(|()| Reply::SessionEnded)
    }
}
