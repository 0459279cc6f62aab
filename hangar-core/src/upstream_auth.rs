//! `mcp_servers.<id>.auth`: how the hangar proves itself to a `remote` or `http` upstream.
//! Exactly one of `headers` (static credentials, sent on every request), `oauth` (the hangar is
//! an OAuth client of the upstream's authorization server, found by discovery, RFC 9728 then RFC
//! 8414, and sends the token it gets as `Authorization: Bearer`) or `token_exchange`. Of OAuth's
//! modes, machine to machine (`grant: client_credentials` with `per: shared`) runs today;
//! `per: user`, `authorization_code` and `token_exchange` are refused as not yet supported, so a
//! config asking for them fails at load instead of at the first call.
//!
//! A header's name is an HTTP token, and not one the hangar or the HTTP connection sets itself
//! (`Host`, hop-by-hop headers, `Content-Type`, MCP's own `Mcp-*`, trace context). Its value is
//! a [`Credential`], never inline, and may hold no line break or control character once read.

use std::path::PathBuf;

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::credential::Credential;
use crate::key_error::KeyError;

/// `mcp_servers.<id>.auth`: exactly one of `headers`, `oauth` or `token_exchange`.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamAuth {
    /// Headers sent with every request to the upstream: name to `{file: PATH}` or `{env:
    /// NAME}`, with an optional `prefix` (`Authorization: {file: /etc/hangar/token, prefix:
    /// "Bearer "}`). Never inline text.
    pub headers: Option<IndexMap<String, Credential>>,
    /// OAuth 2.1 to the upstream, as the MCP authorization spec asks of a client.
    pub oauth: Option<UpstreamOAuth>,
    /// Token exchange on behalf of the caller: not yet supported by this hangar (refused).
    #[schemars(skip)]
    pub token_exchange: Option<serde_json::Value>,
}

/// `mcp_servers.<id>.auth.oauth`: which tokens the hangar gets, from whom, for whom.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamOAuth {
    /// Whose token a call carries: `shared`, one for every caller; `user`, each caller's own
    /// (not yet supported).
    pub per: OAuthPer,
    /// How the token is got: `client_credentials` (machine to machine, with `per: shared`);
    /// `authorization_code` (a person signs in; not yet supported).
    pub grant: OAuthGrant,
    /// The hangar's registration with the upstream's authorization server: pre-registered,
    /// `{id, secret_file}`.
    pub client: OAuthClient,
    /// The scopes asked for. Default: none named (the authorization server's default).
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// `auth.oauth.per`: one token for all callers, or one per caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OAuthPer {
    User,
    Shared,
}

/// `auth.oauth.grant`: the OAuth grant that gets the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OAuthGrant {
    AuthorizationCode,
    ClientCredentials,
}

/// `auth.oauth.client`: a client pre-registered with the upstream's authorization server.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OAuthClient {
    /// The client id the authorization server gave.
    pub id: String,
    /// An absolute path to a file holding the client secret (read at each token request;
    /// surrounding whitespace ignored). Never inline.
    pub secret_file: PathBuf,
}

/// Headers the hangar or the HTTP connection sets: never taken from `auth.headers`.
const RESERVED: [&str; 17] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "content-type",
    "content-encoding",
    "accept",
    "expect",
    "traceparent",
    "tracestate",
];

impl UpstreamAuth {
    /// The static headers, if that is the kind of auth configured.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &Credential)> {
        self.headers.iter().flatten().map(|(name, credential)| (name.as_str(), credential))
    }

    /// Checks the block of server `at` (`mcp_servers.<id>.auth`) as written.
    pub fn check(&self, at: &str) -> Result<(), KeyError> {
        let given = [self.headers.is_some(), self.oauth.is_some(), self.token_exchange.is_some()];
        if given.iter().filter(|given| **given).count() != 1 {
            return Err(KeyError {
                key: at.into(),
                message: "give exactly one of `headers`, `oauth` or `token_exchange`".into(),
            });
        }
        if self.token_exchange.is_some() {
            return Err(KeyError {
                key: format!("{at}.token_exchange"),
                message: "`token_exchange` is not yet supported by this hangar; give static credentials in `headers`, or `oauth`".into(),
            });
        }
        if let Some(oauth) = &self.oauth {
            check_oauth(oauth, at)?;
        }
        let mut seen: Vec<String> = Vec::new();
        for name in self.headers.iter().flat_map(IndexMap::keys) {
            let key = format!("{at}.headers.{name}");
            if let Some(message) = name_problem(name) {
                return Err(KeyError { key, message });
            }
            let folded = name.to_ascii_lowercase();
            if seen.contains(&folded) {
                return Err(KeyError { key, message: "this header is given twice (names ignore case)".into() });
            }
            seen.push(folded);
        }
        Ok(())
    }

    /// Checks each header's value once read: nothing that would end or split a header line.
    pub fn check_values(&self, at: &str) -> Result<(), KeyError> {
        for (name, credential) in self.headers() {
            let value = credential.value().expose();
            if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
                return Err(KeyError {
                    key: format!("{at}.headers.{name}"),
                    message: format!(
                        "the credential ({}) holds a line break or control character, which cannot go in an HTTP header",
                        credential.source()
                    ),
                });
            }
        }
        Ok(())
    }
}

