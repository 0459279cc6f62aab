//! The per-user flow's requests to an authorization server's token and revocation endpoints:
//! redeeming an authorization code (with its PKCE verifier), refreshing, revoking (RFC 7009).
//! Each names the upstream's canonical URI as `resource` (RFC 8707) where a token is asked for.
//! A refusal is reported by its OAuth error code only, never the server's free text, and never
//! with a code or a token.

use std::time::Duration;

use hangar_core::time::now_ms;
use hangar_core::upstream_tokens::StoredToken;
use oauth2::basic::{BasicClient, BasicErrorResponseType};
use oauth2::{
    AuthorizationCode, ClientId, ClientSecret, PkceCodeVerifier, RedirectUrl, RefreshToken, TokenResponse, TokenUrl,
};

use super::registration::Client;

/// How long one token or revocation request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// Why a token request got no token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenRequestError {
    /// `invalid_grant`: the code or refresh token is no good (used, expired, revoked).
    #[error("the authorization server refused the grant (invalid_grant)")]
    InvalidGrant,
    /// Another refusal or failure, in words that carry no secret.
    #[error("{0}")]
    Failed(String),
}

fn oauth_client(
    client: &Client,
    token_endpoint: &str,
) -> Result<
    BasicClient<
        oauth2::EndpointNotSet,
        oauth2::EndpointNotSet,
        oauth2::EndpointNotSet,
        oauth2::EndpointNotSet,
        oauth2::EndpointSet,
    >,
    TokenRequestError,
> {
    let token_url = TokenUrl::new(token_endpoint.to_owned())
        .map_err(|_| TokenRequestError::Failed(format!("the token endpoint `{token_endpoint}` is not a URL")))?;
    let mut oauth = BasicClient::new(ClientId::new(client.id.clone())).set_token_uri(token_url);
    if let Some(secret) = &client.secret {
        oauth = oauth.set_client_secret(ClientSecret::new(secret.clone()));
    }
    Ok(oauth)
}

/// Redeems `code` for a token, with the flow's PKCE `verifier`, `redirect_uri` and `resource`.
pub async fn redeem(
    http: &reqwest::Client,
    token_endpoint: &str,
    client: &Client,
    code: &str,
    verifier: &str,
    resource: &str,
    asked_scopes: &[String],
) -> Result<StoredToken, TokenRequestError> {
    let redirect = RedirectUrl::new(client.redirect_uri.clone())
        .map_err(|_| TokenRequestError::Failed("the redirect URI is not a URL".into()))?;
    let oauth = oauth_client(client, token_endpoint)?.set_redirect_uri(redirect);
    let asked = now_ms();
    let request = oauth
        .exchange_code(AuthorizationCode::new(code.to_owned()))
        .set_pkce_verifier(PkceCodeVerifier::new(verifier.to_owned()))
        .add_extra_param("resource", resource.to_owned())
        .request_async(http);
    Ok(stored(&answered(request).await?, asked, None, asked_scopes))
}

/// A new token for `refresh_token`, for `resource`; the old refresh token kept when the answer
/// brings none, and the old scopes when it names none.
pub async fn refresh(
    http: &reqwest::Client,
    token_endpoint: &str,
    client: &Client,
    old: &StoredToken,
    resource: &str,
) -> Result<StoredToken, TokenRequestError> {
    let Some(refresh_token) = &old.refresh_token else {
        return Err(TokenRequestError::InvalidGrant);
    };
    let oauth = oauth_client(client, token_endpoint)?;
    let asked = now_ms();
    let refresh_token = RefreshToken::new(refresh_token.clone());
    let request = oauth
        .exchange_refresh_token(&refresh_token)
        .add_extra_param("resource", resource.to_owned())
        .request_async(http);
    Ok(stored(&answered(request).await?, asked, old.refresh_token.clone(), &old.scopes))
}

