//! `Request::Ping`: a client's heartbeat, answered at once.

use hangar_core::ipc::Reply;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

/// The handler of the unit variant `Request::Ping`.
pub(crate) struct Ping;

impl Apply for Ping {
    async fn apply(self, _hangar: &Hangar, _decide: &Decision<'_>, _notices: Notices) -> Answered {
        Ok(Reply::Pong)
    }
}
