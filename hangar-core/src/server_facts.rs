//! What a server's details show of its config and of its process, for an operator comparing the
//! page with what they deployed: never a value that may be secret (arguments, environment
//! values, an endpoint's credentials or query).

use serde::{Deserialize, Serialize};

use crate::limits::RateLimit;

/// What the config says of a server, beside what `meta` already says (its program, description,
/// idle TTL and health-check interval).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigFacts {
    /// How many arguments follow its program (`meta.program`); they may carry secrets and are
    /// not shown.
    #[serde(default)]
    pub arguments: usize,
    /// Its endpoint, without credentials, query or fragment ([`shown_endpoint`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The names of the environment variables it is given (never their values).
    #[serde(default)]
    pub env: Vec<String>,
    /// Calls to it in flight at once (`limits.max_concurrent_calls`, the default filled in);
    /// `null`: no limit.
    #[serde(default)]
    pub max_concurrent_calls: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// The prefix of its front-door names.
    pub expose_as: String,
    pub handshake_timeout_s: f64,
}

/// Its process as `/proc` tells, while it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessFacts {
    pub pid: u32,
    /// Resident memory of the process itself (not its children), in bytes.
    pub rss_bytes: u64,
    /// CPU time it has used, user and system, in seconds.
    pub cpu_s: f64,
    pub threads: u64,
}

/// `endpoint` as a surface may show it: scheme, host, port and path only, so a token in its
/// user information or query never reaches a page; `None` if it does not parse.
pub fn shown_endpoint(endpoint: &str) -> Option<String> {
    let mut url = url::Url::parse(endpoint).ok()?;
    url.set_query(None);
    url.set_fragment(None);
    url.set_username("").ok()?;
    url.set_password(None).ok()?;
    Some(url.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_shown_without_its_secrets() {
        assert_eq!(
            shown_endpoint("https://user:token@mcp.example.com:8443/mcp?key=secret#x").as_deref(),
            Some("https://mcp.example.com:8443/mcp")
        );
        assert_eq!(shown_endpoint("not a url"), None);
    }
}
