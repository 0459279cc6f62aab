//! The tokens of a `per: user` server's callers: each identity's own, got when they connected
//! their account (the authorization-code flow, `crate::hangar::connect`), kept sealed in the
//! vault by (identity, server, issuer, resource), refreshed ahead of expiry in one flight per
//! identity.
//!
//! The vault is where a token lives; memory holds a copy of each identity's, read through: a
//! copy is used only while the vault has not been written since it was read
//! ([`Vault::generation`]), so a token the callback just stored is found, and one forgotten is
//! not served. Refreshing is one flight per identity: however many of one identity's calls wait,
//! one refresh is asked for, and no identity ever waits on another's flight, nor is served
//! another's token. A refresh keeps the old refresh token when the answer brings none; one
//! answered `invalid_grant` forgets the token (the caller then connects again,
//! [`TokenError::NotConnected`]). An upstream that refuses a token ([`UserTokens::refused`])
//! makes the next `get` of that identity refresh it once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hangar_core::sync::Unpoisoned;
use hangar_core::time::now_ms;
use hangar_core::upstream_auth::UpstreamOAuth;
use hangar_core::upstream_tokens::StoredToken;

use super::discovery::{self, AuthServer};
use super::registration;
use super::shared_token::TokenError;
use super::token_requests::{self, TokenRequestError};
use crate::vault::{Place, Vault};

/// Renewal starts this long before expiry at most (less for short-lived tokens: a tenth of
/// their life).
const MAX_RENEW_AHEAD_MS: u64 = 60_000;
/// After a failed refresh, that identity's calls fail at once with its reason for this long.
const RETRY_AFTER: Duration = Duration::from_secs(5);
/// The most identities whose flights are kept; past it, the idle ones are dropped.
const MAX_FLIGHTS: usize = 10_000;

/// One identity's token as read from the vault.
#[derive(Clone)]
struct Held {
    place: Place,
    token: StoredToken,
    /// When to renew it (ms since the epoch); `u64::MAX` when its expiry is unknown.
    renew_at_ms: u64,
    /// The vault's generation read before it was.
    generation: u64,
}