/// The key an operator fixes when server `id`'s upstream refuses the hangar's credentials:
/// its `auth.headers` when it has some, else its `auth`, where they go.
pub fn key_to_fix(id: &str, auth: Option<&UpstreamAuth>) -> String {
    match auth {
        Some(auth) if auth.headers.is_some() => format!("mcp_servers.{id}.auth.headers"),
        Some(auth) if auth.oauth.is_some() => format!("mcp_servers.{id}.auth.oauth"),
        _ => format!("mcp_servers.{id}.auth"),
    }
}

/// Refuses what the hangar cannot do yet, and a client that cannot work: `at` names
/// `mcp_servers.<id>.auth`.
fn check_oauth(oauth: &UpstreamOAuth, at: &str) -> Result<(), KeyError> {
    if oauth.per == OAuthPer::User {
        return Err(KeyError {
            key: format!("{at}.oauth.per"),
            message: "`per: user` is not supported yet: use `per: shared` with `grant: client_credentials`".into(),
        });
    }
    if oauth.grant == OAuthGrant::AuthorizationCode {
        return Err(KeyError {
            key: format!("{at}.oauth.grant"),
            message: "`grant: authorization_code` is not supported yet: use `grant: client_credentials`".into(),
        });
    }
    if oauth.client.id.is_empty() {
        return Err(KeyError {
            key: format!("{at}.oauth.client.id"),
            message: "expected the client id, not empty".into(),
        });
    }
    if !oauth.client.secret_file.is_absolute() {
        return Err(KeyError {
            key: format!("{at}.oauth.client.secret_file"),
            message: "expected an absolute path to the file holding the client secret".into(),
        });
    }
    if let Some(n) = oauth.scopes.iter().position(|scope| scope.is_empty() || scope.contains([' ', '"', '\\'])) {
        return Err(KeyError {
            key: format!("{at}.oauth.scopes[{n}]"),
            message: "a scope is a non-empty word without spaces, quotes or backslashes".into(),
        });
    }
    Ok(())
}

/// What is wrong with `name` as a header the hangar sends, if anything.
fn name_problem(name: &str) -> Option<String> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(token) {
        return Some("a header name is one or more letters, digits or `!#$%&'*+-.^_`|~`".into());
    }
    let folded = name.to_ascii_lowercase();
    if RESERVED.contains(&folded.as_str()) || folded.starts_with("mcp-") {
        return Some(format!(
            "`{name}` is set by the hangar or the HTTP connection itself (Host, hop-by-hop, Content-Type, Accept, Mcp-*, trace context)"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(yaml: &str) -> Result<(), KeyError> {
        serde_norway::from_str::<UpstreamAuth>(yaml).unwrap().check("mcp_servers.s.auth")
    }

    #[test]
    fn exactly_one_kind_and_no_token_exchange_yet() {
        check("{headers: {Authorization: {env: T}}}").unwrap();
        assert_eq!(check("{}").unwrap_err().key, "mcp_servers.s.auth");
        assert_eq!(check("{token_exchange: {audience: x}}").unwrap_err().key, "mcp_servers.s.auth.token_exchange");
        let oauth = "{per: shared, grant: client_credentials, client: {id: m, secret_file: /s}}";
        let both = format!("{{headers: {{A: {{env: T}}}}, oauth: {oauth}}}");
        assert_eq!(check(&both).unwrap_err().key, "mcp_servers.s.auth");
    }

    #[test]
    fn header_names_are_tokens_the_hangar_does_not_set() {
        for bad in ["Host", "connection", "Transfer-Encoding", "Mcp-Session-Id", "Bad Name", "X:Y", ""] {
            let err = check(&format!("{{headers: {{'{bad}': {{env: T}}}}}}")).unwrap_err();
            assert_eq!(err.key, format!("mcp_servers.s.auth.headers.{bad}"));
        }
        assert!(check("{headers: {X-Tenant: {env: T}, x-tenant: {env: U}}}").unwrap_err().message.contains("twice"));
        check("{headers: {X-Api-Key: {env: T}, Authorization: {env: U}}}").unwrap();
    }

    fn parsed(json: &str) -> UpstreamAuth {
        serde_json::from_str(json).expect("parses")
    }

    #[test]
    fn machine_to_machine_is_accepted_and_the_rest_refused_with_its_key() {
        let ok = r#"{"oauth": {"per": "shared", "grant": "client_credentials",
            "client": {"id": "m2m", "secret_file": "/s"}, "scopes": ["read"]}}"#;
        assert_eq!(parsed(ok).check("a"), Ok(()));
        let refused = |json: &str| parsed(json).check("a").expect_err("refused").key;
        assert_eq!(refused(&ok.replace("shared", "user")), "a.oauth.per");
        assert_eq!(refused(&ok.replace("client_credentials", "authorization_code")), "a.oauth.grant");
        assert_eq!(refused(&ok.replace("\"/s\"", "\"s\"")), "a.oauth.client.secret_file");
        assert_eq!(refused(&ok.replace("\"m2m\"", "\"\"")), "a.oauth.client.id");
        assert_eq!(refused(&ok.replace("[\"read\"]", "[\"a b\"]")), "a.oauth.scopes[0]");
    }
}
