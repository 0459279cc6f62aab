//! A legacy session's requests (`SessionOpen`, `SessionUse`, `SessionEnd`, `SessionPost`,
//! `SessionFollow`), each answered by its owner's identity from the sessions every API instance
//! shares. A request that uses a session counts as its owner's use; one that changes what the
//! sessions subscribe to has the upstream listens follow, whether it succeeded or not.

use hangar_core::access::Caller;
use hangar_core::ipc::{ErrorKind, IpcError, Reply, SessionChange};
use serde_json::Value;
use tokio::sync::mpsc;

use super::Hangar;

impl Hangar {
    /// `SessionOpen`: the session begins, owned by `caller`.
    pub(super) fn session_open(
        &self,
        caller: &Caller,
        session_id: &str,
        version: &str,
        capabilities: Value,
    ) -> Result<Reply, IpcError> {
        let opened = self.sessions.with(|all, now| all.open(session_id, caller, version, capabilities, now));
        self.hold_listens();
        Ok(Reply::Session(opened?))
    }

    /// `SessionUse`: the session's state after `change`.
    pub(super) fn session_use(
        &self,
        caller: &Caller,
        session_id: &str,
        change: Option<SessionChange>,
    ) -> Result<Reply, IpcError> {
        let subscriptions_change = matches!(
            change,
            Some(SessionChange::Subscribe(_) | SessionChange::Unsubscribe(_) | SessionChange::SubscribeUpstream { .. })
        );
        self.sessions.with(|all, _| all.seen_as(session_id, caller));
        let used = self.sessions.with(|all, now| all.use_session(session_id, &caller.identity, change, now));
        if subscriptions_change {
            self.hold_listens();
        }
        Ok(Reply::Session(used?))
    }

    /// `SessionEnd`: the session is over (its stream with it).
    pub(super) fn session_end(&self, caller: &Caller, session_id: &str) -> Result<Reply, IpcError> {
        let ended = self.sessions.with(|all, now| all.end(session_id, &caller.identity, now));
        self.hold_listens();
        ended.map(|()| Reply::SessionEnded)
    }

    /// `SessionPost`: a message for the session's stream.
    pub(super) fn session_post(&self, caller: &Caller, session_id: &str, message: Value) -> Result<Reply, IpcError> {
        self.sessions.with(|all, _| all.seen_as(session_id, caller));
        self.sessions.with(|all, now| all.post(session_id, &caller.identity, message, now))?;
        Ok(Reply::Posted)
    }

    /// `SessionFollow`: each message for the session's stream as a notice, until the session
    /// ends, another follower takes over (the registry drops the sender), or the caller cancels
    /// (this future is dropped).
    pub(super) async fn session_follow(
        &self,
        caller: &Caller,
        session_id: &str,
        notices: Option<mpsc::UnboundedSender<Value>>,
    ) -> Result<Reply, IpcError> {
        self.sessions.with(|all, _| all.seen_as(session_id, caller));
        let notices = notices.ok_or_else(|| IpcError::new(ErrorKind::Internal, "a followed session needs notices"))?;
        let (stream, mut messages) = mpsc::unbounded_channel();
        self.sessions.with(|all, now| all.follow(session_id, &caller.identity, stream, now))?;
        while let Some(message) = messages.recv().await {
            if notices.send(message).is_err() {
                break;
            }
        }
        Ok(Reply::SessionEnded)
    }
}
