//! `Request::FrontDoor`: whether the front door is on, and the servers it serves the view.

use hangar_core::ipc::{FrontDoor as Served, Reply};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

/// The handler of the unit variant `Request::FrontDoor`.
pub(crate) struct FrontDoor;

impl Apply for FrontDoor {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let view = decide.view();
        let front_door = hangar.discover(view).await;
        Ok(Reply::FrontDoor(Served {
            front_door,
            servers: hangar.all_visible(view).iter().map(|s| s.id().to_owned()).collect(),
            naming: hangar.naming().as_ref().clone(),
        }))
    }
}
