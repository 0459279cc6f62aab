//! Who the hangar is to an upstream's authorization server, for the per-user flow: its client
//! id (and secret, if it has one), chosen in this order of preference:
//! 1. pre-registered (`auth.oauth.client: {id, secret_file}`), the secret read from its file at
//!    each use;
//! 2. a Client ID Metadata Document: the client id is the URL of the document the API serves
//!    (`<credentials.public_url>/oauth/client.json`, [`client_document`]), where the
//!    authorization server's metadata says `client_id_metadata_document_supported` (or the config
//!    asks for `cimd`);
//! 3. dynamic registration (RFC 7591, with `application_type`), once per authorization server.
//!
//! A client the hangar registered or chose is kept sealed in the vault under the hangar's own
//! identity and the authorization server's issuer (the server field says which way,
//! [`KEPT_CIMD`] or [`KEPT_DCR`], never a server id): so it is registered once per issuer, found
//! again after a restart and by a refresh, and never used with another issuer. A kept client
//! whose redirect URI is not the current one (the public URL moved) is registered again.

use std::time::Duration;

use hangar_core::upstream_auth::{ClientRegistration, OAuthClientChoice, UpstreamOAuth};
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::discovery::AuthServer;
use super::shared_token::SHARED_IDENTITY;
use crate::vault::{Place, Vault};

/// The server field of a kept Client ID Metadata Document client (no server id starts with `@`).
pub const KEPT_CIMD: &str = "@client:cimd";
/// The server field of a dynamically registered client.
pub const KEPT_DCR: &str = "@client:dcr";
/// Where the API serves the Client ID Metadata Document, under `credentials.public_url`.
pub const CLIENT_DOCUMENT_PATH: &str = "/oauth/client.json";
/// Where the authorization server sends the person back, under `credentials.public_url`.
pub const CALLBACK_PATH: &str = "/oauth/callback";
/// The client's name, as an authorization server shows it on its consent page.
const CLIENT_NAME: &str = "Hangar";
/// The most read of the client-secret file.
const MAX_SECRET_BYTES: u64 = 64 * 1024;
/// The most read of a registration answer.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// How long a registration request may take.
const REGISTRATION_TIMEOUT: Duration = Duration::from_secs(15);

/// The hangar's client at one authorization server. Its `Debug` shows no secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Client {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// The redirect URI it was registered with.
    pub redirect_uri: String,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("id", &self.id).field("has_secret", &self.secret.is_some()).finish()
    }
}

/// Why the hangar has no client at an authorization server, in the hangar's words (never a
/// secret, never the authorization server's free text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistrationError {
    #[error("cannot read the client secret from {0}")]
    Secret(String),
    #[error("the authorization server does not take a Client ID Metadata Document (auth.oauth.client: cimd)")]
    CimdUnsupported,
    #[error(
        "the authorization server offers no dynamic registration, and takes no Client ID Metadata Document: pre-register the hangar (auth.oauth.client: {{id, secret_file}})"
    )]
    NoRegistration,
    #[error("dynamic registration at the authorization server failed ({0})")]
    Refused(String),
    #[error("the hangar has not registered with this authorization server yet: connect again")]
    NotKept,
}

/// Which way the hangar is known to `server` under `oauth`.
enum Way {
    Registered,
    Cimd,
    Dcr,
}

fn way(oauth: &UpstreamOAuth, server: &AuthServer) -> Way {
    match &oauth.client {
        Some(OAuthClientChoice::Registered(_)) => Way::Registered,
        Some(OAuthClientChoice::Way(ClientRegistration::Cimd)) => Way::Cimd,
        Some(OAuthClientChoice::Way(ClientRegistration::Dcr)) => Way::Dcr,
        None if server.client_id_metadata_document_supported => Way::Cimd,
        None => Way::Dcr,
    }
}

/// The redirect URI under `public_url`.
pub fn redirect_uri(public_url: &str) -> String {
    format!("{}{CALLBACK_PATH}", public_url.trim_end_matches('/'))
}

/// The Client ID Metadata Document of the hangar at `public_url`: the document the API serves at
/// [`CLIENT_DOCUMENT_PATH`], whose own URL is the client id.
pub fn client_document(public_url: &str) -> Value {
    let base = public_url.trim_end_matches('/');
    json!({
        "client_id": format!("{base}{CLIENT_DOCUMENT_PATH}"),
        "client_name": CLIENT_NAME,
        "client_uri": base,
        "redirect_uris": [redirect_uri(base)],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": application_type(base),
    })
}

