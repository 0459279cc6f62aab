//! `shutdown:`: how a stop drains. On SIGTERM the API stops being ready and refuses new requests
//! (503 with `Retry-After`) while the calls and tasks in flight get up to `grace_s` to finish;
//! then the upstreams are stopped. Under Kubernetes keep `grace_s` plus the upstreams' own stop
//! (up to 10 s) below the pod's `terminationGracePeriodSeconds`.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::key_error::KeyError;

/// The longest grace accepted: past it, a typo.
const MAX_GRACE_S: f64 = 3600.0;

/// `shutdown:`: how a stop drains the calls in flight.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShutdownConfig {
    /// Seconds the calls and tasks in flight may take to finish after a stop signal; from 0
    /// (no drain: stop at once) to 3600 (fractions allowed).
    #[serde(default = "default_grace_s")]
    #[schemars(range(min = 0.0, max = MAX_GRACE_S))]
    pub grace_s: f64,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig { grace_s: default_grace_s() }
    }
}

impl ShutdownConfig {
    /// `grace_s` from 0 (no drain: stop at once) to an hour.
    pub fn check(&self) -> Result<(), KeyError> {
        if self.grace_s.is_finite() && (0.0..=MAX_GRACE_S).contains(&self.grace_s) {
            return Ok(());
        }
        Err(KeyError {
            key: "shutdown.grace_s".into(),
            message: format!("expected seconds from 0 to {MAX_GRACE_S} (fractions allowed), got {}", self.grace_s),
        })
    }

    pub fn grace(&self) -> std::time::Duration {
        // Checked finite and bounded by `check`; clamped again so an unchecked value cannot panic.
        std::time::Duration::from_secs_f64(self.grace_s.clamp(0.0, MAX_GRACE_S))
    }
}

fn default_grace_s() -> f64 {
    10.0
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn grace_defaults_to_ten_seconds_and_is_bounded() {
        let config = Config::parse("mcp_servers: {}\n").unwrap();
        assert_eq!(config.shutdown.grace(), std::time::Duration::from_secs(10));
        let config = Config::parse("shutdown: {grace_s: 2.5}\nmcp_servers: {}\n").unwrap();
        assert_eq!(config.shutdown.grace(), std::time::Duration::from_millis(2500));
        for bad in ["-1", "3601", ".nan", ".inf"] {
            let err = Config::parse(&format!("shutdown: {{grace_s: {bad}}}\nmcp_servers: {{}}\n")).unwrap_err();
            assert_eq!(err.key, "shutdown.grace_s", "{bad}");
        }
        let err = Config::parse("shutdown: {grace: 3}\nmcp_servers: {}\n").unwrap_err();
        assert!(err.key.starts_with("shutdown"), "{err:?}");
    }
}
