//! What the hangar tells clients about its authorization: the protected-resource metadata
//! (RFC 9728), served without a token at `/.well-known/oauth-protected-resource` and at its
//! path-suffixed forms for `/mcp` and for the old HTTP+SSE transport's `/sse` (the paths are in
//! [`crate::public`]). The refusals that point here are in `challenge.rs`.
//!
//! Each document names the resource its URL was derived from (RFC 9728 §3.3): the suffixed one
//! the MCP endpoint's resource (`auth.oauth.resource`, what tokens are minted for), the `/sse`
//! one that transport's own (`…/sse` beside a default `…/mcp`; a client of it asks a token for
//! the URL it opens, and checks the metadata names it), the bare one that resource's origin.

use axum::Router;
use axum::extract::State;
use axum::http::{Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use super::OAuth;
use crate::public::{METADATA, METADATA_MCP, METADATA_SSE};
use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(METADATA, get(origin_resource))
        .route(METADATA_MCP, get(mcp_resource))
        .route(METADATA_SSE, get(sse_resource))
}

/// The `/sse`-suffixed path: the metadata of the old HTTP+SSE transport's endpoint.
async fn sse_resource(state: State<AppState>, method: Method, uri: Uri) -> Response {
    protected_resource(state, method, uri, |oauth| oauth.sse_resource().to_owned()).await
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bare_path_names_the_origin() {
        assert_eq!(origin("https://hangar.example.com/mcp"), "https://hangar.example.com");
        assert_eq!(origin("http://127.0.0.1:8000/a/mcp"), "http://127.0.0.1:8000");
        assert_eq!(origin("https://h.example:443/mcp"), "https://h.example");
    }
}