/// `native` for a hangar a browser reaches on loopback (RFC 8252), `web` otherwise.
fn application_type(public_url: &str) -> &'static str {
    let host = reqwest::Url::parse(public_url).ok().and_then(|url| url.host_str().map(str::to_owned));
    match host.as_deref() {
        Some("localhost" | "[::1]") => "native",
        Some(host) if host.starts_with("127.") => "native",
        _ => "web",
    }
}

/// The client to start a flow with: the pre-registered one, the kept one, or a new one (a
/// dynamic registration, kept in `vault`).
pub async fn client_for_flow(
    http: &reqwest::Client,
    vault: Option<&Vault>,
    oauth: &UpstreamOAuth,
    server: &AuthServer,
    public_url: &str,
) -> Result<Client, RegistrationError> {
    let redirect = redirect_uri(public_url);
    match way(oauth, server) {
        Way::Registered => registered(oauth, redirect),
        Way::Cimd => {
            if !server.client_id_metadata_document_supported {
                return Err(RegistrationError::CimdUnsupported);
            }
            let client = Client {
                id: format!("{}{CLIENT_DOCUMENT_PATH}", public_url.trim_end_matches('/')),
                secret: None,
                redirect_uri: redirect,
            };
            if kept(vault, KEPT_CIMD, &server.issuer).as_ref() != Some(&client) {
                keep(vault, KEPT_CIMD, &server.issuer, &client);
            }
            Ok(client)
        }
        Way::Dcr => {
            if let Some(client) = kept(vault, KEPT_DCR, &server.issuer)
                && client.redirect_uri == redirect
            {
                return Ok(client);
            }
            let client = register(http, server, public_url).await?;
            tracing::info!(issuer = %server.issuer, "the hangar registered itself with the authorization server");
            keep(vault, KEPT_DCR, &server.issuer, &client);
            Ok(client)
        }
    }
}

/// The client a refresh or a revocation uses at `server`: the one the flow used (never one
/// registered with another issuer).
pub fn client_kept(
    vault: Option<&Vault>,
    oauth: &UpstreamOAuth,
    server: &AuthServer,
) -> Result<Client, RegistrationError> {
    match way(oauth, server) {
        Way::Registered => registered(oauth, String::new()),
        Way::Cimd => kept(vault, KEPT_CIMD, &server.issuer).ok_or(RegistrationError::NotKept),
        Way::Dcr => kept(vault, KEPT_DCR, &server.issuer).ok_or(RegistrationError::NotKept),
    }
}

fn registered(oauth: &UpstreamOAuth, redirect_uri: String) -> Result<Client, RegistrationError> {
    let Some(client) = oauth.registered() else { return Err(RegistrationError::NotKept) };
    let secret = hangar_core::small_file::read_regular(&client.secret_file, MAX_SECRET_BYTES)
        .map_err(|_| RegistrationError::Secret(client.secret_file.display().to_string()))?;
    Ok(Client { id: client.id.clone(), secret: Some(secret.trim().to_owned()), redirect_uri })
}

fn place(way: &str, issuer: &str) -> Place {
    Place { identity: SHARED_IDENTITY.into(), mcp_server: way.into(), issuer: issuer.into(), resource: String::new() }
}

fn kept(vault: Option<&Vault>, way: &str, issuer: &str) -> Option<Client> {
    let bytes = vault?.get(&place(way, issuer))?;
    serde_json::from_slice(&bytes).ok()
}

fn keep(vault: Option<&Vault>, way: &str, issuer: &str, client: &Client) {
    let Some(vault) = vault else { return };
    let kept = serde_json::to_vec(client)
        .map_err(|err| err.to_string())
        .and_then(|bytes| vault.put(&place(way, issuer), &bytes).map_err(|err| err.to_string()));
    if let Err(err) = kept {
        tracing::warn!(%err, "the hangar's registration could not be kept: the next flow registers again");
    }
}

#[derive(Deserialize)]
struct Registered {
    client_id: String,
    client_secret: Option<String>,
}

