//! `Request::Verdict`: the prober's judgement applied; the hangar's own clients only.

use hangar_core::ipc::{Reply, Verdict};

use super::{Answered, Apply, Notices};
use crate::hangar::hangar_only;
use crate::hangar::{Decision, Hangar};

impl Apply for Verdict {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        hangar_only(decide.view())?;
        Ok(Reply::Applied { state: hangar.server(&self.mcp_server)?.verdict(&self) })
    }
}
