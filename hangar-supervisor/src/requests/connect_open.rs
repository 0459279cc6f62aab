//! `Request::ConnectOpen`: a browser opened a connect URL (see `hangar_core::upstream_tokens`).
//! Public: the flow names its identity, not the request; the first browser's binding claims it.

use hangar_core::ipc::{ConnectOpen, Reply};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for ConnectOpen {
    async fn apply(self, hangar: &Hangar, _decide: &Decision<'_>, _notices: Notices) -> Answered {
        let authorize_url = hangar.connect_open(&self.mcp_server, &self.flow, &self.binding).await?;
        Ok(Reply::ConnectRedirect { authorize_url })
    }
}
