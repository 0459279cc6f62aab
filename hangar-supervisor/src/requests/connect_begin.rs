//! `Request::ConnectBegin`: mints a connect flow for the caller on one `per: user` server it
//! sees (see `hangar_core::upstream_tokens`): the URL to open in a browser, for this caller
//! only. A server outside the caller's view is not found, as ever.

use hangar_core::ipc::{ConnectBegin, IpcError, Reply};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for ConnectBegin {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        hangar.visible(decide.view(), &self.mcp_server)?;
        let (url, expires_at) = hangar.connect_url(&decide.caller().identity, &self.mcp_server)?;
        Ok::<_, IpcError>(Reply::ConnectUrl { url, expires_at })
    }
}
