//! Admission: the concurrency and rate limits of `hangar_core::limits`, applied to every
//! request that would reach an upstream (tool calls and forwarded MCP requests).
//!
//! One [`Limiter`] for the hangar and one per server; a request needs a [`Permit`] from both.
//! Refusals are immediate and say which limit refused: the caller decides whether to retry.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use hangar_core::ipc::{ErrorKind, IpcError};
use hangar_core::limits::{Limits, TokenBucket};
use hangar_core::metrics::Refused;
use hangar_core::sync::Unpoisoned;
use serde_json::json;

/// Where a limit applies, for the refusal's words.
#[derive(Debug, Clone)]
pub enum Scope {
    Hangar,
    Server(String),
}

impl Scope {
    fn describe(&self) -> String {
        match self {
            Scope::Hangar => "the hangar".into(),
            Scope::Server(id) => format!("MCP server `{id}`"),
        }
    }

    fn key(&self) -> String {
        match self {
            Scope::Hangar => "limits".into(),
            Scope::Server(id) => format!("mcp_servers.{id}.limits"),
        }
    }
}

pub struct Limiter {
    scope: Scope,
    /// As configured, so a reload can tell whether they changed.
    limits: Limits,
    max_in_flight: Option<u32>,
    in_flight: AtomicU32,
    bucket: Option<Mutex<TokenBucket>>,
    /// Requests refused by this limiter, for `/metrics`.
    refused_concurrency: AtomicU64,
    refused_rate: AtomicU64,
}

/// A request's place under one or more limiters; dropping it frees the place.
#[must_use]
pub struct Permit(Vec<Arc<Limiter>>);

