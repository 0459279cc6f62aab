//! `Request::TaskGet`: the caller's task (`calls/park/`).

use hangar_core::ipc::TaskGet;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for TaskGet {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        hangar.task_get(decide.caller(), decide.view(), &self.task_id)
    }
}
