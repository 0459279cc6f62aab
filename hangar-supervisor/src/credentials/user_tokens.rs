//! The tokens of a `per: user` server's callers: each identity's own, got when they connected
//! their account (authorization code), kept sealed in the vault by (identity, server, issuer,
//! resource), refreshed ahead of expiry in one flight per identity.
//!
//! Skeleton: the interface the upstream connections use; the flow fills it in.

use std::sync::Arc;

use hangar_core::upstream_auth::UpstreamOAuth;

use super::shared_token::TokenError;
use crate::vault::Vault;

/// One `per: user` server's callers' tokens.
pub struct UserTokens {
    #[allow(dead_code)]
    http: reqwest::Client,
    #[allow(dead_code)]
    server: String,
    #[allow(dead_code)]
    endpoint: String,
    #[allow(dead_code)]
    oauth: UpstreamOAuth,
    #[allow(dead_code)]
    vault: Option<Arc<Vault>>,
}

impl UserTokens {
    /// The tokens of server `server` at `endpoint`, as `oauth` configures them, kept in `vault`.
    pub fn new(
        http: reqwest::Client,
        server: &str,
        endpoint: &str,
        oauth: &UpstreamOAuth,
        vault: Option<Arc<Vault>>,
    ) -> UserTokens {
        UserTokens { http, server: server.into(), endpoint: endpoint.into(), oauth: oauth.clone(), vault }
    }

    /// Whether `identity` holds a token for this server (it may need refreshing).
    #[allow(dead_code)] // skeleton, being built
    pub fn connected(&self, _identity: &str) -> bool {
        false
    }

    /// `identity`'s token held now, if still good.
    pub fn current(&self, _identity: &str) -> Option<String> {
        None
    }

    /// `identity`'s good token, refreshed in one flight if due; [`TokenError::NotConnected`]
    /// when they hold none (or it could not be refreshed: `invalid_grant` forgets it).
    pub async fn get(&self, _identity: &str) -> Result<String, TokenError> {
        Err(TokenError::NotConnected)
    }

    /// The upstream refused `token` of `identity`: the next `get` refreshes it once.
    pub fn refused(&self, _identity: &str, _token: &str) {}
}
