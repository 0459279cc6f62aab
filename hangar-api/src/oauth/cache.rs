//! Access tokens already verified, so a client that sends the same token on every call pays for
//! the RS256 signature check once, not per call (BENCHMARKS.md, "What authentication costs").
//!
//! Keyed by the token's SHA-256 (the token itself is never kept), an entry holds the [`Caller`]
//! the token named and the voucher for it (the key that checked its signature), and is used until
//! the token's `exp` or [`MAX_AGE`] after it was verified, whichever comes first: a cached token
//! never outlives its `exp`. The caller of [`Verified::get`] checks the voucher still stands (the
//! key is still one the issuer publishes), so rotation and revocation of a key take effect as
//! they would without the cache. Only accepted tokens are cached; a refused one is checked again
//! on every call. The cache belongs to one `auth.oauth` configuration: a reload that changes it
//! starts with an empty one. At most [`CAPACITY`] tokens are kept; when full, expired entries go
//! first, then the one closest to expiring.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hangar_core::access::Caller;
use sha2::{Digest, Sha256};

/// The longest an entry is used without checking the token again.
pub const MAX_AGE: Duration = Duration::from_secs(60);
/// The most tokens kept.
pub const CAPACITY: usize = 4096;

pub type TokenDigest = [u8; 32];

struct Entry<V> {
    caller: Caller,
    voucher: V,
    until: Instant,
}

pub struct Verified<V> {
    entries: Mutex<HashMap<TokenDigest, Entry<V>>>,
    capacity: usize,
}

impl<V: Clone> Default for Verified<V> {
    fn default() -> Verified<V> {
        Verified::with_capacity(CAPACITY)
    }
}

impl<V: Clone> Verified<V> {
    pub fn with_capacity(capacity: usize) -> Verified<V> {
        Verified { entries: Mutex::new(HashMap::new()), capacity: capacity.max(1) }
    }

    /// The caller of a token verified earlier and still within its time, and what vouched for it.
    pub fn get(&self, digest: &TokenDigest, now: Instant) -> Option<(Caller, V)> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        match entries.get(digest) {
            Some(entry) if now < entry.until => Some((entry.caller.clone(), entry.voucher.clone())),
            Some(_) => {
                entries.remove(digest);
                None
            }
            None => None,
        }
    }

    /// Remembers a token just verified, whose `exp` (seconds since the epoch) is `exp`. A token
    /// already past its `exp` (accepted within the leeway) or without one is not kept.
    pub fn insert(&self, digest: TokenDigest, caller: Caller, voucher: V, exp: Option<u64>, now: Instant) {
        let Some(left) = exp.and_then(|exp| seconds_left(exp, SystemTime::now())) else { return };
        let until = now + left.min(MAX_AGE);
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= self.capacity && !entries.contains_key(&digest) {
            entries.retain(|_, entry| now < entry.until);
            if entries.len() >= self.capacity
                && let Some(soonest) = entries.iter().min_by_key(|(_, entry)| entry.until).map(|(d, _)| *d)
            {
                entries.remove(&soonest);
            }
        }
        entries.insert(digest, Entry { caller, voucher, until });
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

/// What a token is cached under.
pub fn digest(token: &str) -> TokenDigest {
    Sha256::digest(token.as_bytes()).into()
}

/// How long until `exp` (seconds since the epoch), if it is still ahead of `now`.
fn seconds_left(exp: u64, now: SystemTime) -> Option<Duration> {
    let now = now.duration_since(UNIX_EPOCH).ok()?;
    Duration::from_secs(exp).checked_sub(now).filter(|left| !left.is_zero())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(name: &str) -> Caller {
        Caller { identity: name.into(), profile: Some("dev".into()) }
    }

    /// A found entry, with the voucher it was stored with (`7` throughout).
    fn found(name: &str) -> Option<(Caller, u8)> {
        Some((caller(name), 7))
    }

    fn unix_now() -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
    }

    #[test]
    fn a_verified_token_is_found_until_max_age() {
        let cache = Verified::<u8>::default();
        let now = Instant::now();
        let token = digest("a.b.c");
        cache.insert(token, caller("bot"), 7, Some(unix_now() + 3600), now);
        assert_eq!(cache.get(&token, now), found("bot"));
        assert_eq!(cache.get(&token, now + MAX_AGE - Duration::from_secs(1)), found("bot"));
        assert_eq!(cache.get(&digest("a.b.d"), now), None, "another token is not this one");
        assert_eq!(cache.get(&token, now + MAX_AGE), None);
        assert_eq!(cache.len(), 0, "an entry past its time is dropped when met");
    }

    #[test]
    fn an_entry_never_outlives_the_tokens_exp() {
        let cache = Verified::<u8>::default();
        let now = Instant::now();
        let token = digest("short");
        cache.insert(token, caller("bot"), 7, Some(unix_now() + 5), now);
        assert_eq!(cache.get(&token, now), found("bot"));
        assert_eq!(cache.get(&token, now + Duration::from_secs(6)), None, "past exp, well before MAX_AGE");
        // Accepted within the leeway but already expired, or with no exp at all: not kept.
        cache.insert(digest("late"), caller("bot"), 7, Some(unix_now() - 10), now);
        cache.insert(digest("timeless"), caller("bot"), 7, None, now);
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn a_full_cache_drops_the_expired_then_the_soonest_to_expire() {
        let cache = Verified::<u8>::with_capacity(2);
        let now = Instant::now();
        let far = Some(unix_now() + 3600);
        let (a, b, c, d) = (digest("a"), digest("b"), digest("c"), digest("d"));
        cache.insert(a, caller("a"), 7, Some(unix_now() + 3), now);
        cache.insert(b, caller("b"), 7, far, now);
        // Full: `a` expires soonest and goes.
        cache.insert(c, caller("c"), 7, far, now);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&a, now), None);
        assert_eq!(cache.get(&b, now), found("b"));
        assert_eq!(cache.get(&c, now), found("c"));
        // Later, both are past MAX_AGE: room is made by dropping them.
        let later = now + MAX_AGE;
        cache.insert(d, caller("d"), 7, far, later);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.get(&d, later), found("d"));
    }
}
