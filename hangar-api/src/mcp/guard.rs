//! DNS-rebinding protection: which `Host` and `Origin` headers `/mcp` serves.

use axum::http::HeaderMap;
use axum::http::header::{HOST, ORIGIN};

const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// Why a request is refused, for the 403 body.
pub fn refusal(headers: &HeaderMap, loopback_only: bool) -> Option<&'static str> {
    if let Some(origin) = headers.get(ORIGIN) {
        let allowed = origin.to_str().ok().and_then(origin_host).is_some_and(is_loopback_name);
        if !allowed {
            return Some("origin not allowed");
        }
    }
    if loopback_only && let Some(host) = headers.get(HOST) {
        // A missing Host cannot come from a browser, so only a present one is judged.
        if !host.to_str().ok().map(authority_host).is_some_and(is_loopback_name) {
            return Some("host not allowed");
        }
    }
    None
}

fn is_loopback_name(host: &str) -> bool {
    LOOPBACK_NAMES.iter().any(|name| host.eq_ignore_ascii_case(name))
}

/// The host of an `Origin` (`scheme://host[:port]`); `null` and other opaque origins have none.
fn origin_host(origin: &str) -> Option<&str> {
    let (_, rest) = origin.trim().split_once("://")?;
    let authority = rest.split('/').next().unwrap_or(rest);
    Some(authority_host(authority))
}

/// `host[:port]` to `host`, keeping an IPv6 literal's brackets.
fn authority_host(authority: &str) -> &str {
    let authority = authority.trim();
    if authority.starts_with('[') {
        return match authority.find(']') {
            Some(end) => &authority[..=end],
            None => authority,
        };
    }
    match authority.rsplit_once(':') {
        Some((host, _port)) => host,
        None => authority,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with(name: axum::http::HeaderName, value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn loopback_hosts_pass_and_others_are_refused() {
        for host in ["localhost:8000", "127.0.0.1:9", "[::1]:80", "LOCALHOST", "127.0.0.1"] {
            assert_eq!(refusal(&with(HOST, host), true), None, "{host}");
        }
        assert_eq!(refusal(&with(HOST, "evil.example.com"), true), Some("host not allowed"));
        assert_eq!(refusal(&with(HOST, "evil.example.com:8000"), false), None, "not bound to loopback");
        assert_eq!(refusal(&HeaderMap::new(), true), None);
    }

    #[test]
    fn origins_must_be_loopback() {
        assert_eq!(refusal(&with(ORIGIN, "http://localhost:3000"), true), None);
        assert_eq!(refusal(&with(ORIGIN, "https://[::1]"), true), None);
        assert_eq!(refusal(&with(ORIGIN, "https://evil.example.com"), true), Some("origin not allowed"));
        assert_eq!(refusal(&with(ORIGIN, "null"), false), Some("origin not allowed"));
    }
}
