//! `Request::AnswerUpstream`: a client's answer to an upstream's own request a call relayed.

use hangar_core::ipc::AnswerUpstream;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for AnswerUpstream {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        hangar.answer_upstream(decide.view(), &self.mcp_server, &self.ask_id, &self.response)
    }
}
