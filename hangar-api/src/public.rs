//! The routes anyone may ask without a credential, in one table that authentication
//! ([`crate::auth`]), the request guard ([`crate::guard`]) and the drain ([`crate::drain`]) all
//! read, and that the routers serving those paths name.
//!
//! Each path is open for a reason, and the reason says how far: a health probe is open to
//! anyone, with any `Host`, even while the API drains (load balancers and systemd ask it); the
//! OAuth protected-resource metadata is open without a token, even before the API knows its
//! authentication (OAuth clients read it to learn where to get one); the status page's files
//! hold no data and are open without a credential once authentication is known (the page then
//! asks `/api` for everything, with the operator's credential); the steps a person's browser
//! takes in the per-user connect flow are open without a credential to a GET, and to a GET
//! from another site (a link, the authorization server's redirect), since a flow names its own
//! identity and only the browser that opened it finishes it (`crate::connect`); the hangar's
//! Client ID Metadata Document is open like the protected-resource metadata (authorization
//! servers fetch it).
//!
//! This module depends on nothing else in the crate, so that everything may name it.

/// `GET /health/live`: the process answers.
pub const HEALTH_LIVE: &str = "/health/live";
/// `GET /health/ready`: the API reaches the supervisor.
pub const HEALTH_READY: &str = "/health/ready";
/// The protected-resource metadata (RFC 9728) of the resource's origin.
pub const METADATA: &str = "/.well-known/oauth-protected-resource";
/// The protected-resource metadata of the MCP endpoint, the resource tokens are for.
pub const METADATA_MCP: &str = "/.well-known/oauth-protected-resource/mcp";
/// The protected-resource metadata of the old HTTP+SSE transport's endpoint (`/sse`).
pub const METADATA_SSE: &str = "/.well-known/oauth-protected-resource/sse";
/// The status page's HTML.
pub const PAGE_HTML: &str = "/";
/// The status page's style sheet.
pub const PAGE_CSS: &str = "/page.css";
/// The status page's script.
pub const PAGE_JS: &str = "/page.js";
/// The status page's second script: latency, clients, server facts, the playground.
pub const PAGE_WORK_JS: &str = "/work.js";
/// The connect flow's route: `POST` mints a flow (authenticated), `GET` opens one (public).
pub const CONNECT_ROUTE: &str = "/oauth/connect/{server}";
/// What every path of [`CONNECT_ROUTE`] starts with.
pub const CONNECT_PREFIX: &str = "/oauth/connect/";
/// Where the authorization server sends the person back.
pub const CALLBACK: &str = "/oauth/callback";
/// The hangar's Client ID Metadata Document.
pub const CLIENT_DOCUMENT: &str = "/oauth/client.json";

/// Why a path needs no credential, which says how far it is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Public {
    /// A health probe: open to anyone, with any `Host`, and answered while draining.
    Probe,
    /// OAuth metadata: open without a token, even before the API knows its authentication.
    Metadata,
    /// A status page file: open without a credential once the API knows its authentication.
    PageFile,
    /// A step of the connect flow a browser takes: a GET (or HEAD) needs no credential and may
    /// come from another site (a navigation); any other method is authenticated as ever.
    Browser,
}

/// Every route that needs no credential.
pub const PATHS: [(&str, Public); 11] = [
    (HEALTH_LIVE, Public::Probe),
    (HEALTH_READY, Public::Probe),
    (METADATA, Public::Metadata),
    (METADATA_MCP, Public::Metadata),
    (METADATA_SSE, Public::Metadata),
    (PAGE_HTML, Public::PageFile),
    (PAGE_CSS, Public::PageFile),
    (PAGE_JS, Public::PageFile),
    (PAGE_WORK_JS, Public::PageFile),
    (CALLBACK, Public::Browser),
    (CLIENT_DOCUMENT, Public::Metadata),
];

/// Why `path` (a request's path, its query left out) needs no credential, or `None` when it
/// does.
pub fn public(path: &str) -> Option<Public> {
    if let Some(server) = path.strip_prefix(CONNECT_PREFIX)
        && !server.is_empty()
        && !server.contains('/')
    {
        return Some(Public::Browser);
    }
    PATHS.iter().find(|(open, _)| *open == path).map(|(_, why)| *why)
}

/// Whether a request of `method` to a path open for `public` reasons needs no credential.
pub fn open_to(public: Option<Public>, method: &axum::http::Method) -> bool {
    match public {
        Some(Public::Browser) => matches!(*method, axum::http::Method::GET | axum::http::Method::HEAD),
        Some(_) => true,
        None => false,
    }
}

/// Whether `path` is a health probe, open to anyone at any time.
pub fn is_probe(path: &str) -> bool {
    public(path) == Some(Public::Probe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_listed_paths_are_public_and_exactly_them() {
        assert_eq!(public("/health/ready"), Some(Public::Probe));
        assert_eq!(public("/.well-known/oauth-protected-resource/mcp"), Some(Public::Metadata));
        assert_eq!(public("/page.js"), Some(Public::PageFile));
        for closed in ["/api/mcp_servers", "/mcp", "/health", "/health/ready/", "/page.js/x", "/metrics", ""] {
            assert_eq!(public(closed), None, "{closed}");
        }
        assert!(is_probe("/health/live") && !is_probe("/"));
        assert_eq!(public("/oauth/connect/linear"), Some(Public::Browser));
        assert_eq!(public("/oauth/callback"), Some(Public::Browser));
        assert_eq!(public("/oauth/client.json"), Some(Public::Metadata));
        for closed in ["/oauth/connect/", "/oauth/connect/a/b", "/oauth/callback/", "/oauth"] {
            assert_eq!(public(closed), None, "{closed}");
        }
        let (get, post) = (axum::http::Method::GET, axum::http::Method::POST);
        assert!(open_to(Some(Public::Browser), &get) && !open_to(Some(Public::Browser), &post));
        assert!(open_to(Some(Public::Metadata), &post) && !open_to(None, &get));
    }
}
