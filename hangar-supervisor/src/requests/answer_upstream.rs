//! `Request::AnswerUpstream`: a client's answer to an upstream's own request a call relayed.

use hangar_core::ipc::{AnswerUpstream, Reply};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for AnswerUpstream {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let server = hangar.visible_unit(decide.caller(), decide.view(), &self.mcp_server)?;
        Ok(Reply::UpstreamAnswered { found: server.answer_ask(&self.ask_id, &self.response) })
    }
}
