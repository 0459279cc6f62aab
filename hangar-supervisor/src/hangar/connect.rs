//! The per-user connect flow, the supervisor's half (see `hangar_core::upstream_tokens` for the
//! whole flow): minting a flow ([`Hangar::connect_url`], what `Request::ConnectBegin` and a
//! call that found no token both use), sending the browser that opens it to the upstream's
//! authorization server ([`Hangar::connect_open`]), redeeming what comes back
//! ([`Hangar::connect_finish`]), revoking a connection before it is forgotten
//! ([`Hangar::revoke_connections`]), and the Client ID Metadata Document
//! ([`Hangar::client_document`]).
//!
//! The authorization server is found by discovery (`credentials::discovery`) at each opening:
//! one whose metadata names another issuer, or that lacks PKCE S256, is refused. The
//! authorization request carries a single-use `state`, a PKCE S256 challenge and `resource`
//! (RFC 8707); the code is redeemed only for the browser that opened the flow (its binding
//! cookie), and only when the callback's `iss` is the flow's issuer (RFC 9207). The errors speak
//! in the hangar's words: never a token, a code, or the authorization server's own text.

use std::sync::RwLock;

use hangar_core::credentials_config::CredentialsConfig;
use hangar_core::ipc::{ConnectFinish, ErrorKind, IpcError};
use hangar_core::sync::UnpoisonedRw;
use hangar_core::time::rfc3339_millis;
use hangar_core::upstream_auth::UpstreamOAuth;
use hangar_core::upstream_tokens::StoredToken;
use oauth2::basic::BasicClient;
use oauth2::{AuthUrl, ClientId, CsrfToken, PkceCodeChallenge, RedirectUrl, Scope};
use serde_json::Value;

use super::Hangar;
use crate::credentials::discovery::{self, AuthServer, DiscoveryError};
use crate::credentials::flows::{Claim, FlowError, Flows, Opened, same};
use crate::credentials::registration::{self, is_code};
use crate::credentials::token_requests;
use crate::vault::Place;

/// What the connect flow keeps: the pending flows, the public URL, an HTTP client that follows
/// no redirect.
pub(crate) struct Connects {
    flows: Flows,
    /// `credentials.public_url`, without a trailing slash; replaced by a reload.
    public_url: RwLock<Option<String>>,
    http: reqwest::Client,
}

impl Connects {
    pub(crate) fn new(config: &CredentialsConfig) -> Connects {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        let connects = Connects { flows: Flows::default(), public_url: RwLock::default(), http };
        connects.configure(config);
        connects
    }

    /// Takes the (reloaded) `credentials:` block.
    pub(crate) fn configure(&self, config: &CredentialsConfig) {
        *self.public_url.writing() = config.public_url.as_ref().map(|url| url.trim_end_matches('/').to_owned());
    }

    fn public_url(&self) -> Result<String, IpcError> {
        self.public_url.reading().clone().ok_or_else(|| {
            IpcError::new(
                ErrorKind::InvalidArgument,
                "credentials.public_url is not set: the hangar does not know the address a browser reaches it at",
            )
        })
    }
}

impl Hangar {
    /// A new connect flow for `identity` on `mcp_server`: its URL (under
    /// `credentials.public_url`) and when it stops working (RFC 3339).
    pub(crate) fn connect_url(&self, identity: &str, mcp_server: &str) -> Result<(String, String), IpcError> {
        self.per_user_oauth(mcp_server)?;
        let public_url = self.connects.public_url()?;
        let (flow, expires_at_ms) = self.connects.flows.mint(identity, mcp_server).map_err(flow_refused)?;
        let expires_at = rfc3339_millis(std::time::UNIX_EPOCH + std::time::Duration::from_millis(expires_at_ms));
        Ok((format!("{public_url}/oauth/connect/{mcp_server}?flow={flow}"), expires_at))
    }

