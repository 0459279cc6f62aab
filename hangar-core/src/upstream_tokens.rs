//! The upstream credentials the hangar stores for an identity (OAuth tokens it obtained for an
//! upstream), as the supervisor seals them ([`StoredToken`]) and as their owner sees them listed
//! ([`Connection`], `GET /api/credentials`): never the token itself.

use serde::{Deserialize, Serialize};

/// A token as stored (sealed) for its owner. Its `Debug` shows no token.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredToken {
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires, in milliseconds since the Unix epoch, if the
    /// authorization server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    #[serde(default)]
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for StoredToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredToken")
            .field("expires_at_ms", &self.expires_at_ms)
            .field("scopes", &self.scopes)
            .field("refreshable", &self.refresh_token.is_some())
            .finish_non_exhaustive()
    }
}

/// One of the caller's own upstream connections, as `GET /api/credentials` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connection {
    pub mcp_server: String,
    /// The authorization server that issued the token.
    pub issuer: String,
    /// The upstream the token is for (RFC 8707's `resource`).
    pub resource: String,
    pub scopes: Vec<String>,
    /// When the access token expires (RFC 3339), if known.
    pub expires_at: Option<String>,
    /// Whether the hangar holds a refresh token for it.
    pub refreshable: bool,
    /// Whether the hangar's key still opens it (`false` after the key that sealed it was dropped
    /// from `credentials.key_file`: connect again).
    pub usable: bool,
    /// When it was stored (RFC 3339).
    pub updated_at: String,
}

/// `DELETE /api/credentials/{server}`: forgets the caller's own connections to one server.
/// Answers [`Reply::CredentialsForgotten`](crate::ipc::Reply::CredentialsForgotten).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForgetCredentials {
    pub mcp_server: String,
}
