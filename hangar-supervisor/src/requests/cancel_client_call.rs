//! `Request::CancelClientCall`: a legacy client's cancel of its own call (`calls/kept/client_relay.rs`).

use hangar_core::ipc::{CancelClientCall, Reply};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for CancelClientCall {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let found = hangar.calls.client_relay.cancel(&decide.caller().identity, &self.session, &self.request_id);
        Ok(Reply::ClientCancelled { found })
    }
}
