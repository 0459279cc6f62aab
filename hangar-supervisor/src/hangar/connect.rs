//! Minting a connect flow: the URL by which one identity connects its own account to a
//! `per: user` server (see `hangar_core::upstream_tokens` for the whole flow).
//!
//! Skeleton: the interface the call pipeline and `Request::ConnectBegin` use.

use hangar_core::ipc::{ErrorKind, IpcError};

use super::Hangar;

impl Hangar {
    /// A new connect flow for `identity` on `mcp_server`: its URL (under
    /// `credentials.public_url`) and when it stops working (RFC 3339).
    pub(crate) fn connect_url(&self, _identity: &str, mcp_server: &str) -> Result<(String, String), IpcError> {
        Err(IpcError::new(
            ErrorKind::InvalidArgument,
            format!("connecting an account to `{mcp_server}` is not built yet"),
        ))
    }
}
