//! `Request::Auth`: the running `auth:` block; the hangar's own clients only.

use hangar_core::ipc::Reply;
use hangar_core::sync::UnpoisonedRw;

use super::{Answered, Apply, Notices};
use crate::hangar::hangar_only;
use crate::hangar::{Decision, Hangar};

/// The handler of the unit variant `Request::Auth`.
pub(crate) struct Auth;

impl Apply for Auth {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        hangar_only(decide.view())?;
        Ok(Reply::Auth(hangar.access.reading().auth.clone()))
    }
}
