//! The upstream credentials the hangar stores for an identity (OAuth tokens it obtained for an
//! upstream), as the supervisor seals them ([`StoredToken`]) and as their owner sees them listed
//! ([`Connection`], `GET /api/credentials`): never the token itself; and the requests of the
//! per-user authorization-code flow by which an identity connects its own account
//! ([`ConnectBegin`], [`ConnectOpen`], [`ConnectFinish`]).
//!
//! The flow, as the API and the supervisor share it:
//! 1. An authenticated caller (a call that found no token, `hangar connect`, the page's Connect
//!    button) has the supervisor mint a flow for its identity and one server:
//!    [`ConnectBegin`], answered with the connect URL
//!    (`<credentials.public_url>/oauth/connect/{server}?flow=ID`). The flow is single use and
//!    short-lived; the URL is for that caller only.
//! 2. The browser that opens the URL (`GET /oauth/connect/{server}`, no credential needed) is
//!    bound to the flow: the API draws a random binding, sets it as a cookie, and sends it with
//!    [`ConnectOpen`]; the first opener wins. The supervisor answers the authorization server's
//!    URL (PKCE S256, `state`, `resource`), and the API redirects there.
//! 3. The authorization server sends the browser back to `GET /oauth/callback`. The API sends
//!    what came (`state`, `code` or `error`, `iss`) with the cookie's binding as
//!    [`ConnectFinish`]; the supervisor finds the flow by `state`, uses it up, checks the
//!    binding and `iss` (RFC 9207) before it redeems the code, and stores the token under the
//!    flow's identity.

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

/// `POST /oauth/connect/{server}` (and a call that found no token): mints a connect flow for
/// the caller on `mcp_server`. Answers [`Reply::ConnectUrl`](crate::ipc::Reply::ConnectUrl).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectBegin {
    pub mcp_server: String,
}

/// `GET /oauth/connect/{server}?flow=ID`: the browser that opened the connect URL, bound to
/// the flow by `binding` (the cookie the API set). Answers
/// [`Reply::ConnectRedirect`](crate::ipc::Reply::ConnectRedirect).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectOpen {
    pub mcp_server: String,
    pub flow: String,
    pub binding: String,
}

/// `GET /oauth/callback`: what the authorization server sent back, with the browser's binding
/// cookie. Answers [`Reply::Connected`](crate::ipc::Reply::Connected).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnectFinish {
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The authorization server's `error`, when it refused (the person declined...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The callback's `iss` (RFC 9207), when the authorization server sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iss: Option<String>,
    /// The binding cookie the browser brought back (empty: none).
    pub binding: String,
}

/// Neither shows a code or a binding.
impl std::fmt::Debug for ConnectOpen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectOpen").field("mcp_server", &self.mcp_server).finish_non_exhaustive()
    }
}

impl std::fmt::Debug for ConnectFinish {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectFinish").field("error", &self.error).field("iss", &self.iss).finish_non_exhaustive()
    }
}
