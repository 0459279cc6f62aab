//! `mcp_servers.<id>.auth`: how the hangar proves itself to a server that wants credentials.
//!
//! Only the `oauth` part lives here for now: the hangar is an OAuth client of the upstream's
//! authorization server (found by discovery, RFC 9728 then RFC 8414), and sends the access
//! token it gets as `Authorization: Bearer`. Of its modes, machine to machine
//! (`grant: client_credentials` with `per: shared`) is what runs today; `per: user` and
//! `authorization_code` are refused by [`validate`] as not yet supported, so a config asking for
//! them fails at load instead of at the first call.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::key_error::KeyError;

/// `mcp_servers.<id>.auth`: the credential the hangar presents to this upstream.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamAuth {
    /// OAuth 2.1 to the upstream, as the MCP authorization spec asks of a client.
    pub oauth: Option<UpstreamOAuth>,
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

/// Refuses what the hangar cannot do yet, and a client that cannot work: `at` names
/// `mcp_servers.<id>.auth`.
pub fn validate(auth: &UpstreamAuth, at: &str) -> Result<(), KeyError> {
    let Some(oauth) = &auth.oauth else { return Ok(()) };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(json: &str) -> UpstreamAuth {
        serde_json::from_str(json).expect("parses")
    }

    #[test]
    fn machine_to_machine_is_accepted_and_the_rest_refused_with_its_key() {
        let ok = r#"{"oauth": {"per": "shared", "grant": "client_credentials",
            "client": {"id": "m2m", "secret_file": "/s"}, "scopes": ["read"]}}"#;
        assert_eq!(validate(&parsed(ok), "a"), Ok(()));
        let refused = |json: &str| validate(&parsed(json), "a").expect_err("refused").key;
        assert_eq!(refused(&ok.replace("shared", "user")), "a.oauth.per");
        assert_eq!(refused(&ok.replace("client_credentials", "authorization_code")), "a.oauth.grant");
        assert_eq!(refused(&ok.replace("\"/s\"", "\"s\"")), "a.oauth.client.secret_file");
        assert_eq!(refused(&ok.replace("\"m2m\"", "\"\"")), "a.oauth.client.id");
        assert_eq!(refused(&ok.replace("[\"read\"]", "[\"a b\"]")), "a.oauth.scopes[0]");
        assert_eq!(validate(&UpstreamAuth::default(), "a"), Ok(()));
    }
}
