//! `Request::ConnectOpen`: a step of the per-user connect flow (see `hangar_core::upstream_tokens`).

use hangar_core::ipc::{ConnectOpen, ErrorKind, IpcError};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for ConnectOpen {
    async fn apply(self, _hangar: &Hangar, _decide: &Decision<'_>, _notices: Notices) -> Answered {
        Err(IpcError::new(ErrorKind::InvalidArgument, "connecting an account is not built yet"))
    }
}