/// Dynamic registration (RFC 7591) at `server`.
async fn register(http: &reqwest::Client, server: &AuthServer, public_url: &str) -> Result<Client, RegistrationError> {
    let endpoint = server.registration_endpoint.as_deref().ok_or(RegistrationError::NoRegistration)?;
    let redirect = redirect_uri(public_url);
    let asked = json!({
        "client_name": CLIENT_NAME,
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "client_secret_basic",
        "application_type": application_type(public_url),
    });
    let mut response = http
        .post(endpoint)
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json")
        .body(asked.to_string())
        .timeout(REGISTRATION_TIMEOUT)
        .send()
        .await
        .map_err(|_| RegistrationError::Refused("the request did not complete".into()))?;
    let status = response.status();
    let mut body = Vec::new();
    while let Some(chunk) =
        response.chunk().await.map_err(|_| RegistrationError::Refused("the answer did not complete".into()))?
    {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(RegistrationError::Refused("the answer is too large".into()));
        }
        body.extend_from_slice(&chunk);
    }
    if !status.is_success() {
        // The OAuth error code only, when it is one: never the server's free text.
        let code = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|answer| answer["error"].as_str().filter(|code| is_code(code)).map(str::to_owned))
            .unwrap_or_else(|| format!("HTTP {}", status.as_u16()));
        return Err(RegistrationError::Refused(code));
    }
    let answer: Registered = serde_json::from_slice(&body)
        .map_err(|_| RegistrationError::Refused("the answer was not a registration".into()))?;
    Ok(Client { id: answer.client_id, secret: answer.client_secret, redirect_uri: redirect })
}

/// Whether `code` looks like an OAuth error code (RFC 6749 §5.2: a short word of
/// `%x20-21 / %x23-5B / %x5D-7E`), so it may be shown as the hangar's own word for a refusal.
pub fn is_code(code: &str) -> bool {
    !code.is_empty() && code.len() <= 64 && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(cimd: bool) -> AuthServer {
        AuthServer {
            issuer: "https://as.example".into(),
            token_endpoint: "https://as.example/token".into(),
            revocation_endpoint: None,
            authorization_endpoint: Some("https://as.example/auth".into()),
            registration_endpoint: None,
            code_challenge_methods: vec!["S256".into()],
            client_id_metadata_document_supported: cimd,
            iss_parameter_supported: true,
            resource: "https://mcp.example/mcp".into(),
            scopes_supported: Vec::new(),
        }
    }

    fn oauth(client: &str) -> UpstreamOAuth {
        serde_json::from_str(&format!(r#"{{"per": "user", "grant": "authorization_code" {client}}}"#)).unwrap()
    }

    #[tokio::test]
    async fn cimd_where_supported_else_dcr_and_never_another_issuers_client() {
        let http = reqwest::Client::new();
        let client = client_for_flow(&http, None, &oauth(""), &server(true), "https://hangar.example/").await.unwrap();
        assert_eq!(client.id, "https://hangar.example/oauth/client.json");
        assert_eq!(client.redirect_uri, "https://hangar.example/oauth/callback");
        assert_eq!(client.secret, None);
        // Without CIMD and without a registration endpoint: nothing to do but say so.
        let refused = client_for_flow(&http, None, &oauth(""), &server(false), "https://h.example").await;
        assert_eq!(refused, Err(RegistrationError::NoRegistration));
        let refused = client_for_flow(&http, None, &oauth(r#", "client": "cimd""#), &server(false), "https://h").await;
        assert_eq!(refused, Err(RegistrationError::CimdUnsupported));
        // Nothing kept for this issuer: a refresh has no client.
        assert_eq!(client_kept(None, &oauth(""), &server(false)), Err(RegistrationError::NotKept));
    }

    #[test]
    fn the_document_names_its_own_url_and_the_callback() {
        let document = client_document("http://127.0.0.1:8000");
        assert_eq!(document["client_id"], "http://127.0.0.1:8000/oauth/client.json");
        assert_eq!(document["redirect_uris"], json!(["http://127.0.0.1:8000/oauth/callback"]));
        assert_eq!(document["application_type"], "native");
        assert_eq!(client_document("https://hangar.example")["application_type"], "web");
        assert!(is_code("invalid_grant") && !is_code("Bad <b>") && !is_code(""));
    }
}