/// One `per: user` server's callers' tokens.
pub struct UserTokens {
    http: reqwest::Client,
    server: String,
    endpoint: String,
    oauth: UpstreamOAuth,
    vault: Option<Arc<Vault>>,
    /// The upstream's authorization server, discovered at the first refresh.
    auth_server: Mutex<Option<AuthServer>>,
    /// Each identity's copy.
    held: Mutex<HashMap<String, Held>>,
    /// The token the upstream last refused, per identity: refreshed before it is served again.
    refused: Mutex<HashMap<String, String>>,
    /// One flight per identity.
    flights: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Each identity's last failed refresh, and when.
    failed: Mutex<HashMap<String, (Instant, String)>>,
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
        UserTokens {
            http,
            server: server.into(),
            endpoint: endpoint.into(),
            oauth: oauth.clone(),
            vault,
            auth_server: Mutex::default(),
            held: Mutex::default(),
            refused: Mutex::default(),
            flights: Mutex::default(),
            failed: Mutex::default(),
        }
    }

    /// Whether `identity` holds a token for this server (it may need refreshing).
    #[allow(dead_code)] // for the status page's connection state
    pub fn connected(&self, identity: &str) -> bool {
        self.fresh_copy(identity).is_some() || self.read(identity).is_some()
    }

    /// `identity`'s token held now, if still good.
    pub fn current(&self, identity: &str) -> Option<String> {
        let held = self.fresh_copy(identity)?;
        let refused = self.refused.locked().get(identity).is_some_and(|token| *token == held.token.access_token);
        (!refused && now_ms() < held.renew_at_ms).then_some(held.token.access_token)
    }

    /// `identity`'s good token, refreshed in one flight if due; [`TokenError::NotConnected`]
    /// when they hold none (or it could not be refreshed: `invalid_grant` forgets it).
    pub async fn get(&self, identity: &str) -> Result<String, TokenError> {
        if let Some(token) = self.current(identity) {
            return Ok(token);
        }
        let flight = self.flight(identity);
        let _flight = flight.lock().await;
        // Whoever held this identity's flight before may have refreshed it meanwhile.
        let Some(held) = self.load(identity) else {
            return Err(TokenError::NotConnected);
        };
        let refused = self.refused.locked().get(identity).is_some_and(|token| *token == held.token.access_token);
        if !refused && now_ms() < held.renew_at_ms {
            return Ok(held.token.access_token);
        }
        if let Some((at, why)) = self.failed.locked().get(identity).cloned()
            && at.elapsed() < RETRY_AFTER
        {
            return Err(TokenError::Recent { why });
        }
        let renewed = self.renew(identity, held).await;
        match &renewed {
            Err(TokenError::NotConnected) | Ok(_) => self.failed.locked().remove(identity),
            Err(err) => self.failed.locked().insert(identity.to_owned(), (Instant::now(), err.to_string())),
        };
        renewed
    }

    /// The upstream refused `token` of `identity`: the next `get` refreshes it once.
    pub fn refused(&self, identity: &str, token: &str) {
        let held = self.held.locked().get(identity).is_some_and(|held| held.token.access_token == token);
        if held {
            self.refused.locked().insert(identity.to_owned(), token.to_owned());
        }
    }

    /// The copy in memory, if the vault has not been written since it was read.
    fn fresh_copy(&self, identity: &str) -> Option<Held> {
        let generation = self.vault.as_ref().map_or(0, |vault| vault.generation());
        self.held.locked().get(identity).filter(|held| held.generation == generation).cloned()
    }

    /// The copy in memory if fresh, else the vault's (then kept in memory).
    fn load(&self, identity: &str) -> Option<Held> {
        if let Some(held) = self.fresh_copy(identity) {
            return Some(held);
        }
        match self.read(identity) {
            Some(held) => {
                self.held.locked().insert(identity.to_owned(), held.clone());
                Some(held)
            }
            None => {
                self.held.locked().remove(identity);
                None
            }
        }
    }

    /// `identity`'s token for this server, from the vault (the latest stored, if several
    /// authorization servers issued one).
    fn read(&self, identity: &str) -> Option<Held> {
        let vault = self.vault.as_ref()?;
        let generation = vault.generation();
        let entries = vault.list(identity).ok()?;
        let entry = entries
            .into_iter()
            .filter(|entry| entry.place.mcp_server == self.server && entry.value.is_some())
            .max_by_key(|entry| entry.updated_at_ms)?;
        let token: StoredToken = serde_json::from_slice(entry.value.as_deref()?).ok()?;
        let stored_at = u64::try_from(entry.updated_at_ms).unwrap_or(0);
        let renew_at_ms = token.expires_at_ms.map_or(u64::MAX, |expires| renew_at(stored_at, expires));
        Some(Held { place: entry.place, token, renew_at_ms, generation })
    }

    /// This identity's flight (made if it has none).
    fn flight(&self, identity: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut flights = self.flights.locked();
        if flights.len() >= MAX_FLIGHTS && !flights.contains_key(identity) {
            // Only flights nobody holds or waits on (the map's own reference is the last).
            flights.retain(|_, flight| Arc::strong_count(flight) > 1);
        }
        flights.entry(identity.to_owned()).or_default().clone()
    }

    /// Refreshes `held` (this identity's flight is held): the new token, stored, or
    /// `NotConnected` when there is nothing to refresh with or the grant is refused.
    async fn renew(&self, identity: &str, held: Held) -> Result<String, TokenError> {
        if held.token.refresh_token.is_none() {
            return Err(TokenError::NotConnected);
        }
        let server = self.auth_server().await?;
        // A token is refreshed only where it was issued.
        if server.issuer != held.place.issuer || server.resource != held.place.resource {
            tracing::info!(server = %self.server, "a stored token's authorization server is no longer the upstream's: connect again");
            return Err(TokenError::NotConnected);
        }
        let client = registration::client_kept(self.vault.as_deref(), &self.oauth, &server)
            .map_err(|err| TokenError::Request { endpoint: server.token_endpoint.clone(), why: err.to_string() })?;
        match token_requests::refresh(&self.http, &server.token_endpoint, &client, &held.token, &server.resource).await
        {
            Ok(token) => {
                let access = token.access_token.clone();
                self.store(identity, &held.place, token)?;
                self.refused.locked().remove(identity);
                tracing::debug!(server = %self.server, "a caller's token was refreshed");
                Ok(access)
            }
            Err(TokenRequestError::InvalidGrant) => {
                tracing::info!(server = %self.server, "a caller's refresh was refused (invalid_grant): the token is forgotten");
                if let Some(vault) = &self.vault
                    && let Err(err) = vault.forget(identity, &self.server)
                {
                    tracing::warn!(%err, "a refused token could not be forgotten");
                }
                self.held.locked().remove(identity);
                self.refused.locked().remove(identity);
                Err(TokenError::NotConnected)
            }
            Err(TokenRequestError::Failed(why)) => Err(TokenError::Request { endpoint: server.token_endpoint, why }),
        }
    }

    /// Keeps `token` at `place`, in the vault and as this identity's copy.
    fn store(&self, identity: &str, place: &Place, token: StoredToken) -> Result<(), TokenError> {
        let stored_at = now_ms();
        let renew_at_ms = token.expires_at_ms.map_or(u64::MAX, |expires| renew_at(stored_at, expires));
        if let Some(vault) = &self.vault {
            let bytes = serde_json::to_vec(&token).map_err(|_| TokenError::Request {
                endpoint: String::new(),
                why: "the refreshed token could not be kept".into(),
            })?;
            if let Err(err) = vault.put(place, &bytes) {
                tracing::warn!(%err, "a refreshed token could not be kept");
            }
        }
        let generation = self.vault.as_ref().map_or(0, |vault| vault.generation());
        self.held.locked().insert(identity.to_owned(), Held { place: place.clone(), token, renew_at_ms, generation });
        Ok(())
    }

    /// The upstream's authorization server (discovered once).
    async fn auth_server(&self) -> Result<AuthServer, TokenError> {
        if let Some(server) = self.auth_server.locked().clone() {
            return Ok(server);
        }
        let server = discovery::discover(&self.http, &self.endpoint).await?;
        *self.auth_server.locked() = Some(server.clone());
        Ok(server)
    }
}

/// When a token stored at `stored_at_ms` and expiring at `expires_at_ms` is renewed: a tenth of
/// its life ahead, at most [`MAX_RENEW_AHEAD_MS`].
fn renew_at(stored_at_ms: u64, expires_at_ms: u64) -> u64 {
    let life = expires_at_ms.saturating_sub(stored_at_ms);
    expires_at_ms.saturating_sub((life / 10).min(MAX_RENEW_AHEAD_MS))
}

#[cfg(test)]
mod tests;
