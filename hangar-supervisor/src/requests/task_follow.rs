//! `Request::TaskFollow`: the caller's tasks' status changes, as notices.

use hangar_core::ipc::TaskFollow;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for TaskFollow {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, notices: Notices) -> Answered {
        hangar.task_follow(decide.caller(), self.task_ids, notices).await
    }
}
