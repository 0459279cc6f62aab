//! `Request::ClientAnswer`: a legacy client's answer, to whoever waits for it (`calls/cancel.rs`).

use hangar_core::ipc::ClientAnswer;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for ClientAnswer {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        Ok(hangar.client_answer(decide, &self.session, &self.request_id, self.response))
    }
}
