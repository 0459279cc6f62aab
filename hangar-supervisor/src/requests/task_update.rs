//! `Request::TaskUpdate`: answers to the caller's task, which resumes once all are in.

use hangar_core::ipc::TaskUpdate;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for TaskUpdate {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        hangar.task_update(decide.caller(), decide.view(), &self.task_id, &self.input_responses).await
    }
}