impl Drop for Permit {
    fn drop(&mut self) {
        for limiter in &self.0 {
            limiter.in_flight.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Limiter {
    pub fn new(scope: Scope, limits: &Limits, default_concurrency: u32) -> Arc<Limiter> {
        Arc::new(Limiter {
            scope,
            limits: limits.clone(),
            max_in_flight: limits.concurrency(default_concurrency),
            in_flight: AtomicU32::new(0),
            bucket: limits.rate_limit.as_ref().map(|rate| Mutex::new(TokenBucket::new(rate, Instant::now()))),
            refused_concurrency: AtomicU64::new(0),
            refused_rate: AtomicU64::new(0),
        })
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn refused(&self) -> Refused {
        Refused {
            max_concurrent_calls: self.refused_concurrency.load(Ordering::Relaxed),
            rate_limit: self.refused_rate.load(Ordering::Relaxed),
        }
    }

    /// Admits a request under every limiter in `chain` (outermost first), or refuses it with the
    /// first limit it hits. Concurrency is checked before rate so a refused request takes no token.
    pub fn admit(chain: &[&Arc<Limiter>]) -> Result<Permit, IpcError> {
        let mut permit = Permit(Vec::with_capacity(chain.len()));
        for limiter in chain {
            limiter.enter()?;
            permit.0.push(Arc::clone(limiter));
        }
        let now = Instant::now();
        for (taken, limiter) in chain.iter().enumerate() {
            if let Err(refusal) = limiter.take_token(now) {
                for earlier in &chain[..taken] {
                    earlier.refund_token();
                }
                return Err(refusal);
            }
        }
        Ok(permit)
    }

    fn enter(&self) -> Result<(), IpcError> {
        let Some(max) = self.max_in_flight else {
            self.in_flight.fetch_add(1, Ordering::AcqRel);
            return Ok(());
        };
        self.in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1))
            .map(drop)
            .map_err(|_| {
                self.refused_concurrency.fetch_add(1, Ordering::Relaxed);
                IpcError::new(
                    ErrorKind::ConcurrencyLimited,
                    format!(
                        "{} already has {max} requests in flight, its limit ({}.max_concurrent_calls); retry when one finishes",
                        self.scope.describe(),
                        self.scope.key()
                    ),
                )
                .with_details(json!({"limit": "max_concurrent_calls", "max_concurrent_calls": max, "scope": self.scope.key()}))
            })
    }

    fn take_token(&self, now: Instant) -> Result<(), IpcError> {
        let Some(bucket) = &self.bucket else { return Ok(()) };
        let mut bucket = bucket.locked();
        bucket.take(now).map_err(|wait| {
            self.refused_rate.fetch_add(1, Ordering::Relaxed);
            let retry_after_ms = wait.as_millis().max(1) as u64;
            IpcError::new(
                ErrorKind::RateLimited,
                format!(
                    "rate limit of {} reached ({}.rate_limit); retry in {retry_after_ms} ms",
                    self.scope.describe(),
                    self.scope.key()
                ),
            )
            .with_details(json!({"limit": "rate_limit", "scope": self.scope.key(), "retry_after_ms": retry_after_ms}))
        })
    }

    fn refund_token(&self) {
        if let Some(bucket) = &self.bucket {
            bucket.locked().refund();
        }
    }
}

#[cfg(test)]
mod tests {
    use hangar_core::limits::RateLimit;

    use super::*;

    fn limiter(scope: Scope, max: u32, rate: Option<(f64, u32)>) -> Arc<Limiter> {
        let limits = Limits {
            max_concurrent_calls: Some(max),
            rate_limit: rate.map(|(calls_per_s, burst)| RateLimit { calls_per_s, burst: Some(burst) }),
        };
        Limiter::new(scope, &limits, 64)
    }

    #[test]
    fn concurrency_is_refused_at_the_limit_and_freed_by_dropping_the_permit() {
        let hangar = limiter(Scope::Hangar, 0, None);
        let server = limiter(Scope::Server("math".into()), 2, None);
        let first = Limiter::admit(&[&hangar, &server]).unwrap();
        let _second = Limiter::admit(&[&hangar, &server]).unwrap();
        let refusal = Limiter::admit(&[&hangar, &server]).err().unwrap();
        assert_eq!(refusal.kind, ErrorKind::ConcurrencyLimited);
        assert!(refusal.message.contains("`math` already has 2 requests in flight"), "{}", refusal.message);
        assert!(refusal.message.contains("mcp_servers.math.limits.max_concurrent_calls"), "{}", refusal.message);
        assert_eq!(hangar.in_flight.load(Ordering::SeqCst), 2, "the refused request left no trace upstream of it");
        assert_eq!(server.refused().max_concurrent_calls, 1);
        drop(first);
        assert!(Limiter::admit(&[&hangar, &server]).is_ok());
    }

    #[test]
    fn a_rate_refusal_says_when_to_retry_and_refunds_the_outer_token() {
        let hangar = limiter(Scope::Hangar, 0, Some((1.0, 1)));
        let server = limiter(Scope::Server("math".into()), 0, Some((0.5, 1)));
        let other = limiter(Scope::Server("other".into()), 0, None);
        drop(Limiter::admit(&[&hangar, &server]).unwrap());
        // The hangar's bucket is now empty too: refused at the hangar.
        let refusal = Limiter::admit(&[&hangar, &other]).err().unwrap();
        assert_eq!(refusal.kind, ErrorKind::RateLimited);
        assert!(
            refusal.message.contains("rate limit of the hangar reached (limits.rate_limit)"),
            "{}",
            refusal.message
        );
        let retry = refusal.details.as_ref().and_then(|d| d["retry_after_ms"].as_u64()).unwrap();
        assert!((1..=1000).contains(&retry), "{retry}");
    }

    #[test]
    fn a_refusal_by_the_inner_limit_gives_the_outer_token_back() {
        let hangar = limiter(Scope::Hangar, 0, Some((1.0, 2)));
        let server = limiter(Scope::Server("math".into()), 0, Some((1.0, 1)));
        let other = limiter(Scope::Server("other".into()), 0, None);
        drop(Limiter::admit(&[&hangar, &server]).unwrap());
        assert_eq!(Limiter::admit(&[&hangar, &server]).err().unwrap().kind, ErrorKind::RateLimited);
        // One hangar token is left, because the refused request's was refunded.
        assert!(Limiter::admit(&[&hangar, &other]).is_ok());
        assert_eq!(server.refused(), Refused { max_concurrent_calls: 0, rate_limit: 1 });
        assert_eq!(hangar.refused(), Refused::default());
    }
}
