//! Finding an upstream's authorization server (RFC 9728, then RFC 8414 / OpenID Connect).
//!
//! The upstream's own 401 names its protected-resource metadata (`WWW-Authenticate: Bearer
//! resource_metadata="..."`); without one, the well-known URIs beside its endpoint are tried.
//! That metadata names the authorization server, whose metadata is read from its well-known
//! URIs in the order RFC 8414 and OpenID Connect give. Metadata whose `issuer` (or `resource`)
//! differs from the one the URL was built from is refused: a server cannot pass off another's
//! token endpoint. Nothing here follows a redirect.

use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, WWW_AUTHENTICATE};
use serde::Deserialize;

/// The most read of one metadata document.
const MAX_METADATA_BYTES: usize = 256 * 1024;
/// How long one discovery request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// What discovery learned: who issues the upstream's tokens, and where to ask.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthServer {
    /// The authorization server's `issuer`, as its metadata confirmed it.
    pub issuer: String,
    pub token_endpoint: String,
    /// RFC 7009 revocation, where offered.
    pub revocation_endpoint: Option<String>,
    /// Where a person signs in (the authorization-code grant), where offered.
    pub authorization_endpoint: Option<String>,
    /// RFC 7591 dynamic client registration, where offered.
    pub registration_endpoint: Option<String>,
    /// The PKCE methods it supports (`S256` is required of it by the per-user flow).
    pub code_challenge_methods: Vec<String>,
    /// Whether it takes a Client ID Metadata Document's URL as a client id.
    pub client_id_metadata_document_supported: bool,
    /// Whether it names itself in its authorization responses (`iss`, RFC 9207).
    pub iss_parameter_supported: bool,
    /// The upstream's canonical URI: the `resource` (RFC 8707) its tokens are asked for.
    pub resource: String,
    /// The scopes the upstream's metadata says it supports (empty when it does not say).
    pub scopes_supported: Vec<String>,
}

impl AuthServer {
    /// Whether it takes PKCE with S256, which the per-user flow requires of it (an
    /// authorization server that does not say so is taken not to).
    pub fn takes_pkce_s256(&self) -> bool {
        self.code_challenge_methods.iter().any(|method| method == "S256")
    }
}

/// Why discovery failed, in words for the server's log (never a secret: none is involved).
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error("no protected-resource metadata at {0}")]
    NoResourceMetadata(String),
    #[error("the protected-resource metadata names no authorization server")]
    NoAuthorizationServer,
    #[error("the protected-resource metadata is for `{found}`, not this server's `{expected}`")]
    WrongResource { expected: String, found: String },
    #[error("no authorization-server metadata for `{0}` at its well-known URIs")]
    NoServerMetadata(String),
    #[error("the authorization-server metadata fetched for `{expected}` says its issuer is `{found}`: refused")]
    WrongIssuer { expected: String, found: String },
    #[error("`{0}` is not a URL discovery can use")]
    BadUrl(String),
}

#[derive(Deserialize)]
struct ResourceMetadata {
    resource: Option<String>,
    #[serde(default)]
    authorization_servers: Vec<String>,
    #[serde(default)]
    scopes_supported: Vec<String>,
}

#[derive(Deserialize)]
struct ServerMetadata {
    issuer: String,
    token_endpoint: Option<String>,
    revocation_endpoint: Option<String>,
    authorization_endpoint: Option<String>,
    registration_endpoint: Option<String>,
    #[serde(default)]
    code_challenge_methods_supported: Vec<String>,
    #[serde(default)]
    client_id_metadata_document_supported: bool,
    #[serde(default)]
    authorization_response_iss_parameter_supported: bool,
}

