//! `mcp_servers.<id>.auth`: how the hangar proves itself to a `remote` or `http` upstream.
//! Exactly one of `headers` (static credentials, sent on every request), `oauth` or
//! `token_exchange`; this hangar takes `headers` and refuses the other two as not yet supported.
//!
//! A header's name is an HTTP token, and not one the hangar or the HTTP connection sets itself
//! (`Host`, hop-by-hop headers, `Content-Type`, MCP's own `Mcp-*`, trace context). Its value is
//! a [`Credential`], never inline, and may hold no line break or control character once read.

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
    /// OAuth to the upstream: not yet supported by this hangar (refused).
    #[schemars(skip)]
    pub oauth: Option<serde_json::Value>,
    /// Token exchange on behalf of the caller: not yet supported by this hangar (refused).
    #[schemars(skip)]
    pub token_exchange: Option<serde_json::Value>,
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
        for (key, given) in [("oauth", self.oauth.is_some()), ("token_exchange", self.token_exchange.is_some())] {
            if given {
                return Err(KeyError {
                    key: format!("{at}.{key}"),
                    message: format!(
                        "`{key}` is not yet supported by this hangar; give static credentials in `headers`"
                    ),
                });
            }
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
        _ => format!("mcp_servers.{id}.auth"),
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
    fn exactly_one_kind_and_only_headers_for_now() {
        check("{headers: {Authorization: {env: T}}}").unwrap();
        assert_eq!(check("{}").unwrap_err().key, "mcp_servers.s.auth");
        let oauth = check("{oauth: {per: user}}").unwrap_err();
        assert_eq!(oauth.key, "mcp_servers.s.auth.oauth");
        assert!(oauth.message.contains("not yet supported"));
        assert_eq!(check("{token_exchange: {audience: x}}").unwrap_err().key, "mcp_servers.s.auth.token_exchange");
        assert_eq!(check("{headers: {A: {env: T}}, oauth: {}}").unwrap_err().key, "mcp_servers.s.auth");
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
}
