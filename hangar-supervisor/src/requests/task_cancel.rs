//! `Request::TaskCancel`: the caller's task cancelled, and its call with it.

use hangar_core::ipc::TaskCancel;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for TaskCancel {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        hangar.task_cancel(decide.caller(), decide.view(), &self.task_id)
    }
}
