//! `mcp_servers.<id>.auth`: how the hangar proves itself to a `remote` or `http` upstream.
//! Exactly one of `headers` (static credentials, sent on every request), `oauth` (the hangar is
//! an OAuth client of the upstream's authorization server, found by discovery, RFC 9728 then RFC
//! 8414, and sends the token it gets as `Authorization: Bearer`) or `token_exchange` (RFC 8693:
//! the caller's own validated token is exchanged for one meant for the upstream). OAuth has two
//! modes: machine to machine (`per: shared`, `grant: client_credentials`), one token for every
//! caller; and per user (`per: user`, `grant: authorization_code`), where each caller connects
//! their own account in a browser. Other pairings are refused at load, so a config asking for
//! them fails there instead of at the first call.
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
    /// Token exchange on behalf of the caller (RFC 8693): the caller's validated OAuth token is
    /// exchanged for one meant for this upstream. Only callers that came with an OAuth token
    /// can call such a server.
    pub token_exchange: Option<TokenExchange>,
}

/// `mcp_servers.<id>.auth.token_exchange`: where and how the caller's token is exchanged.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenExchange {
    /// The token endpoint of the authorization server that exchanges tokens (an `http` or
    /// `https` URL).
    pub token_endpoint: String,
    /// The hangar's registration with that authorization server.
    pub client: OAuthClient,
    /// The `audience` asked for: the upstream, as the authorization server names it.
    pub audience: String,
    /// The scopes asked for. Default: none named.
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// `mcp_servers.<id>.auth.oauth`: which tokens the hangar gets, from whom, for whom.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamOAuth {
    /// Whose token a call carries: `shared`, one for every caller; `user`, each caller's own,
    /// got when they connect their account (`GET /oauth/connect/{server}`).
    pub per: OAuthPer,
    /// How the token is got: `client_credentials` (machine to machine, with `per: shared`);
    /// `authorization_code` (a person signs in, with `per: user`).
    pub grant: OAuthGrant,
    /// The hangar's registration with the upstream's authorization server: pre-registered,
    /// `{id, secret_file}`; or `cimd` (the Client ID Metadata Document the hangar serves at
    /// `/oauth/client.json`); or `dcr` (dynamic registration). Default: with `per: user`, `cimd`
    /// where the authorization server supports it, else `dcr`. `client_credentials` needs a
    /// pre-registered client.
    #[serde(default)]
    pub client: Option<OAuthClientChoice>,
    /// The scopes asked for. Default: those the upstream's challenge or metadata asks for, else
    /// none named (the authorization server's default).
    #[serde(default)]
    pub scopes: Vec<String>,
}

impl UpstreamOAuth {
    /// The pre-registered client, if that is how the hangar is registered.
    pub fn registered(&self) -> Option<&OAuthClient> {
        match &self.client {
            Some(OAuthClientChoice::Registered(client)) => Some(client),
            _ => None,
        }
    }
}

/// `auth.oauth.client`: a pre-registered client, or how the hangar registers itself.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum OAuthClientChoice {
    /// Pre-registered: `{id, secret_file}`.
    Registered(OAuthClient),
    /// `cimd` or `dcr`.
    Way(ClientRegistration),
}

/// How the hangar registers itself with an authorization server that does not know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClientRegistration {
    /// Its client id is the URL of the Client ID Metadata Document it serves
    /// (`<credentials.public_url>/oauth/client.json`).
    Cimd,
    /// Dynamic client registration (RFC 7591), once per authorization server, kept sealed.
    Dcr,
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

/// A client pre-registered with an authorization server.
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

    /// Whether each caller brings their own token: `oauth.per: user`, or `token_exchange`.
    pub fn per_caller(&self) -> bool {
        self.per_user() || self.token_exchange.is_some()
    }

    /// Whether each caller connects their own account (`oauth.per: user`).
    pub fn per_user(&self) -> bool {
        self.oauth.as_ref().is_some_and(|oauth| oauth.per == OAuthPer::User)
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
        if let Some(exchange) = &self.token_exchange {
            check_exchange(exchange, &format!("{at}.token_exchange"))?;
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
        Some(auth) if auth.token_exchange.is_some() => format!("mcp_servers.{id}.auth.token_exchange"),
        _ => format!("mcp_servers.{id}.auth"),
    }
}

/// Refuses pairings that cannot work: `at` names `mcp_servers.<id>.auth`.
fn check_oauth(oauth: &UpstreamOAuth, at: &str) -> Result<(), KeyError> {
    let refused =
        |key: &str, message: &str| Err(KeyError { key: format!("{at}.oauth.{key}"), message: message.into() });
    match (oauth.per, oauth.grant) {
        (OAuthPer::Shared, OAuthGrant::ClientCredentials) | (OAuthPer::User, OAuthGrant::AuthorizationCode) => {}
        (OAuthPer::User, OAuthGrant::ClientCredentials) => {
            return refused(
                "grant",
                "`client_credentials` gets a token for the hangar, not for a user: with `per: user` use `grant: authorization_code`",
            );
        }
        (OAuthPer::Shared, OAuthGrant::AuthorizationCode) => {
            return refused(
                "per",
                "one person's sign-in serving every caller is not supported: use `per: user`, or `grant: client_credentials`",
            );
        }
    }
    match &oauth.client {
        Some(OAuthClientChoice::Registered(client)) => check_client(client, &format!("{at}.oauth.client"))?,
        _ if oauth.grant == OAuthGrant::ClientCredentials => {
            return refused("client", "`client_credentials` needs a pre-registered client: `{id, secret_file}`");
        }
        _ => {}
    }
    check_scopes(&oauth.scopes, &format!("{at}.oauth.scopes"))
}

