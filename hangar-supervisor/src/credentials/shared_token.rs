//! The one access token a `per: shared` server's calls carry, got with the client-credentials
//! grant (machine to machine: no person is asked).
//!
//! The first call discovers the upstream's authorization server ([`super::discovery`]) and asks
//! its token endpoint for a token bound to the upstream (`resource`, RFC 8707). Later calls reuse
//! it until it is near expiry; then one of them asks for the next while the others wait for its
//! answer (one flight, however many calls wait). An upstream's 401 `invalid_token` drops the
//! token it refused, so the retried call gets a new one. The client secret is read from its
//! file at each token request and dropped after it; neither it nor a token is ever logged.
//!
//! A new token is kept in the stored credentials too ([`crate::vault`], sealed), under the
//! identity [`SHARED_IDENTITY`], and a supervisor that starts again uses the kept one until it is
//! due for renewal, instead of asking for another.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hangar_core::sync::Unpoisoned;
use hangar_core::time::now_ms;
use hangar_core::upstream_auth::{OAuthClient, UpstreamOAuth};
use oauth2::basic::BasicClient;
use oauth2::{ClientId, ClientSecret, Scope, TokenResponse, TokenUrl};

use super::discovery::{self, AuthServer};
use crate::vault::{Place, Vault};
use hangar_core::upstream_tokens::StoredToken;

/// The identity a `per: shared` server's token is kept under: the hangar's own (reserved, so
/// no caller can be it).
pub const SHARED_IDENTITY: &str = "hangar";

/// The most read of the client-secret file.
pub(super) const MAX_SECRET_BYTES: u64 = 64 * 1024;
/// How long a token request may take.
pub(super) const TOKEN_TIMEOUT: Duration = Duration::from_secs(15);
/// Renewal starts this long before expiry at most (less for short-lived tokens: a tenth of
/// their life).
pub(super) const MAX_RENEW_AHEAD: Duration = Duration::from_secs(60);
/// A token that says nothing of its expiry is renewed after this long.
const UNSTATED_LIFETIME: Duration = Duration::from_secs(3600);
/// After a failed discovery or token request, calls fail at once with its reason for this long,
/// so an authorization server that is down is not asked again by every waiting call in turn.
pub(super) const RETRY_AFTER: Duration = Duration::from_secs(5);

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
    #[error("{why} (less than {} s ago; asked again after that)", RETRY_AFTER.as_secs())]
    Recent { why: String },
    /// A `per: user` server's caller holds no token for it: they must connect their account.
    #[error("this caller has not connected an account to this server")]
    NotConnected,
    /// A `token_exchange` server's caller came with no OAuth token to exchange (a key caller).
    #[error("this caller came with no OAuth token to exchange")]
    NoSubject,
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
    /// Where tokens are kept, and this server's id there.
    store: Option<(Arc<Vault>, String)>,
    /// The kept token was refused by the upstream: the next one is asked for, not loaded.
    kept_refused: AtomicBool,
    /// The last failure to get a token, and when: repeated, without asking, for
    /// [`RETRY_AFTER`].
    failed: Mutex<Option<(Instant, String)>>,
}

