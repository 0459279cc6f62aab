//! `Request::SessionUse`: the session's state after its change; one that changes what the
//! sessions subscribe to has the upstream listens follow, whether it succeeded or not.

use hangar_core::ipc::{Reply, SessionChange, SessionUse};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for SessionUse {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let SessionUse { session_id, change } = self;
        let caller = decide.caller();
        let subscriptions_change = matches!(
            change,
            Some(SessionChange::Subscribe(_) | SessionChange::Unsubscribe(_) | SessionChange::SubscribeUpstream { .. })
        );
        hangar.sessions.with(|all, _| all.seen_as(&session_id, caller));
        let used = hangar.sessions.with(|all, now| all.use_session(&session_id, &caller.identity, change, now));
        if subscriptions_change {
            hangar.hold_listens();
        }
        Ok(Reply::Session(used?))
    }
}