/// Discovers the authorization server of the MCP server at `endpoint`, with `http` (a client
/// that follows no redirect).
pub async fn discover(http: &reqwest::Client, endpoint: &str) -> Result<AuthServer, DiscoveryError> {
    let endpoint_url = reqwest::Url::parse(endpoint).map_err(|_| DiscoveryError::BadUrl(endpoint.into()))?;
    let mut candidates = Vec::new();
    if let Some(named) = challenged_metadata(http, endpoint).await {
        candidates.push(named);
    }
    candidates.extend(well_known(&endpoint_url, "oauth-protected-resource"));
    let mut found = None;
    for url in &candidates {
        if let Some(metadata) = fetch_json::<ResourceMetadata>(http, url).await {
            found = Some(metadata);
            break;
        }
    }
    let metadata = found.ok_or_else(|| DiscoveryError::NoResourceMetadata(candidates.join(", ")))?;
    let resource = canonical(endpoint);
    if let Some(named) = &metadata.resource
        && canonical(named) != resource
    {
        return Err(DiscoveryError::WrongResource { expected: resource, found: named.clone() });
    }
    let issuer = metadata.authorization_servers.first().ok_or(DiscoveryError::NoAuthorizationServer)?;
    let server = server_metadata(http, issuer).await?;
    let token_endpoint = server.token_endpoint.ok_or_else(|| DiscoveryError::NoServerMetadata(issuer.clone()))?;
    Ok(AuthServer {
        issuer: server.issuer,
        token_endpoint,
        revocation_endpoint: server.revocation_endpoint,
        authorization_endpoint: server.authorization_endpoint,
        registration_endpoint: server.registration_endpoint,
        code_challenge_methods: server.code_challenge_methods_supported,
        client_id_metadata_document_supported: server.client_id_metadata_document_supported,
        iss_parameter_supported: server.authorization_response_iss_parameter_supported,
        resource,
        scopes_supported: metadata.scopes_supported,
    })
}

/// The authorization server's metadata, from the well-known URIs of RFC 8414 and OpenID
/// Connect (path inserted, then OpenID Connect's appended form); its `issuer` must be `issuer`.
async fn server_metadata(http: &reqwest::Client, issuer: &str) -> Result<ServerMetadata, DiscoveryError> {
    let url = reqwest::Url::parse(issuer).map_err(|_| DiscoveryError::BadUrl(issuer.into()))?;
    let mut candidates = well_known(&url, "oauth-authorization-server");
    candidates.extend(well_known(&url, "openid-configuration"));
    candidates.push(format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/')));
    candidates.dedup();
    for candidate in &candidates {
        if let Some(metadata) = fetch_json::<ServerMetadata>(http, candidate).await {
            if metadata.issuer != issuer {
                return Err(DiscoveryError::WrongIssuer { expected: issuer.into(), found: metadata.issuer });
            }
            return Ok(metadata);
        }
    }
    Err(DiscoveryError::NoServerMetadata(issuer.into()))
}

/// The `resource_metadata` URL of the upstream's challenge to a request without a token.
async fn challenged_metadata(http: &reqwest::Client, endpoint: &str) -> Option<String> {
    let probe = r#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#;
    let response = http
        .post(endpoint)
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream")
        .body(probe)
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await
        .ok()?;
    if response.status() != reqwest::StatusCode::UNAUTHORIZED {
        return None;
    }
    let challenge = response.headers().get(WWW_AUTHENTICATE)?.to_str().ok()?;
    challenge_param(challenge, "resource_metadata")
}

/// The value of `name` in a `WWW-Authenticate` challenge (`Bearer a="x", b=y`), if present.
pub fn challenge_param(challenge: &str, name: &str) -> Option<String> {
    let mut rest = challenge.trim();
    // The scheme, then comma-separated auth-params.
    if let Some((scheme, params)) = rest.split_once(' ')
        && !scheme.contains('=')
    {
        rest = params;
    }
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let key = key.trim().trim_start_matches(',').trim();
        let after = after.trim_start();
        let (value, tail) = if let Some(quoted) = after.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, next)) = chars.next() {
                            value.push(next);
                        }
                    }
                    '"' => {
                        end = i + 1;
                        break;
                    }
                    c => value.push(c),
                }
            }
            (value, &quoted[end..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_owned(), &after[end..])
        };
        if key.eq_ignore_ascii_case(name) {
            return Some(value);
        }
        rest = tail.trim_start().trim_start_matches(',').trim_start();
    }
    None
}

