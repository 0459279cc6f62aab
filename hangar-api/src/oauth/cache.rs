//! What was decided about a bearer token, remembered for a while, so a client that sends the
//! same token on every call pays for its check once, not per call (docs/bench-log/2026.md, "What
//! authentication costs"). One cache type for both kinds of token: verified JWTs (the caller and
//! the key that checked the signature; `mod.rs`) and introspection answers (`introspection.rs`).
//!
//! Keyed by the token's SHA-256 (the token itself is never kept), an entry is used until the
//! time it was stored with. For a JWT that is its `exp` or [`MAX_AGE`] after it was verified,
//! whichever comes first ([`until_exp`]), so a cached token never outlives its `exp`; the caller
//! of `get` checks the key still stands, so rotation takes effect as it would without the cache.
//! Only accepted JWTs are cached. A cache belongs to one `auth.oauth` configuration: a reload
//! that changes it starts with an empty one. When full, expired entries go first, then the one
//! closest to expiring, so a flood of distinct tokens cannot grow it past its capacity.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hangar_core::sync::Unpoisoned;
use sha2::{Digest, Sha256};

/// The longest a verified JWT is used without checking it again.
pub const MAX_AGE: Duration = Duration::from_secs(60);
/// The most verified JWTs kept.
pub const CAPACITY: usize = 4096;

pub type TokenDigest = [u8; 32];

pub struct TokenCache<V> {
    entries: Mutex<HashMap<TokenDigest, (V, Instant)>>,
    capacity: usize,
}

impl<V: Clone> Default for TokenCache<V> {
    fn default() -> TokenCache<V> {
        TokenCache::with_capacity(CAPACITY)
    }
}

impl<V: Clone> TokenCache<V> {
    pub fn with_capacity(capacity: usize) -> TokenCache<V> {
        TokenCache { entries: Mutex::new(HashMap::new()), capacity: capacity.max(1) }
    }

    /// What was stored for the token, while its time lasts.
    pub fn get(&self, digest: &TokenDigest, now: Instant) -> Option<V> {
        let mut entries = self.entries.locked();
        match entries.get(digest) {
            Some((value, until)) if now < *until => Some(value.clone()),
            Some(_) => {
                entries.remove(digest);
                None
            }
            None => None,
        }
    }

    /// Keeps `value` for the token until `until` (nothing if that is not after `now`).
    pub fn insert(&self, digest: TokenDigest, value: V, until: Instant, now: Instant) {
        if until <= now {
            return;
        }
        let mut entries = self.entries.locked();
        if entries.len() >= self.capacity && !entries.contains_key(&digest) {
            entries.retain(|_, (_, until)| now < *until);
            if entries.len() >= self.capacity
                && let Some(soonest) = entries.iter().min_by_key(|(_, (_, until))| *until).map(|(d, _)| *d)
            {
                entries.remove(&soonest);
            }
        }
        entries.insert(digest, (value, until));
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.locked().len()
    }
}

/// What a token is cached under.
pub fn digest(token: &str) -> TokenDigest {
    Sha256::digest(token.as_bytes()).into()
}

/// How long a verified JWT whose `exp` (seconds since the epoch) is `exp` may be kept: until
/// `exp`, at most [`MAX_AGE`] from `now`; `None` (not kept) without an `exp` or past it
/// (accepted within the leeway).
pub fn until_exp(exp: Option<u64>, now: Instant) -> Option<Instant> {
    let unix_now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
    let left = Duration::from_secs(exp?).checked_sub(unix_now).filter(|left| !left.is_zero())?;
    Some(now + left.min(MAX_AGE))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unix_now() -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
    }

    #[test]
    fn a_verified_token_is_kept_until_max_age_or_its_exp_whichever_first() {
        let now = Instant::now();
        assert_eq!(until_exp(Some(unix_now() + 3600), now), Some(now + MAX_AGE));
        let short = until_exp(Some(unix_now() + 5), now).unwrap();
        assert!(short <= now + Duration::from_secs(5) && short > now, "never past exp");
        assert_eq!(until_exp(Some(unix_now() - 10), now), None, "already expired: not kept");
        assert_eq!(until_exp(None, now), None, "no exp: not kept");
    }

    #[test]
    fn an_entry_is_found_until_its_time() {
        let cache = TokenCache::<u8>::default();
        let now = Instant::now();
        let token = digest("a.b.c");
        cache.insert(token, 7, now + MAX_AGE, now);
        assert_eq!(cache.get(&token, now), Some(7));
        assert_eq!(cache.get(&token, now + MAX_AGE - Duration::from_secs(1)), Some(7));
        assert_eq!(cache.get(&digest("a.b.d"), now), None, "another token is not this one");
        assert_eq!(cache.get(&token, now + MAX_AGE), None);
        assert_eq!(cache.len(), 0, "an entry past its time is dropped when met");
        cache.insert(digest("gone"), 1, now, now);
        assert_eq!(cache.len(), 0, "a time not after now is not kept");
    }

    #[test]
    fn a_full_cache_drops_the_expired_then_the_soonest_to_expire() {
        let cache = TokenCache::<char>::with_capacity(2);
        let now = Instant::now();
        let far = now + Duration::from_secs(3600);
        let (a, b, c, d) = (digest("a"), digest("b"), digest("c"), digest("d"));
        cache.insert(a, 'a', now + Duration::from_secs(3), now);
        cache.insert(b, 'b', far, now);
        // Full: `a` expires soonest and goes.
        cache.insert(c, 'c', far, now);
        assert_eq!(cache.len(), 2);
        assert_eq!((cache.get(&a, now), cache.get(&b, now), cache.get(&c, now)), (None, Some('b'), Some('c')));
        // Later, both are past their time: room is made by dropping them.
        let later = far;
        cache.insert(d, 'd', later + MAX_AGE, later);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.get(&d, later), Some('d'));
    }
}
