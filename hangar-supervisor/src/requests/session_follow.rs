//! `Request::SessionFollow`: each message for the session's stream as a notice, until the
//! session ends, another follower takes over (the registry drops the sender), or the caller
//! cancels (this future is dropped).

use hangar_core::ipc::{ErrorKind, IpcError, Reply, SessionFollow};
use tokio::sync::mpsc;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for SessionFollow {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, notices: Notices) -> Answered {
        let (caller, session_id) = (decide.caller(), &self.session_id);
        hangar.sessions.with(|all, _| all.seen_as(session_id, caller));
        let notices = notices.ok_or_else(|| IpcError::new(ErrorKind::Internal, "a followed session needs notices"))?;
        let (stream, mut messages) = mpsc::unbounded_channel();
        hangar.sessions.with(|all, now| all.follow(session_id, &caller.identity, stream, now))?;
        while let Some(message) = messages.recv().await {
            if notices.send(message).is_err() {
                break;
            }
        }
        Ok(Reply::SessionEnded)
    }
}
