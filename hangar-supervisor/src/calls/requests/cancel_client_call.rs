//! `Request::CancelClientCall`: a legacy client's cancel of its own call (`calls/cancel.rs`).

use hangar_core::ipc::CancelClientCall;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for CancelClientCall {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        Ok(hangar.cancel_client_call(decide, &self.session, &self.request_id))
    }
}
