//! `Request::Catalog`: every server's tools as it declared them, for the front door.

use hangar_core::ipc::Reply;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

/// The handler of the unit variant `Request::Catalog`.
pub(crate) struct Catalog;

impl Apply for Catalog {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        Ok(Reply::Catalog(hangar.catalog(decide.view()).await))
    }
}
