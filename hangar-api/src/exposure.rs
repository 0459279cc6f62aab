//! Where the API may serve without API keys: the one loopback-and-auth rule.
//!
//! A listener reachable beyond loopback serves anyone on the network, so it needs API keys,
//! unless the operator says `--unsafe-no-auth`. The rule is applied once, before anything is
//! served: to `--listen` before binding (so nothing ever listens beyond loopback unprotected),
//! or to the socket systemd passed once it is adopted.

use std::net::SocketAddr;

use hangar_runtime::exit::{EX_CONFIG, Sysexit};

/// What the API is about to listen on.
#[derive(Debug, Clone, Copy)]
pub enum Listening<'a> {
    /// `--listen`, before binding: loopback when it names `127.0.0.0/8`, `[::1]` or `localhost`.
    Configured(&'a str),
    /// A socket already listening (systemd's).
    Bound(SocketAddr),
}

/// How far the allowed listener reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    Loopback,
    Beyond,
}

/// Serving beyond loopback was asked for without keys and without `--unsafe-no-auth`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("refusing to serve {address} beyond loopback without API keys: give --api-keys FILE, or --unsafe-no-auth")]
pub struct Unprotected {
    pub address: String,
}

impl Sysexit for Unprotected {
    fn exit_code(&self) -> u8 {
        EX_CONFIG
    }
}

/// The rule: loopback is always allowed; beyond it, only with API keys or `--unsafe-no-auth`.
pub fn check(listening: Listening<'_>, has_keys: bool, unsafe_no_auth: bool) -> Result<Reach, Unprotected> {
    let (address, loopback) = match listening {
        Listening::Configured(address) => (address.to_owned(), is_loopback(address)),
        Listening::Bound(local) => (local.to_string(), local.ip().is_loopback()),
    };
    match (loopback, has_keys || unsafe_no_auth) {
        (true, _) => Ok(Reach::Loopback),
        (false, true) => Ok(Reach::Beyond),
        (false, false) => Err(Unprotected { address }),
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

    fn configured(address: &str, keys: bool, unsafe_no_auth: bool) -> Result<Reach, Unprotected> {
        check(Listening::Configured(address), keys, unsafe_no_auth)
    }

    fn bound(address: &str, keys: bool, unsafe_no_auth: bool) -> Result<Reach, Unprotected> {
        check(Listening::Bound(address.parse().unwrap()), keys, unsafe_no_auth)
    }

    #[test]
    fn loopback_needs_nothing() {
        for address in ["127.0.0.1:8000", "127.9.9.9:0", "[::1]:8000", "localhost:8000", "LOCALHOST:1"] {
            assert_eq!(configured(address, false, false), Ok(Reach::Loopback), "{address}");
        }
        for address in ["127.0.0.1:8000", "[::1]:0"] {
            assert_eq!(bound(address, false, false), Ok(Reach::Loopback), "{address}");
        }
    }

    #[test]
    fn beyond_loopback_without_keys_is_refused_naming_the_address() {
        for address in ["0.0.0.0:8000", "[::]:8000", "10.0.0.1:80", "myhost:8000", "localhost.example:80"] {
            let refused = configured(address, false, false).unwrap_err();
            assert_eq!(refused.address, address);
            assert_eq!(refused.exit_code(), 78);
        }
        let refused = bound("0.0.0.0:8000", false, false).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "refusing to serve 0.0.0.0:8000 beyond loopback without API keys: give --api-keys FILE, or --unsafe-no-auth"
        );
    }

    #[test]
    fn beyond_loopback_with_keys_is_served() {
        assert_eq!(configured("0.0.0.0:8000", true, false), Ok(Reach::Beyond));
        assert_eq!(bound("192.168.1.2:8000", true, false), Ok(Reach::Beyond));
    }

    #[test]
    fn beyond_loopback_with_unsafe_no_auth_is_served() {
        assert_eq!(configured("0.0.0.0:8000", false, true), Ok(Reach::Beyond));
        assert_eq!(bound("[::]:8000", false, true), Ok(Reach::Beyond));
        assert_eq!(configured("0.0.0.0:8000", true, true), Ok(Reach::Beyond));
    }
}
