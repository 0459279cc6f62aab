//! `Request::CallStats`: calls, errors and latency of the last hour per server and tool, for
//! the servers the caller's view sees (as `/metrics` counts them), an isolated server's
//! instances only as far as the view may see them.

use hangar_core::ipc::Reply;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

/// The handler of the unit variant `Request::CallStats`.
pub(crate) struct CallStats;

impl Apply for CallStats {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        Ok(Reply::CallStats(hangar.call_stats(decide.caller(), decide.view())))
    }
}
