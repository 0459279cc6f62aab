//! `Request::Cluster`: the fleet this hangar joined; the hangar's own clients only.

use hangar_core::ipc::Reply;

use super::{Answered, Apply, Notices};
use crate::hangar::hangar_only;
use crate::hangar::{Decision, Hangar};

/// The handler of the unit variant `Request::Cluster`.
pub(crate) struct Cluster;

impl Apply for Cluster {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        hangar_only(decide.view())?;
        Ok(Reply::Cluster(hangar.fleet_block()))
    }
}