    /// The browser bound by `binding` opened flow `flow` of `mcp_server`: the authorization
    /// server's URL to send it to.
    pub(crate) async fn connect_open(&self, mcp_server: &str, flow: &str, binding: &str) -> Result<String, IpcError> {
        if binding.len() < 32 {
            return Err(IpcError::new(ErrorKind::InvalidArgument, "the browser's binding is missing"));
        }
        let identity = match self.connects.flows.claim(flow, mcp_server, binding).map_err(flow_refused)? {
            Claim::Again { authorize_url } => return Ok(authorize_url),
            Claim::New { identity } => identity,
        };
        let (endpoint, oauth) = self.per_user_oauth(mcp_server)?;
        let public_url = self.connects.public_url()?;
        let server = self.authorization_server(&endpoint).await?;
        if !server.takes_pkce_s256() {
            return Err(upstream_refused(format!(
                "the authorization server of `{mcp_server}` does not support PKCE S256 (its code_challenge_methods_supported): refused"
            )));
        }
        let Some(authorization_endpoint) = server.authorization_endpoint.clone() else {
            return Err(upstream_refused(format!(
                "the authorization server of `{mcp_server}` names no authorization endpoint"
            )));
        };
        let client = registration::client_for_flow(&self.connects.http, self.vault(), &oauth, &server, &public_url)
            .await
            .map_err(|err| upstream_refused(format!("`{mcp_server}`: {err}")))?;
        let scopes = if oauth.scopes.is_empty() { server.scopes_supported.clone() } else { oauth.scopes.clone() };
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let state = crate::credentials::flows::random();
        let bad_url =
            |what: &str| upstream_refused(format!("the {what} of `{mcp_server}`'s authorization is not a URL"));
        let authorize = BasicClient::new(ClientId::new(client.id.clone()))
            .set_auth_uri(AuthUrl::new(authorization_endpoint).map_err(|_| bad_url("authorization endpoint"))?)
            .set_redirect_uri(RedirectUrl::new(client.redirect_uri.clone()).map_err(|_| bad_url("redirect URI"))?);
        let given_state = state.clone();
        let (url, _) = authorize
            .authorize_url(move || CsrfToken::new(given_state))
            .add_scopes(scopes.iter().cloned().map(Scope::new))
            .set_pkce_challenge(challenge)
            .add_extra_param("resource", server.resource.clone())
            .url();
        let authorize_url = url.to_string();
        let opened = Opened {
            state,
            verifier: verifier.secret().clone(),
            issuer: server.issuer.clone(),
            iss_expected: server.iss_parameter_supported,
            resource: server.resource.clone(),
            token_endpoint: server.token_endpoint.clone(),
            client,
            scopes,
            authorize_url: authorize_url.clone(),
        };
        self.connects.flows.opened(flow, opened).map_err(flow_refused)?;
        tracing::info!(server = %mcp_server, %identity, "a connect flow went to the authorization server");
        Ok(authorize_url)
    }

    /// The authorization server's answer came back to the browser bound by `finish.binding`:
    /// the server now connected for the flow's identity.
    pub(crate) async fn connect_finish(&self, finish: ConnectFinish) -> Result<String, IpcError> {
        let finished = self.connects.flows.finish(&finish.state).map_err(flow_refused)?;
        let server = finished.mcp_server.clone();
        if finish.binding.is_empty() || !same(&finish.binding, &finished.binding) {
            tracing::warn!(%server, "a connect callback came from a browser that did not open the flow: refused");
            return Err(IpcError::forbidden(
                "this browser did not start this sign-in: open the connect link in the browser you sign in with",
            ));
        }
        if let Some(error) = &finish.error {
            let code = if is_code(error) { error.as_str() } else { "error" };
            return Err(IpcError::new(
                ErrorKind::UpstreamUnauthorized,
                format!("the authorization server of `{server}` did not grant access ({code})"),
            ));
        }
        let opened = finished.opened;
        match &finish.iss {
            Some(iss) if *iss != opened.issuer => {
                tracing::warn!(%server, "a connect callback named another authorization server (RFC 9207 iss): refused, its code not redeemed");
                return Err(IpcError::forbidden(
                    "the answer names another authorization server than the one asked (iss): refused, and its code was not used",
                ));
            }
            None if opened.iss_expected => {
                return Err(IpcError::forbidden(
                    "the answer does not name its authorization server (iss), which says it does: refused, and its code was not used",
                ));
            }
            _ => {}
        }
        let Some(code) = finish.code.as_deref().filter(|code| !code.is_empty()) else {
            return Err(IpcError::new(ErrorKind::InvalidArgument, "the answer carries no authorization code"));
        };
        let token = token_requests::redeem(
            &self.connects.http,
            &opened.token_endpoint,
            &opened.client,
            code,
            &opened.verifier,
            &opened.resource,
            &opened.scopes,
        )
        .await
        .map_err(|err| upstream_refused(format!("the authorization code for `{server}` was not redeemed: {err}")))?;
        let place = Place {
            identity: finished.identity.clone(),
            mcp_server: server.clone(),
            issuer: opened.issuer,
            resource: opened.resource,
        };
        let vault =
            self.vault().ok_or_else(|| IpcError::new(ErrorKind::Internal, "the stored credentials are not open"))?;
        let bytes = serde_json::to_vec(&token)
            .map_err(|_| IpcError::new(ErrorKind::Internal, "the token could not be stored"))?;
        vault.put(&place, &bytes).map_err(|err| {
            tracing::error!(%err, "a connected account's token could not be stored");
            IpcError::new(ErrorKind::Internal, "the token could not be stored")
        })?;
        tracing::info!(%server, identity = %finished.identity, "an account was connected");
        // Its sessions waiting for it hear it; its connection opens with the new token.
        self.connected(&finished.identity, &server);
        Ok(server)
    }

