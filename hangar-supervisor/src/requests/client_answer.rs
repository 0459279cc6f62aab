//! `Request::ClientAnswer`: a legacy client's answer, to whoever waits for it (`calls/kept/client_relay.rs`).

use hangar_core::ipc::{ClientAnswer, Reply};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for ClientAnswer {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let ClientAnswer { session, request_id, response } = self;
        let found = hangar.calls.client_relay.deliver(&decide.caller().identity, &session, &request_id, response);
        Ok(Reply::ClientAnswerDelivered { found })
    }
}
