//! `Request::Check`: a health check of one server; the hangar's own clients only.

use std::time::Duration;

use hangar_core::ipc::{Check, Reply};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};
use crate::hangar::{MAX_CALL_TIMEOUT, hangar_only};

impl Apply for Check {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        hangar_only(decide.view())?;
        let timeout = Duration::from_millis(self.timeout_ms).min(MAX_CALL_TIMEOUT);
        Ok(Reply::Checked(hangar.server(&self.mcp_server)?.check(timeout).await?))
    }
}
