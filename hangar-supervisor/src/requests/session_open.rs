//! `Request::SessionOpen`: a legacy session begins, owned by the caller.

use hangar_core::ipc::{Reply, SessionOpen};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for SessionOpen {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let SessionOpen { session_id, version, capabilities, client } = self;
        let caller = decide.caller();
        let opened = hangar.sessions.with(|all, now| {
            let opened = all.open(&session_id, caller, &version, capabilities, now)?;
            all.name_client(&session_id, client);
            Ok::<_, hangar_core::ipc::IpcError>(opened)
        });
        hangar.hold_listens();
        Ok(Reply::Session(opened?))
    }
}