/// Revokes `token` at `revocation_endpoint` (RFC 7009): its refresh token if it has one, else
/// its access token. Made here rather than with
/// `oauth2`, which refuses a revocation endpoint that is not https while it takes such a token
/// endpoint: the same authorization server is trusted the same way for both.
pub async fn revoke(
    http: &reqwest::Client,
    revocation_endpoint: &str,
    client: &Client,
    token: &StoredToken,
) -> Result<(), TokenRequestError> {
    // The refresh token, when there is one: revoking it revokes the grant, its access tokens
    // with it (RFC 7009 §2.1), which a server that issues structured (JWT) access tokens could
    // not revoke one by one.
    let revocable = match &token.refresh_token {
        Some(refresh) => (refresh.as_str(), "refresh_token"),
        None => (token.access_token.as_str(), "access_token"),
    };
    {
        let (revocable, hint) = revocable;
        let mut form = vec![("token", revocable), ("token_type_hint", hint)];
        let mut request = http.post(revocation_endpoint).timeout(REQUEST_TIMEOUT);
        match &client.secret {
            // RFC 6749 §2.3.1: each part form-encoded before the Basic encoding.
            Some(secret) => {
                let encode = |part: &str| url::form_urlencoded::byte_serialize(part.as_bytes()).collect::<String>();
                request = request.basic_auth(encode(&client.id), Some(encode(secret)));
            }
            None => form.push(("client_id", client.id.as_str())),
        }
        let answer = request
            .form(&form)
            .send()
            .await
            .map_err(|_| TokenRequestError::Failed("the revocation request did not complete".into()))?;
        // RFC 7009 §2.2: 200 whether or not the token was known; anything else is a refusal.
        if !answer.status().is_success() {
            let status = answer.status().as_u16();
            // Its OAuth error code only, never its free text.
            let body = answer.bytes().await.unwrap_or_default();
            let code = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|answer| answer["error"].as_str().map(|code| code_of(code).to_owned()))
                .unwrap_or_else(|| format!("HTTP {status}"));
            return Err(TokenRequestError::Failed(format!("the authorization server refused the revocation ({code})")));
        }
    }
    Ok(())
}

/// The answer to a token request, within [`REQUEST_TIMEOUT`].
async fn answered<RE: std::error::Error + 'static>(
    request: impl Future<
        Output = Result<
            oauth2::basic::BasicTokenResponse,
            oauth2::RequestTokenError<RE, oauth2::basic::BasicErrorResponse>,
        >,
    >,
) -> Result<oauth2::basic::BasicTokenResponse, TokenRequestError> {
    tokio::time::timeout(REQUEST_TIMEOUT, request)
        .await
        .map_err(|_| TokenRequestError::Failed("the token request timed out".into()))?
        .map_err(|err| describe(&err))
}

/// The token as stored, from a token response asked for at `asked_ms`.
fn stored(
    answer: &oauth2::basic::BasicTokenResponse,
    asked_ms: u64,
    old_refresh: Option<String>,
    old_scopes: &[String],
) -> StoredToken {
    StoredToken {
        access_token: answer.access_token().secret().clone(),
        refresh_token: answer.refresh_token().map(|token| token.secret().clone()).or(old_refresh),
        expires_at_ms: answer.expires_in().map(|life| asked_ms + life.as_millis() as u64),
        scopes: answer
            .scopes()
            .map(|scopes| scopes.iter().map(|scope| scope.to_string()).collect())
            .unwrap_or_else(|| old_scopes.to_vec()),
    }
}

/// An OAuth error code to show, or `error` when what came is not one.
fn code_of(code: &str) -> &str {
    if super::registration::is_code(code) { code } else { "error" }
}

fn describe<RE: std::error::Error + 'static>(
    err: &oauth2::RequestTokenError<RE, oauth2::basic::BasicErrorResponse>,
) -> TokenRequestError {
    match err {
        oauth2::RequestTokenError::ServerResponse(response) => match response.error() {
            BasicErrorResponseType::InvalidGrant => TokenRequestError::InvalidGrant,
            other => {
                TokenRequestError::Failed(format!("the authorization server refused ({})", code_of(other.as_ref())))
            }
        },
        oauth2::RequestTokenError::Request(_) => TokenRequestError::Failed("the token request did not complete".into()),
        oauth2::RequestTokenError::Parse(_, _) => {
            TokenRequestError::Failed("the answer was not a token response".into())
        }
        oauth2::RequestTokenError::Other(_) => TokenRequestError::Failed("the token request failed".into()),
    }
}
