//! `Request::AwaitClientAnswer`: a legacy client's answer, waited for (`calls/kept/client_relay.rs`).

use hangar_core::ipc::{AwaitClientAnswer, Reply};

use super::{Answered, Apply, Notices};
use crate::calls::client_answer_late;
use crate::hangar::{Decision, Hangar};

impl Apply for AwaitClientAnswer {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, notices: Notices) -> Answered {
        let identity = &decide.caller().identity;
        let wait = hangar.calls.client_relay.await_answer(identity, &self.session, &self.request_id, notices);
        let limit = hangar.client_answer_timeout();
        match tokio::time::timeout(limit, wait).await {
            Ok(answer) => Ok(Reply::ClientAnswered(answer?)),
            Err(_) => Err(client_answer_late(limit)),
        }
    }
}
