//! `Request::Credentials`: the caller's own upstream connections (tokens the hangar stores for
//! it), without a token. Only its own: the vault is asked by the caller's identity.

use hangar_core::ipc::{Connection, ErrorKind, IpcError, Reply};
use hangar_core::time::rfc3339_millis;
use hangar_core::upstream_tokens::StoredToken;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};
use crate::vault::Place;

/// The handler of the unit variant `Request::Credentials`.
pub(crate) struct Credentials;

impl Apply for Credentials {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        let Some(vault) = hangar.vault() else { return Ok(Reply::Credentials(Vec::new())) };
        let identity = &decide.caller().identity;
        let entries = vault.list(identity).map_err(|err| {
            tracing::error!(%err, "the stored credentials could not be listed");
            IpcError::new(ErrorKind::Internal, "the stored credentials could not be read")
        })?;
        let listed = entries
            .into_iter()
            .filter(|entry| decide.view().sees_server(&entry.place.mcp_server))
            .map(|entry| {
                let token = entry.value.and_then(|bytes| serde_json::from_slice::<StoredToken>(&bytes).ok());
                connection(entry.place, entry.updated_at_ms, token)
            })
            .collect();
        Ok(Reply::Credentials(listed))
    }
}

fn connection(place: Place, updated_at_ms: i64, token: Option<StoredToken>) -> Connection {
    let at = |ms: u64| rfc3339_millis(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms));
    Connection {
        mcp_server: place.mcp_server,
        issuer: place.issuer,
        resource: place.resource,
        scopes: token.as_ref().map(|t| t.scopes.clone()).unwrap_or_default(),
        expires_at: token.as_ref().and_then(|t| t.expires_at_ms).map(at),
        refreshable: token.as_ref().is_some_and(|t| t.refresh_token.is_some()),
        usable: token.is_some(),
        updated_at: at(u64::try_from(updated_at_ms).unwrap_or(0)),
    }
}