/// The well-known URIs for `suffix` of `url`: with its path inserted after the suffix
/// (RFC 8414 §3.1, RFC 9728 §3.1) and, when it has a path, at the root too.
fn well_known(url: &reqwest::Url, suffix: &str) -> Vec<String> {
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    let mut uris = vec![format!("{origin}/.well-known/{suffix}{path}")];
    if !path.is_empty() {
        uris.push(format!("{origin}/.well-known/{suffix}"));
    }
    uris
}

/// A resource URI in the canonical form RFC 8707 and the MCP spec compare: no fragment, no
/// trailing slash.
fn canonical(uri: &str) -> String {
    let uri = uri.split('#').next().unwrap_or(uri);
    uri.trim_end_matches('/').to_owned()
}

/// A JSON document at `url`, if it answers 200 with one (bounded in size and time).
async fn fetch_json<T: serde::de::DeserializeOwned>(http: &reqwest::Client, url: &str) -> Option<T> {
    let mut response = http.get(url).header(ACCEPT, "application/json").timeout(REQUEST_TIMEOUT).send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.ok()? {
        if body.len() + chunk.len() > MAX_METADATA_BYTES {
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_challenge_is_read_param_by_param() {
        let challenge = r#"Bearer error="invalid_token", error_description="a, \"b\"", resource_metadata="http://x/.well-known/oauth-protected-resource/mcp""#;
        assert_eq!(challenge_param(challenge, "error").as_deref(), Some("invalid_token"));
        assert_eq!(challenge_param(challenge, "error_description").as_deref(), Some("a, \"b\""));
        assert_eq!(
            challenge_param(challenge, "resource_metadata").as_deref(),
            Some("http://x/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(challenge_param("Bearer realm=x, scope=read", "scope").as_deref(), Some("read"));
        assert_eq!(challenge_param("Bearer", "scope"), None);
        assert_eq!(challenge_param("Bearer =", "scope"), None);
    }

    #[test]
    fn pkce_s256_must_be_said() {
        let mut server: AuthServer = AuthServer {
            issuer: "https://as".into(),
            token_endpoint: "https://as/token".into(),
            revocation_endpoint: None,
            authorization_endpoint: None,
            registration_endpoint: None,
            code_challenge_methods: vec!["plain".into()],
            client_id_metadata_document_supported: false,
            iss_parameter_supported: false,
            resource: "https://mcp".into(),
            scopes_supported: Vec::new(),
        };
        assert!(!server.takes_pkce_s256());
        server.code_challenge_methods.clear();
        assert!(!server.takes_pkce_s256(), "unsaid is not supported");
        server.code_challenge_methods = vec!["plain".into(), "S256".into()];
        assert!(server.takes_pkce_s256());
        let metadata: ServerMetadata = serde_json::from_str(
            r#"{"issuer": "https://as", "code_challenge_methods_supported": ["S256"],
                "authorization_response_iss_parameter_supported": true}"#,
        )
        .unwrap();
        assert_eq!(metadata.code_challenge_methods_supported, ["S256"]);
        assert!(metadata.authorization_response_iss_parameter_supported);
        assert!(!metadata.client_id_metadata_document_supported);
    }

    #[test]
    fn well_known_uris_insert_the_path() {
        let url = reqwest::Url::parse("http://h:1/mcp/").expect("url");
        assert_eq!(
            well_known(&url, "oauth-protected-resource"),
            ["http://h:1/.well-known/oauth-protected-resource/mcp", "http://h:1/.well-known/oauth-protected-resource"]
        );
        let root = reqwest::Url::parse("http://h:1").expect("url");
        assert_eq!(well_known(&root, "openid-configuration"), ["http://h:1/.well-known/openid-configuration"]);
    }
}
