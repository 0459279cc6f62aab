//! `Request::Subscribe`: acknowledged here; pushing the state changes is the connection's business (`control.rs`).

use hangar_core::ipc::Reply;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

/// The handler of the unit variant `Request::Subscribe`.
pub(crate) struct Subscribe;

impl Apply for Subscribe {
    async fn apply(self, _hangar: &Hangar, _decide: &Decision<'_>, _notices: Notices) -> Answered {
        Ok(Reply::Subscribed)
    }
}
