//! `Request::Targets`: what the prober should check; the hangar's own clients only.

use hangar_core::ipc::Reply;

use super::{Answered, Apply, Notices};
use crate::hangar::hangar_only;
use crate::hangar::{Decision, Hangar};

/// The handler of the unit variant `Request::Targets`.
pub(crate) struct Targets;

impl Apply for Targets {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        hangar_only(decide.view())?;
        Ok(Reply::Targets(hangar.units().iter().filter_map(|s| s.probe_target()).collect()))
    }
}
