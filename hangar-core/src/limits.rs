//! Admission limits for requests that reach an upstream: how many may run at once, and
//! (opt-in) how many may start per second.
//!
//! The same `limits:` block appears at the top of the config (for the whole hangar) and in a
//! server (for that server). The supervisor applies both, so every API instance shares them.
//! A refusal is immediate and says which limit refused and when to come back: a caller never
//! waits in a hidden queue.

use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Concurrent upstream requests the whole hangar admits unless configured.
pub const DEFAULT_GLOBAL_CONCURRENCY: u32 = 1024;
/// Concurrent upstream requests one server admits unless configured.
pub const DEFAULT_SERVER_CONCURRENCY: u32 = 64;

/// `limits:`, at the top (the whole hangar) and in a server (that server alone).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Requests to upstreams in flight at once; 0 means no limit. Default: 1024 for the whole
    /// hangar, 64 for one server; one more is refused at once (`concurrency_limited`).
    pub max_concurrent_calls: Option<u32>,
    /// How many requests may start per second. Default: none, no rate limit.
    pub rate_limit: Option<RateLimit>,
}

/// `limits.rate_limit`: a token bucket; a request beyond it is refused at once
/// (`rate_limited`), saying when to come back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    /// The sustained rate, in requests per second (fractions allowed); above 0.
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub calls_per_s: f64,
    /// How many may come at once after a quiet spell; at least 1. Default: one second's worth
    /// (at least 1).
    #[schemars(range(min = 1))]
    pub burst: Option<u32>,
}

impl Limits {
    /// The concurrency limit with `default` filled in; `None` is unlimited.
    pub fn concurrency(&self, default: u32) -> Option<u32> {
        match self.max_concurrent_calls.unwrap_or(default) {
            0 => None,
            n => Some(n),
        }
    }

    /// Why this block is invalid, if it is: `(key under the block, message)`.
    pub fn problem(&self) -> Option<(&'static str, String)> {
        let rate = self.rate_limit.as_ref()?;
        if !(rate.calls_per_s.is_finite() && rate.calls_per_s > 0.0) {
            return Some(("rate_limit.calls_per_s", format!("must be a number above 0, got {}", rate.calls_per_s)));
        }
        if rate.burst == Some(0) {
            return Some(("rate_limit.burst", "must be at least 1".into()));
        }
        None
    }
}

impl RateLimit {
    pub fn burst(&self) -> f64 {
        f64::from(self.burst.unwrap_or_else(|| self.calls_per_s.ceil().clamp(1.0, f64::from(u32::MAX)) as u32))
    }
}

/// A token bucket: `burst` tokens, refilled at `calls_per_s`. Time is passed in, so it is
/// tested without sleeping.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    updated: Instant,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(limit: &RateLimit, now: Instant) -> Self {
        TokenBucket { rate: limit.calls_per_s, burst: limit.burst(), tokens: limit.burst(), updated: now }
    }

    /// Takes a token, or says how long until one is there.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.updated = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.rate))
        }
    }

    /// Gives back a token taken for a request that another limit then refused.
    pub fn refund(&mut self) {
        self.tokens = (self.tokens + 1.0).min(self.burst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(calls_per_s: f64, burst: Option<u32>) -> RateLimit {
        RateLimit { calls_per_s, burst }
    }

    #[test]
    fn a_full_bucket_admits_its_burst_then_says_when_the_next_token_comes() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(&limit(10.0, Some(3)), t0);
        for _ in 0..3 {
            assert_eq!(bucket.take(t0), Ok(()));
        }
        let wait = bucket.take(t0).unwrap_err();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "{wait:?}");
        assert_eq!(bucket.take(t0 + Duration::from_millis(100)), Ok(()));
        assert!(bucket.take(t0 + Duration::from_millis(100)).is_err());
    }

    #[test]
    fn refill_never_exceeds_the_burst() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(&limit(1000.0, Some(2)), t0);
        let later = t0 + Duration::from_secs(60);
        assert_eq!(bucket.take(later), Ok(()));
        assert_eq!(bucket.take(later), Ok(()));
        assert!(bucket.take(later).is_err());
    }

    #[test]
    fn a_refund_gives_back_one_token() {
        let t0 = Instant::now();
        let mut bucket = TokenBucket::new(&limit(1.0, Some(1)), t0);
        assert_eq!(bucket.take(t0), Ok(()));
        bucket.refund();
        assert_eq!(bucket.take(t0), Ok(()));
        bucket.refund();
        bucket.refund();
        assert_eq!(bucket.take(t0), Ok(()));
        assert!(bucket.take(t0).is_err(), "refunds stop at the burst");
    }

    #[test]
    fn burst_defaults_to_one_seconds_worth() {
        assert_eq!(limit(0.5, None).burst(), 1.0);
        assert_eq!(limit(20.0, None).burst(), 20.0);
        assert_eq!(limit(2.5, None).burst(), 3.0);
    }

    #[test]
    fn zero_means_unlimited_and_absent_takes_the_default() {
        let none = Limits::default();
        assert_eq!(none.concurrency(64), Some(64));
        let off = Limits { max_concurrent_calls: Some(0), rate_limit: None };
        assert_eq!(off.concurrency(64), None);
    }

    #[test]
    fn invalid_rates_are_named() {
        let bad = Limits { max_concurrent_calls: None, rate_limit: Some(limit(0.0, None)) };
        assert_eq!(bad.problem().map(|p| p.0), Some("rate_limit.calls_per_s"));
        let bad = Limits { max_concurrent_calls: None, rate_limit: Some(limit(f64::NAN, None)) };
        assert_eq!(bad.problem().map(|p| p.0), Some("rate_limit.calls_per_s"));
        let bad = Limits { max_concurrent_calls: None, rate_limit: Some(limit(5.0, Some(0))) };
        assert_eq!(bad.problem().map(|p| p.0), Some("rate_limit.burst"));
    }
}
