//! Each identity's quotas under its profile (`profiles.<name>.limits`, `hangar_core::quotas`):
//! its own token buckets (all its calls, and each tool with a quota) and its count of the UTC
//! day's calls, checked when a call is admitted (`calls/admit.rs`).
//!
//! Identities are unbounded (any OAuth subject may call), so the state is kept for at most
//! [`MAX_IDENTITIES`] of them, least recently used evicted first: a fixed ceiling on memory.
//! An evicted identity's buckets start full again, and its day's count is read again from the
//! journal, where every audited call is counted (the `minutes` table), which is also how the
//! daily quota holds across a restart of the supervisor. The supervisor owns it all, so every
//! API instance enforces the same quotas.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hangar_core::ipc::{ErrorKind, IpcError};
use hangar_core::limits::TokenBucket;
use hangar_core::quotas::Quotas;
use hangar_core::sync::Unpoisoned;
use indexmap::IndexMap;
use serde_json::json;

/// The most identities whose quota state is kept at once.
pub const MAX_IDENTITIES: usize = 10_000;

/// Every identity's quota state, by (profile, identity), least recently used first.
#[derive(Default)]
pub struct IdentityQuotas {
    states: Mutex<IndexMap<(String, String), State>>,
}

struct State {
    /// The compiled quotas the buckets were made for (a reload that changes them starts over).
    of: usize,
    bucket: Option<TokenBucket>,
    tools: HashMap<String, TokenBucket>,
    /// The UTC day (days since the epoch) `today` counts.
    day: u64,
    /// The day's calls; `None` until read from the journal.
    today: Option<u64>,
}

/// Today, as days since the epoch (UTC), and the minutes since its midnight.
pub fn today(now: SystemTime) -> (u64, u32) {
    let seconds = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    (seconds / 86_400, ((seconds % 86_400) / 60) as u32)
}

impl IdentityQuotas {
    /// Whether `identity`'s count of `day` must first be read from the journal.
    pub fn needs_count(&self, quotas: &Quotas, identity: &str, day: u64) -> bool {
        let states = self.states.locked();
        states.get(&key(quotas, identity)).is_none_or(|state| state.day != day || state.today.is_none())
    }

    /// Takes the journal's count of `identity`'s calls on `day` (unless one is known already).
    pub fn counted(&self, quotas: &Arc<Quotas>, identity: &str, day: u64, calls: u64) {
        let mut states = self.states.locked();
        let state = state(&mut states, quotas, identity, day);
        if state.today.is_none() {
            state.today = Some(calls);
        }
    }

    /// Admits one call of `identity` to the tool named `qualified` (or `bare`), or refuses it
    /// naming the quota it hit and when to retry.
    pub fn admit(
        &self,
        quotas: &Arc<Quotas>,
        identity: &str,
        (qualified, bare): (&str, &str),
        (now, day): (Instant, u64),
    ) -> Result<(), IpcError> {
        let mut states = self.states.locked();
        let state = state(&mut states, quotas, identity, day);
        if let (Some(max), Some(today)) = (quotas.daily_calls, state.today)
            && today >= max
        {
            let (_, minute) = self::today(SystemTime::now());
            let retry_after_ms = u64::from(24 * 60 - minute) * 60_000;
            return Err(refusal(&quotas.key("daily_calls"), format!("{max} calls a day"), retry_after_ms));
        }
        if let Some(bucket) = &mut state.bucket
            && let Err(wait) = bucket.take(now)
        {
            return Err(refusal(&quotas.key("rate_limit"), "its rate".into(), millis(wait)));
        }
        let mut taken = Vec::new();
        for (glob, rate) in quotas.tools_of(qualified, bare) {
            let bucket = state.tools.entry(glob.to_owned()).or_insert_with(|| TokenBucket::new(rate, now));
            if let Err(wait) = bucket.take(now) {
                // Nothing is spent on a refused call.
                for earlier in taken {
                    if let Some(bucket) = state.tools.get_mut(earlier) {
                        bucket.refund();
                    }
                }
                if let Some(bucket) = &mut state.bucket {
                    bucket.refund();
                }
                let key = quotas.key(&format!("tools.{glob}"));
                return Err(refusal(
                    &key,
                    format!("its rate for `{}`", hangar_core::echo::bounded(qualified)),
                    millis(wait),
                ));
            }
            taken.push(glob);
        }
        if let Some(today) = &mut state.today {
            *today += 1;
        }
        Ok(())
    }

