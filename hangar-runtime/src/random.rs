//! Unpredictable hex ids for sessions, batches and calls.
//!
//! Each id is SipHash-1-3 of a process-wide counter under a 128-bit key read once per process
//! from the OS's randomness (`getrandom`): unique within the process, unguessable without the
//! key, and free of a system call per id (opening `/dev/urandom` for every call cost a tenth of
//! the API's CPU).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use siphasher::sip::SipHasher13;

/// `bytes` random bytes as lower-case hex (`2 * bytes` characters).
pub fn hex(bytes: usize) -> String {
    static KEY: OnceLock<(u64, u64)> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let (k0, k1) = *KEY.get_or_init(key);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut out = String::with_capacity(bytes * 2);
    for block in 0..bytes.div_ceil(8) {
        let mut hasher = SipHasher13::new_with_keys(k0, k1);
        hasher.write_u64(n);
        hasher.write_u64(block as u64);
        for byte in hasher.finish().to_le_bytes().iter().take(bytes - block * 8) {
            out.push(char::from(DIGITS[usize::from(byte >> 4)]));
            out.push(char::from(DIGITS[usize::from(byte & 0xf)]));
        }
    }
    out
}

/// The key, from the OS's randomness. Should the OS refuse (it does not on Linux once booted),
/// std's own per-process hash keys stand in: those come from the same source.
fn key() -> (u64, u64) {
    match (getrandom::u64(), getrandom::u64()) {
        (Ok(k0), Ok(k1)) => (k0, k1),
        (Err(err), _) | (_, Err(err)) => {
            tracing::warn!(%err, "the OS's randomness is unavailable; ids are keyed from std's hash keys");
            let state = RandomState::new();
            (state.hash_one(0u8), state.hash_one(1u8))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn gives_distinct_lower_hex_of_the_asked_length() {
        let ids: HashSet<String> = (0..10_000).map(|_| hex(16)).collect();
        assert_eq!(ids.len(), 10_000);
        for id in &ids {
            assert_eq!(id.len(), 32);
            assert!(id.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)), "{id}");
        }
        assert_eq!(hex(8).len(), 16);
        assert_eq!(hex(3).len(), 6);
    }
}