    /// Revokes (RFC 7009, where the authorization server offers it) every token `identity` holds
    /// for `mcp_server`, before they are forgotten. Best effort: a failure is logged, and the
    /// tokens are forgotten all the same.
    pub(crate) async fn revoke_connections(&self, identity: &str, mcp_server: &str) {
        let Some(vault) = self.vault() else { return };
        let Ok(entries) = vault.list(identity) else { return };
        let Ok((endpoint, oauth)) = self.per_user_oauth(mcp_server) else { return };
        for entry in entries.into_iter().filter(|entry| entry.place.mcp_server == mcp_server) {
            let Some(token) = entry.value.and_then(|bytes| serde_json::from_slice::<StoredToken>(&bytes).ok()) else {
                continue;
            };
            let revoked = async {
                let server = self.authorization_server(&endpoint).await?;
                if server.issuer != entry.place.issuer {
                    return Err(IpcError::new(ErrorKind::InvalidArgument, "issued by another authorization server"));
                }
                let Some(revocation) = &server.revocation_endpoint else { return Ok(false) };
                let client = registration::client_kept(Some(vault), &oauth, &server)
                    .map_err(|err| IpcError::new(ErrorKind::InvalidArgument, err.to_string()))?;
                token_requests::revoke(&self.connects.http, revocation, &client, &token)
                    .await
                    .map_err(|err| IpcError::new(ErrorKind::UpstreamError, err.to_string()))?;
                Ok(true)
            };
            match revoked.await {
                Ok(true) => tracing::info!(server = %mcp_server, %identity, "a connection was revoked"),
                Ok(false) => tracing::info!(server = %mcp_server, "the authorization server offers no revocation"),
                Err(err) => {
                    tracing::warn!(server = %mcp_server, %err, "a connection could not be revoked; forgotten all the same")
                }
            }
        }
    }

    /// The Client ID Metadata Document the API serves at `/oauth/client.json`.
    pub(crate) fn client_document(&self) -> Result<Value, IpcError> {
        let public_url = self.connects.public_url().map_err(|err| IpcError::new(ErrorKind::NotFound, err.message))?;
        Ok(registration::client_document(&public_url))
    }

    /// The endpoint and `auth.oauth` of `mcp_server`, if it is a `per: user` server.
    fn per_user_oauth(&self, mcp_server: &str) -> Result<(String, UpstreamOAuth), IpcError> {
        let server = self.server(mcp_server)?;
        let config = server.config();
        let oauth = config
            .auth
            .as_ref()
            .and_then(|auth| auth.oauth.clone())
            .filter(|_| config.auth.as_ref().is_some_and(hangar_core::upstream_auth::UpstreamAuth::per_user));
        match (config.endpoint.clone(), oauth) {
            (Some(endpoint), Some(oauth)) => Ok((endpoint, oauth)),
            _ => Err(IpcError::new(
                ErrorKind::InvalidArgument,
                format!("`{mcp_server}` takes no account of its callers' own (it has no auth.oauth with per: user)"),
            )),
        }
    }

    /// The upstream's authorization server, found by discovery.
    async fn authorization_server(&self, endpoint: &str) -> Result<AuthServer, IpcError> {
        discovery::discover(&self.connects.http, endpoint).await.map_err(|err| {
            tracing::warn!(%endpoint, %err, "discovery for a connect flow failed");
            upstream_refused(discovery_refused(&err).to_owned())
        })
    }
}

fn upstream_refused(message: String) -> IpcError {
    IpcError::new(ErrorKind::UpstreamError, message)
}

/// A flow step refused, as its caller sees it.
fn flow_refused(err: FlowError) -> IpcError {
    let kind = match err {
        FlowError::Unknown => ErrorKind::NotFound,
        FlowError::OtherBrowser => ErrorKind::Forbidden,
        FlowError::TooMany => ErrorKind::RetryLater,
    };
    IpcError::new(kind, err.to_string())
}

/// Why discovery failed, in the hangar's words: nothing the upstream's metadata said.
fn discovery_refused(err: &DiscoveryError) -> &'static str {
    match err {
        DiscoveryError::NoResourceMetadata(_) => "the upstream publishes no protected-resource metadata (RFC 9728)",
        DiscoveryError::NoAuthorizationServer => {
            "the upstream's protected-resource metadata names no authorization server"
        }
        DiscoveryError::WrongResource { .. } => {
            "the upstream's protected-resource metadata is for another resource: refused"
        }
        DiscoveryError::NoServerMetadata(_) => {
            "the authorization server publishes no metadata (RFC 8414 or OpenID Connect)"
        }
        DiscoveryError::WrongIssuer { .. } => "the authorization server's metadata names another issuer: refused",
        DiscoveryError::BadUrl(_) => "the upstream names an authorization server that is not a URL",
    }
}
