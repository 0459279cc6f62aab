//! Where the API may serve without authentication: the one loopback-and-auth rule.
//!
//! A listener reachable beyond loopback serves anyone on the network. The config's `auth:`
//! block, which says how callers authenticate, lives in the supervisor and reaches the API only
//! after it listens; so a listener beyond loopback is allowed at start, and the rule is applied
//! to every request instead: it **fails closed**. While the API listens beyond loopback and no
//! authentication is known (the settings are not learned yet, or they configure none: no
//! `auth.api_keys`, no `auth.oauth`, no `--api-keys`), every request but the health probes and
//! the protected-resource metadata is refused with 503 [`UNPROTECTED`]. `--unsafe-no-auth`
//! lifts the rule. On loopback, no authentication means the anonymous caller, as always.

use std::net::SocketAddr;

/// The refusal of a request while the rule holds (503).
pub const UNPROTECTED: &str = "this API listens beyond loopback and no authentication is configured (auth.api_keys, auth.oauth or --api-keys); give one, or --unsafe-no-auth";

/// What the API listens on.
#[derive(Debug, Clone, Copy)]
pub enum Listening<'a> {
    /// `--listen`, before binding: loopback when it names `127.0.0.0/8`, `[::1]` or `localhost`.
    Configured(&'a str),
    /// A socket listening (bound from `--listen`, or systemd's).
    Bound(SocketAddr),
}

/// How far a listener reaches, and what that asks of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposure {
    /// Loopback only: no authentication configured means the anonymous caller.
    Loopback,
    /// Beyond loopback: served only while some authentication is configured.
    Guarded,
    /// Beyond loopback with `--unsafe-no-auth`: served even without authentication.
    Unguarded,
}

impl Exposure {
    /// Whether requests are refused while no authentication is configured.
    pub fn requires_auth(self) -> bool {
        self == Exposure::Guarded
    }
}

/// The rule: loopback needs nothing; beyond it, authentication, unless `--unsafe-no-auth`.
/// An IPv4-mapped address (`[::ffff:127.0.0.1]`) counts as beyond loopback: the rule judges
/// addresses by what they say, never by how the kernel may map them.
pub fn check(listening: Listening<'_>, unsafe_no_auth: bool) -> Exposure {
    let loopback = match listening {
        Listening::Configured(address) => is_loopback(address),
        Listening::Bound(local) => local.ip().is_loopback(),
    };
    match (loopback, unsafe_no_auth) {
        (true, _) => Exposure::Loopback,
        (false, false) => Exposure::Guarded,
        (false, true) => Exposure::Unguarded,
    }
}

/// Whether `--listen` names a loopback address (`127.0.0.0/8`, `[::1]`, `localhost`).
fn is_loopback(address: &str) -> bool {
    match address.parse::<SocketAddr>() {
        Ok(addr) => addr.ip().is_loopback(),
        Err(_) => address.rsplit_once(':').is_some_and(|(host, _)| host.eq_ignore_ascii_case("localhost")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn configured(address: &str, unsafe_no_auth: bool) -> Exposure {
        check(Listening::Configured(address), unsafe_no_auth)
    }

    fn bound(address: &str, unsafe_no_auth: bool) -> Exposure {
        check(Listening::Bound(address.parse().unwrap()), unsafe_no_auth)
    }

    #[test]
    fn loopback_needs_nothing() {
        for address in ["127.0.0.1:8000", "127.9.9.9:0", "[::1]:8000", "localhost:8000", "LOCALHOST:1"] {
            assert_eq!(configured(address, false), Exposure::Loopback, "{address}");
        }
        for address in ["127.0.0.1:8000", "[::1]:0"] {
            assert_eq!(bound(address, false), Exposure::Loopback, "{address}");
        }
        assert!(!Exposure::Loopback.requires_auth());
    }

    #[test]
    fn beyond_loopback_requires_authentication() {
        for address in
            ["0.0.0.0:8000", "[::]:8000", "10.0.0.1:80", "myhost:8000", "localhost.example:80", "[::ffff:127.0.0.1]:80"]
        {
            assert_eq!(configured(address, false), Exposure::Guarded, "{address}");
        }
        for address in ["0.0.0.0:8000", "192.168.1.2:8000", "[::ffff:127.0.0.1]:0"] {
            assert_eq!(bound(address, false), Exposure::Guarded, "{address}");
        }
        assert!(Exposure::Guarded.requires_auth());
    }

    #[test]
    fn unsafe_no_auth_lifts_the_rule_beyond_loopback_only() {
        assert_eq!(configured("0.0.0.0:8000", true), Exposure::Unguarded);
        assert_eq!(bound("[::]:8000", true), Exposure::Unguarded);
        assert_eq!(configured("127.0.0.1:8000", true), Exposure::Loopback);
        assert!(!Exposure::Unguarded.requires_auth());
    }
}
