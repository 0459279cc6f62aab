//! What the hangar tells clients about its authorization: the protected-resource metadata
//! (RFC 9728), served without a token at `/.well-known/oauth-protected-resource` and at its
//! path-suffixed form for `/mcp`, and the `WWW-Authenticate: Bearer` challenge of a refusal.
//!
//! Each document names the resource its URL was derived from (RFC 9728 §3.3): the suffixed one
//! the MCP endpoint's resource (`auth.oauth.resource`, what tokens are minted for), the bare one
//! that resource's origin. The challenge points at the suffixed one.

use axum::Router;
use axum::extract::State;
use axum::http::header::WWW_AUTHENTICATE;
use axum::http::{HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use super::{OAuth, Refusal};
use crate::error::ApiError;
use crate::state::AppState;

/// Where the metadata is served; also open to callers without a token.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";
pub const METADATA_PATH_MCP: &str = "/.well-known/oauth-protected-resource/mcp";

pub fn routes() -> Router<AppState> {
    Router::new().route(METADATA_PATH, get(origin_resource)).route(METADATA_PATH_MCP, get(mcp_resource))
}

/// The bare well-known path: the metadata of the resource's origin.
async fn origin_resource(state: State<AppState>, method: Method, uri: Uri) -> Response {
    protected_resource(state, method, uri, |oauth| origin(oauth.resource())).await
}

/// The `/mcp`-suffixed path: the metadata of the MCP endpoint, the resource tokens are for.
async fn mcp_resource(state: State<AppState>, method: Method, uri: Uri) -> Response {
    protected_resource(state, method, uri, |oauth| oauth.resource().to_owned()).await
}

async fn protected_resource(
    State(state): State<AppState>,
    method: Method,
    uri: Uri,
    resource: impl FnOnce(&OAuth) -> String,
) -> Response {
    match state.auth.oauth() {
        Some(oauth) => axum::Json(document(&oauth, resource(&oauth))).into_response(),
        // No OAuth configured (or not learned from the supervisor yet): as if the route did not
        // exist.
        None => crate::error::not_found(method, uri).await.into_response(),
    }
}

/// The RFC 9728 document of `resource`.
fn document(oauth: &OAuth, resource: String) -> serde_json::Value {
    let config = oauth.config();
    json!({
        "resource": resource,
        "authorization_servers": [config.issuer],
        "scopes_supported": config.scopes_supported,
        "bearer_methods_supported": ["header"],
    })
}

/// The origin of `resource` (`https://host[:port]`, no path): the resource the bare well-known
/// path describes. A resource that does not parse (validated, so never) is named as it is.
fn origin(resource: &str) -> String {
    match url::Url::parse(resource) {
        Ok(url) => url.origin().ascii_serialization(),
        Err(_) => resource.to_owned(),
    }
}

/// Where the metadata of `resource` lives (RFC 9728 §3.1): the well-known path inserted between
/// its authority and its path. Built from the resource, so a proxy's public URL is honoured.
fn metadata_url(resource: &str) -> String {
    match url::Url::parse(resource) {
        Ok(url) => {
            let path = url.path().trim_end_matches('/');
            format!("{}{METADATA_PATH}{path}", url.origin().ascii_serialization())
        }
        Err(_) => METADATA_PATH.to_owned(),
    }
}

/// 503: no token can be checked (the authorization server's keys cannot be had).
pub fn issuer_unavailable() -> Response {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "Service Unavailable",
        "the authorization server cannot be reached, so no token can be checked yet",
    )
    .into_response()
}

/// How long a client refused as [`busy`] is told to wait.
pub const BUSY_RETRY_AFTER_S: u64 = 1;

/// 503 with `Retry-After`: too many opaque tokens wait to be introspected; the token was not
/// judged, so it is neither accepted nor called invalid.
pub fn busy() -> Response {
    let mut response = ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "Service Unavailable",
        "too many tokens are waiting to be checked by the authorization server; retry shortly",
    )
    .into_response();
    response.headers_mut().insert(axum::http::header::RETRY_AFTER, HeaderValue::from(BUSY_RETRY_AFTER_S));
    response
}

/// The refusal of a request for `refusal`, with its `WWW-Authenticate` challenge.
pub fn challenge(oauth: &OAuth, refusal: Refusal) -> Response {
    let (status, error, message) = match refusal {
        Refusal::Missing => (
            StatusCode::UNAUTHORIZED,
            None,
            "a bearer token is required (Authorization: Bearer); see the protected-resource metadata".to_owned(),
        ),
        Refusal::InvalidToken(why) => {
            (StatusCode::UNAUTHORIZED, Some("invalid_token"), format!("the bearer token is not valid: {why}"))
        }
        Refusal::InsufficientScope => {
            (StatusCode::FORBIDDEN, Some("insufficient_scope"), "the bearer token lacks a required scope".to_owned())
        }
        Refusal::NoProfile => (
            StatusCode::FORBIDDEN,
            None,
            "the token's groups map to no profile (auth.oauth.profiles) and no default_profile is set".to_owned(),
        ),
        Refusal::IssuerUnavailable => return issuer_unavailable(),
        Refusal::Busy => return busy(),
    };
    let config = oauth.config();
    let mut header = format!("Bearer resource_metadata=\"{}\"", metadata_url(oauth.resource()));
    let scopes = if config.required_scopes.is_empty() { &config.scopes_supported } else { &config.required_scopes };
    if !scopes.is_empty() {
        header.push_str(&format!(", scope=\"{}\"", scopes.join(" ")));
    }
    if let Some(error) = error {
        header.push_str(&format!(", error=\"{error}\""));
    }
    let title = if status == StatusCode::FORBIDDEN { "Forbidden" } else { "Unauthorized" };
    let mut response = ApiError::new(status, title, message).into_response();
    // Config values with a quote or a control character cannot be sent; the bare scheme then.
    let value = HeaderValue::from_str(&header).unwrap_or(HeaderValue::from_static("Bearer"));
    response.headers_mut().insert(WWW_AUTHENTICATE, value);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bare_path_names_the_origin() {
        assert_eq!(origin("https://hangar.example.com/mcp"), "https://hangar.example.com");
        assert_eq!(origin("http://127.0.0.1:8000/a/mcp"), "http://127.0.0.1:8000");
        assert_eq!(origin("https://h.example:443/mcp"), "https://h.example");
    }

    #[test]
    fn the_metadata_url_inserts_the_well_known_path_before_the_resource_path() {
        assert_eq!(
            metadata_url("https://hangar.example.com/mcp"),
            "https://hangar.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:8000/"),
            "http://127.0.0.1:8000/.well-known/oauth-protected-resource"
        );
    }
}
