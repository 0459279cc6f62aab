//! The refusals of a request OAuth did not let through: 401 or 403 with the
//! `WWW-Authenticate: Bearer` challenge pointing at the protected-resource metadata of the MCP
//! endpoint (the path-suffixed one), or 503 when no token can be judged.
//!
//! Kept apart from the metadata's routes (`metadata.rs`), which read the API's state, so that
//! authentication can refuse without depending on that state.

use axum::http::header::WWW_AUTHENTICATE;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::{OAuth, Refusal};
use crate::error::ApiError;
use crate::public::METADATA;

/// Where the metadata of `resource` lives (RFC 9728 §3.1): the well-known path inserted between
/// its authority and its path. Built from the resource, so a proxy's public URL is honoured.
fn metadata_url(resource: &str) -> String {
    match url::Url::parse(resource) {
        Ok(url) => {
            let path = url.path().trim_end_matches('/');
            format!("{}{METADATA}{path}", url.origin().ascii_serialization())
        }
        Err(_) => METADATA.to_owned(),
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

/// The refusal of a request to `path` for `refusal`, with its `WWW-Authenticate` challenge: it
/// points at the old HTTP+SSE transport's metadata for that transport's paths, else at the MCP
/// endpoint's.
pub fn challenge(oauth: &OAuth, refusal: Refusal, path: &str) -> Response {
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
    let sse = path == "/sse" || path == "/messages";
    let resource = if sse { oauth.sse_resource() } else { oauth.resource() };
    let mut header = format!("Bearer resource_metadata=\"{}\"", metadata_url(resource));
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
