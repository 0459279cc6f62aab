//! `Request::AwaitClientAnswer`: a legacy client's answer, waited for (`calls/cancel.rs`).

use hangar_core::ipc::AwaitClientAnswer;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for AwaitClientAnswer {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, notices: Notices) -> Answered {
        hangar.await_client_answer(decide, &self.session, &self.request_id, notices).await
    }
}
