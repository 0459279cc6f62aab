//! `Request::ForgetCredentials`: the caller's own connections to one server revoked at the
//! authorization server (RFC 7009, where offered) and forgotten. Only its own: another
//! identity's, like none at all, is not found.

use hangar_core::ipc::{ErrorKind, ForgetCredentials, IpcError, Reply};

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for ForgetCredentials {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        hangar.revoke_connections(&decide.caller().identity, &self.mcp_server).await;
        let forgotten = match hangar.vault() {
            Some(vault) => vault.forget(&decide.caller().identity, &self.mcp_server).map_err(|err| {
                tracing::error!(%err, "a stored credential could not be forgotten");
                IpcError::new(ErrorKind::Internal, "the stored credentials could not be changed")
            })?,
            None => 0,
        };
        if forgotten == 0 {
            return Err(IpcError::new(ErrorKind::NotFound, format!("you hold no connection to `{}`", self.mcp_server)));
        }
        Ok(Reply::CredentialsForgotten { forgotten })
    }
}
