//! The one access token a `per: shared` server's calls carry, got with the client-credentials
//! grant (machine to machine: no person is asked).
//!
//! The first call discovers the upstream's authorization server ([`super::discovery`]) and asks
//! its token endpoint for a token bound to the upstream (`resource`, RFC 8707). Later calls reuse
//! it until it is near expiry; then one of them asks for the next while the others wait for its
//! answer (one flight, however many calls wait). An upstream's 401 `invalid_token` drops the
//! token it refused, so the retried call gets a new one. The client secret is read from its
//! file at each token request and dropped after it; neither it nor a token is ever logged.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hangar_core::sync::Unpoisoned;
use hangar_core::upstream_auth::UpstreamOAuth;
use oauth2::basic::BasicClient;
use oauth2::{ClientId, ClientSecret, Scope, TokenResponse, TokenUrl};

use super::discovery::{self, AuthServer};

/// The most read of the client-secret file.
const MAX_SECRET_BYTES: u64 = 64 * 1024;
/// How long a token request may take.
const TOKEN_TIMEOUT: Duration = Duration::from_secs(15);
/// Renewal starts this long before expiry at most (less for short-lived tokens: a tenth of
/// their life).
const MAX_RENEW_AHEAD: Duration = Duration::from_secs(60);
/// A token that says nothing of its expiry is renewed after this long.
const UNSTATED_LIFETIME: Duration = Duration::from_secs(3600);

/// Why no token could be had, in words for the server's log (never the secret or a token).
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("discovery: {0}")]
    Discovery(#[from] discovery::DiscoveryError),
    #[error("cannot read the client secret from {path}: {why}")]
    Secret { path: String, why: String },
    #[error("the token endpoint `{0}` is not a URL")]
    TokenUrl(String),
    #[error("the token request to {endpoint} failed: {why}")]
    Request { endpoint: String, why: String },
}

/// A token and when to stop using it.
#[derive(Clone)]
struct Held {
    secret: String,
    renew_at: Instant,
}

/// One upstream's shared client-credentials token.
pub struct SharedToken {
    http: reqwest::Client,
    endpoint: String,
    client_id: String,
    secret_file: PathBuf,
    scopes: Vec<String>,
    server: Mutex<Option<AuthServer>>,
    held: Mutex<Option<Held>>,
    /// Held by the one call renewing the token; the others wait on it, then read `held`.
    flight: tokio::sync::Mutex<()>,
}

impl SharedToken {
    /// The shared token of the server at `endpoint`, as `oauth` configures it.
    pub fn new(http: reqwest::Client, endpoint: &str, oauth: &UpstreamOAuth) -> SharedToken {
        SharedToken {
            http,
            endpoint: endpoint.to_owned(),
            client_id: oauth.client.id.clone(),
            secret_file: oauth.client.secret_file.clone(),
            scopes: oauth.scopes.clone(),
            server: Mutex::default(),
            held: Mutex::default(),
            flight: tokio::sync::Mutex::new(()),
        }
    }

    /// The token held now, if it is still good (for a notification, which does not wait).
    pub fn current(&self) -> Option<String> {
        self.held.locked().as_ref().filter(|held| held.renew_at > Instant::now()).map(|held| held.secret.clone())
    }

    /// A good token: the one held, or a new one (one flight however many calls ask at once).
    pub async fn get(&self) -> Result<String, TokenError> {
        if let Some(token) = self.current() {
            return Ok(token);
        }
        let _flight = self.flight.lock().await;
        // Whoever held the flight before may have renewed it meanwhile.
        if let Some(token) = self.current() {
            return Ok(token);
        }
        let held = self.request().await?;
        let token = held.secret.clone();
        *self.held.locked() = Some(held);
        Ok(token)
    }

    /// The upstream refused `token` (401 `invalid_token`): it is not used again.
    pub fn refused(&self, token: &str) {
        let mut held = self.held.locked();
        if held.as_ref().is_some_and(|held| held.secret == token) {
            *held = None;
        }
    }

    /// Asks the authorization server for a new token (discovering it first, once).
    async fn request(&self) -> Result<Held, TokenError> {
        let known = self.server.locked().clone();
        let server = match known {
            Some(server) => server,
            None => {
                let server = discovery::discover(&self.http, &self.endpoint).await?;
                tracing::info!(endpoint = %self.endpoint, issuer = %server.issuer, "found the upstream's authorization server");
                *self.server.locked() = Some(server.clone());
                server
            }
        };
        let secret = hangar_core::small_file::read_regular(&self.secret_file, MAX_SECRET_BYTES)
            .map_err(|err| TokenError::Secret { path: self.secret_file.display().to_string(), why: err.to_string() })?;
        let token_url = TokenUrl::new(server.token_endpoint.clone())
            .map_err(|_| TokenError::TokenUrl(server.token_endpoint.clone()))?;
        let client = BasicClient::new(ClientId::new(self.client_id.clone()))
            .set_client_secret(ClientSecret::new(secret.trim().to_owned()))
            .set_token_uri(token_url);
        let asked = Instant::now();
        let answer = tokio::time::timeout(
            TOKEN_TIMEOUT,
            client
                .exchange_client_credentials()
                .add_scopes(self.scopes.iter().cloned().map(Scope::new))
                .add_extra_param("resource", server.resource.clone())
                .request_async(&self.http),
        )
        .await
        .map_err(|_| TokenError::Request { endpoint: server.token_endpoint.clone(), why: "timed out".into() })?
        .map_err(|err| TokenError::Request { endpoint: server.token_endpoint.clone(), why: describe(&err) })?;
        let lifetime = answer.expires_in().unwrap_or(UNSTATED_LIFETIME);
        let ahead = (lifetime / 10).min(MAX_RENEW_AHEAD);
        Ok(Held { secret: answer.access_token().secret().clone(), renew_at: asked + lifetime - ahead })
    }
}

/// A failed token request in words that carry no secret: the server's OAuth error code and
/// description, or the transport's failure.
fn describe<RE: std::error::Error + 'static>(
    err: &oauth2::RequestTokenError<RE, oauth2::basic::BasicErrorResponse>,
) -> String {
    match err {
        oauth2::RequestTokenError::ServerResponse(response) => response.to_string(),
        oauth2::RequestTokenError::Request(_) => "the request did not complete".into(),
        oauth2::RequestTokenError::Parse(_, _) => "the answer was not a token response".into(),
        oauth2::RequestTokenError::Other(what) => what.clone(),
    }
}