/// Checks a `token_exchange` block at `at`.
fn check_exchange(exchange: &TokenExchange, at: &str) -> Result<(), KeyError> {
    let url = exchange.token_endpoint.as_str();
    if !(url.starts_with("https://") || url.starts_with("http://")) || url.contains(char::is_whitespace) {
        return Err(KeyError {
            key: format!("{at}.token_endpoint"),
            message: "expected the authorization server's token endpoint, an http or https URL".into(),
        });
    }
    if exchange.audience.is_empty() {
        return Err(KeyError {
            key: format!("{at}.audience"),
            message: "expected the upstream's audience, not empty".into(),
        });
    }
    check_client(&exchange.client, &format!("{at}.client"))?;
    check_scopes(&exchange.scopes, &format!("{at}.scopes"))
}

/// Checks a pre-registered client at `at`.
fn check_client(client: &OAuthClient, at: &str) -> Result<(), KeyError> {
    if client.id.is_empty() {
        return Err(KeyError { key: format!("{at}.id"), message: "expected the client id, not empty".into() });
    }
    if !client.secret_file.is_absolute() {
        return Err(KeyError {
            key: format!("{at}.secret_file"),
            message: "expected an absolute path to the file holding the client secret".into(),
        });
    }
    Ok(())
}

/// Checks the scopes listed at `at`.
fn check_scopes(scopes: &[String], at: &str) -> Result<(), KeyError> {
    match scopes.iter().position(|scope| scope.is_empty() || scope.contains([' ', '"', '\\'])) {
        Some(n) => Err(KeyError {
            key: format!("{at}[{n}]"),
            message: "a scope is a non-empty word without spaces, quotes or backslashes".into(),
        }),
        None => Ok(()),
    }
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
    fn exactly_one_kind() {
        check("{headers: {Authorization: {env: T}}}").unwrap();
        assert_eq!(check("{}").unwrap_err().key, "mcp_servers.s.auth");
        let exchange = "{token_endpoint: http://idp/token, client: {id: h, secret_file: /s}, audience: https://up}";
        check(&format!("{{token_exchange: {exchange}}}")).unwrap();
        let bad = exchange.replace("http://idp/token", "idp/token");
        assert_eq!(
            check(&format!("{{token_exchange: {bad}}}")).unwrap_err().key,
            "mcp_servers.s.auth.token_exchange.token_endpoint"
        );
        let bad = exchange.replace("/s}", "s}");
        assert_eq!(
            check(&format!("{{token_exchange: {bad}}}")).unwrap_err().key,
            "mcp_servers.s.auth.token_exchange.client.secret_file"
        );
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
    fn machine_to_machine_and_per_user_are_accepted_and_the_rest_refused_with_its_key() {
        let ok = r#"{"oauth": {"per": "shared", "grant": "client_credentials",
            "client": {"id": "m2m", "secret_file": "/s"}, "scopes": ["read"]}}"#;
        assert_eq!(parsed(ok).check("a"), Ok(()));
        let refused = |json: &str| parsed(json).check("a").expect_err("refused").key;
        assert_eq!(refused(&ok.replace("shared", "user")), "a.oauth.grant");
        assert_eq!(refused(&ok.replace("client_credentials", "authorization_code")), "a.oauth.per");
        let user = ok.replace("shared", "user").replace("client_credentials", "authorization_code");
        assert_eq!(parsed(&user).check("a"), Ok(()));
        for way in ["\"cimd\"", "\"dcr\""] {
            let choice = user.replace(r#"{"id": "m2m", "secret_file": "/s"}"#, way);
            assert_eq!(parsed(&choice).check("a"), Ok(()), "{choice}");
            assert_eq!(
                refused(&choice.replace("user", "shared").replace("authorization_code", "client_credentials")),
                "a.oauth.client"
            );
        }
        let omitted = r#"{"oauth": {"per": "user", "grant": "authorization_code"}}"#;
        assert_eq!(parsed(omitted).check("a"), Ok(()));
        assert!(parsed(omitted).oauth.unwrap().registered().is_none());
        assert_eq!(refused(&ok.replace("\"/s\"", "\"s\"")), "a.oauth.client.secret_file");
        assert_eq!(refused(&ok.replace("\"m2m\"", "\"\"")), "a.oauth.client.id");
        assert_eq!(refused(&ok.replace("[\"read\"]", "[\"a b\"]")), "a.oauth.scopes[0]");
    }
}