impl SharedToken {
    /// The shared token of the server at `endpoint`, as `oauth` configures it with its
    /// pre-registered `client`, kept in `store` (with the server's id) if given.
    pub fn new(
        http: reqwest::Client,
        endpoint: &str,
        oauth: &UpstreamOAuth,
        client: &OAuthClient,
        store: Option<(Arc<Vault>, String)>,
    ) -> SharedToken {
        SharedToken {
            http,
            endpoint: endpoint.to_owned(),
            client_id: client.id.clone(),
            secret_file: client.secret_file.clone(),
            scopes: oauth.scopes.clone(),
            server: Mutex::default(),
            held: Mutex::default(),
            flight: tokio::sync::Mutex::new(()),
            store,
            kept_refused: AtomicBool::new(false),
            failed: Mutex::default(),
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
        // Whoever held the flight before may have renewed it meanwhile, or just failed to.
        if let Some(token) = self.current() {
            return Ok(token);
        }
        if let Some((at, why)) = self.failed.locked().clone()
            && at.elapsed() < RETRY_AFTER
        {
            return Err(TokenError::Recent { why });
        }
        let got = self.renew().await;
        *self.failed.locked() = got.as_ref().err().map(|err| (Instant::now(), err.to_string()));
        got
    }

    /// A token kept in the vault, if still good, else a new one; the flight is held.
    async fn renew(&self) -> Result<String, TokenError> {
        let server = self.server().await?;
        let kept = self.store.as_ref().map(|(store, id)| {
            let key = Place {
                identity: SHARED_IDENTITY.into(),
                mcp_server: id.clone(),
                issuer: server.issuer.clone(),
                resource: server.resource.clone(),
            };
            (store, key)
        });
        if let Some((store, key)) = &kept
            && !self.kept_refused.load(Ordering::Relaxed)
            && let Some(stored) = store.get(key).and_then(|bytes| serde_json::from_slice::<StoredToken>(&bytes).ok())
        {
            let left = renew_at_ms(stored.expires_at_ms.unwrap_or(0)).saturating_sub(now_ms());
            if left > 0 {
                let token = stored.access_token.clone();
                let renew_at = Instant::now() + Duration::from_millis(left);
                *self.held.locked() = Some(Held { secret: stored.access_token, renew_at });
                return Ok(token);
            }
        }
        let (held, expires_at_ms) = self.request(&server).await?;
        let token = held.secret.clone();
        if let Some((store, key)) = &kept {
            let stored = StoredToken {
                access_token: token.clone(),
                refresh_token: None,
                expires_at_ms: Some(expires_at_ms),
                scopes: self.scopes.clone(),
            };
            let kept = serde_json::to_vec(&stored)
                .map_err(|err| err.to_string())
                .and_then(|bytes| store.put(key, &bytes).map_err(|err| err.to_string()));
            if let Err(err) = kept {
                tracing::warn!(%err, "the new token could not be kept: the next start asks for another");
            }
            self.kept_refused.store(false, Ordering::Relaxed);
        }
        *self.held.locked() = Some(held);
        Ok(token)
    }

    /// The upstream refused `token` (401 `invalid_token`): it is not used again.
    pub fn refused(&self, token: &str) {
        let mut held = self.held.locked();
        if held.as_ref().is_some_and(|held| held.secret == token) {
            *held = None;
            self.kept_refused.store(true, Ordering::Relaxed);
        }
    }

    /// The upstream's authorization server (discovered once).
    async fn server(&self) -> Result<AuthServer, TokenError> {
        if let Some(server) = self.server.locked().clone() {
            return Ok(server);
        }
        let server = discovery::discover(&self.http, &self.endpoint).await?;
        tracing::info!(endpoint = %self.endpoint, issuer = %server.issuer, "found the upstream's authorization server");
        *self.server.locked() = Some(server.clone());
        Ok(server)
    }

    /// Asks `server` for a new token: it, and when it expires (ms since the epoch).
    async fn request(&self, server: &AuthServer) -> Result<(Held, u64), TokenError> {
        let secret = hangar_core::small_file::read_regular(&self.secret_file, MAX_SECRET_BYTES)
            .map_err(|err| TokenError::Secret { path: self.secret_file.display().to_string(), why: err.to_string() })?;
        let token_url = TokenUrl::new(server.token_endpoint.clone())
            .map_err(|_| TokenError::TokenUrl(server.token_endpoint.clone()))?;
        let client = BasicClient::new(ClientId::new(self.client_id.clone()))
            .set_client_secret(ClientSecret::new(secret.trim().to_owned()))
            .set_token_uri(token_url);
        let (asked, asked_ms) = (Instant::now(), now_ms());
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
        let good_for = lifetime - ahead;
        let expires_at_ms = asked_ms + lifetime.as_millis() as u64;
        Ok((Held { secret: answer.access_token().secret().clone(), renew_at: asked + good_for }, expires_at_ms))
    }
}

/// When a kept token expiring at `expires_at_ms` is renewed: a tenth of what is left of it
/// ahead, at most [`MAX_RENEW_AHEAD`].
fn renew_at_ms(expires_at_ms: u64) -> u64 {
    let left = expires_at_ms.saturating_sub(now_ms());
    expires_at_ms.saturating_sub((left / 10).min(MAX_RENEW_AHEAD.as_millis() as u64))
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A token endpoint on loopback that refuses every client (400 `invalid_client`), counting
    /// the requests it gets.
    async fn refusing_token_endpoint() -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        let asked = Arc::new(AtomicUsize::new(0));
        let counted = asked.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                let mut buffer = vec![0u8; 8192];
                let _ = socket.read(&mut buffer).await;
                let body = r#"{"error":"invalid_client"}"#;
                let answer = format!(
                    "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        (url, asked)
    }

    #[tokio::test]
    async fn a_refusing_authorization_server_is_asked_once_by_twenty_waiting_calls() {
        let (token_endpoint, asked) = refusing_token_endpoint().await;
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "s3cret").unwrap();
        let oauth: UpstreamOAuth = serde_json::from_value(serde_json::json!({
            "per": "shared", "grant": "client_credentials",
            "client": {"id": "m2m", "secret_file": secret},
        }))
        .unwrap();
        let client = oauth.registered().expect("pre-registered").clone();
        let shared =
            Arc::new(SharedToken::new(reqwest::Client::new(), "http://127.0.0.1:9/mcp", &oauth, &client, None));
        *shared.server.locked() = Some(AuthServer {
            issuer: "http://127.0.0.1:9".into(),
            token_endpoint,
            revocation_endpoint: None,
            authorization_endpoint: None,
            registration_endpoint: None,
            code_challenge_methods: Vec::new(),
            client_id_metadata_document_supported: false,
            iss_parameter_supported: false,
            resource: "http://127.0.0.1:9/mcp".into(),
            scopes_supported: Vec::new(),
        });
        let calls: Vec<_> = (0..20)
            .map(|_| {
                tokio::spawn({
                    let shared = shared.clone();
                    async move { shared.get().await }
                })
            })
            .collect();
        let mut recent = 0;
        for call in calls {
            let refused = call.await.unwrap().expect_err("no token is had");
            assert!(refused.to_string().contains("invalid_client"), "{refused}");
            recent += usize::from(matches!(refused, TokenError::Recent { .. }));
        }
        assert_eq!(asked.load(Ordering::SeqCst), 1, "the authorization server was asked once");
        assert_eq!(recent, 19, "the others were told its answer");
        assert!(!format!("{:?}", shared.failed.locked()).contains("s3cret"));
    }
}
