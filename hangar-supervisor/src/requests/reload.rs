//! `Request::Reload`: the config re-read, by a view that may act.

use hangar_core::ipc::Reply;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

/// The handler of the unit variant `Request::Reload`.
pub(crate) struct Reload;

impl Apply for Reload {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        decide.admin("reload", "", Ok(()))?;
        Ok(Reply::Reloaded(hangar.reload(&decide.caller().identity).await?))
    }
}
