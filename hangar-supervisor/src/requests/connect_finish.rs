//! `Request::ConnectFinish`: the authorization server's answer came back to a browser (see
//! `hangar_core::upstream_tokens`). Public: the flow found by `state` names the identity the
//! token is stored for, and only the browser that opened it may finish it.

use hangar_core::ipc::{ConnectFinish, Reply};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for ConnectFinish {
    async fn apply(self, hangar: &Hangar, _decide: &Decision<'_>, _notices: Notices) -> Answered {
        let mcp_server = hangar.connect_finish(self).await?;
        Ok(Reply::Connected { mcp_server })
    }
}
