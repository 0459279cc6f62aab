//! Token exchange (RFC 8693) for a server with `auth.token_exchange`: the token a caller came
//! with (validated by the API) is exchanged for one meant for the upstream, cached per
//! (identity, audience) until it expires, in one flight per identity, with refusals kept for a
//! short while (a negative cache).
//!
//! Skeleton: the interface the upstream connections use.

use std::sync::Arc;

use hangar_core::upstream_auth::TokenExchange;

use super::shared_token::TokenError;
use super::subjects::Subjects;

/// One server's exchanged tokens, by identity.
pub struct Exchanger {
    #[allow(dead_code)]
    http: reqwest::Client,
    #[allow(dead_code)]
    exchange: TokenExchange,
    /// The tokens callers came with: the subject of each exchange.
    #[allow(dead_code)]
    subjects: Arc<Subjects>,
}

impl Exchanger {
    pub fn new(http: reqwest::Client, exchange: &TokenExchange, subjects: Arc<Subjects>) -> Exchanger {
        Exchanger { http, exchange: exchange.clone(), subjects }
    }

    /// `identity`'s exchanged token held now, if still good.
    pub fn current(&self, _identity: &str) -> Option<String> {
        None
    }

    /// `identity`'s exchanged token: the cached one, or a new exchange (one flight);
    /// [`TokenError::NoSubject`] when the caller came with no token (`Subjects::of`).
    pub async fn get(&self, _identity: &str) -> Result<String, TokenError> {
        Err(TokenError::NoSubject)
    }

    /// The upstream refused `token`: the next `get` exchanges again.
    pub fn refused(&self, _identity: &str, _token: &str) {}
}