    /// How many identities' state is kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.states.locked().len()
    }
}

fn key(quotas: &Quotas, identity: &str) -> (String, String) {
    (quotas.profile.clone(), identity.to_owned())
}

/// `identity`'s state under `quotas` on `day`, made (and the least recently used evicted past
/// the ceiling) if need be, and moved to the most recently used end.
fn state<'a>(
    states: &'a mut IndexMap<(String, String), State>,
    quotas: &Arc<Quotas>,
    identity: &str,
    day: u64,
) -> &'a mut State {
    let of = Arc::as_ptr(quotas) as usize;
    let key = key(quotas, identity);
    match states.get_index_of(&key) {
        Some(index) => {
            let last = states.len() - 1;
            states.move_index(index, last);
        }
        None => {
            while states.len() >= MAX_IDENTITIES {
                states.shift_remove_index(0);
            }
        }
    }
    let state =
        states.entry(key).or_insert_with(|| State { of, bucket: None, tools: HashMap::new(), day, today: None });
    if state.of != of || state.bucket.is_none() && quotas.rate_limit.is_some() {
        // Made for other quotas (a reload), or new: its buckets start full.
        state.of = of;
        state.bucket = quotas.rate_limit.as_ref().map(|rate| TokenBucket::new(rate, Instant::now()));
        state.tools.clear();
    }
    if state.day != day {
        state.day = day;
        state.today = None;
    }
    state
}

fn millis(wait: Duration) -> u64 {
    (wait.as_millis() as u64).max(1)
}

fn refusal(key: &str, what: String, retry_after_ms: u64) -> IpcError {
    IpcError::new(
        ErrorKind::RateLimited,
        format!("quota reached: {what} per identity ({key}); retry in {retry_after_ms} ms"),
    )
    .with_details(json!({"limit": key, "scope": key, "retry_after_ms": retry_after_ms}))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn quotas(limits: serde_json::Value) -> Arc<Quotas> {
        Arc::new(Quotas::compile("ci", &serde_json::from_value(limits).unwrap()).unwrap())
    }

    #[test]
    fn each_identity_has_its_own_buckets_and_a_refusal_names_its_key() {
        let quotas = quotas(
            json!({"rate_limit": {"calls_per_s": 1, "burst": 2}, "tools": {"math__add": {"calls_per_minute": 1}}}),
        );
        let book = IdentityQuotas::default();
        let now = (Instant::now(), 1);
        book.admit(&quotas, "alice", ("math__add", "add"), now).unwrap();
        let tool = book.admit(&quotas, "alice", ("math__add", "add"), now).unwrap_err();
        assert_eq!(tool.kind, ErrorKind::RateLimited);
        assert!(tool.message.contains("profiles.ci.limits.tools.math__add"), "{tool:?}");
        book.admit(&quotas, "alice", ("math__mul", "mul"), now).unwrap();
        let rate = book.admit(&quotas, "alice", ("math__mul", "mul"), now).unwrap_err();
        assert!(rate.message.contains("profiles.ci.limits.rate_limit"), "{rate:?}");
        book.admit(&quotas, "bob", ("math__add", "add"), now).unwrap();
    }

    #[test]
    fn the_day_counts_from_the_journal_and_starts_over_the_next_day() {
        let quotas = quotas(json!({"daily_calls": 3}));
        let book = IdentityQuotas::default();
        assert!(book.needs_count(&quotas, "alice", 10));
        book.counted(&quotas, "alice", 10, 2);
        assert!(!book.needs_count(&quotas, "alice", 10));
        book.admit(&quotas, "alice", ("a__t", "t"), (Instant::now(), 10)).unwrap();
        let refused = book.admit(&quotas, "alice", ("a__t", "t"), (Instant::now(), 10)).unwrap_err();
        assert!(refused.message.contains("profiles.ci.limits.daily_calls"), "{refused:?}");
        assert!(book.needs_count(&quotas, "alice", 11), "a new day is counted anew");
    }

    #[test]
    fn state_is_kept_for_at_most_the_ceiling_of_identities() {
        let quotas = quotas(json!({"rate_limit": {"calls_per_s": 1}}));
        let book = IdentityQuotas::default();
        for n in 0..MAX_IDENTITIES + 5 {
            book.admit(&quotas, &format!("oauth:{n}"), ("a__t", "t"), (Instant::now(), 1)).unwrap();
        }
        assert_eq!(book.len(), MAX_IDENTITIES);
    }
}
