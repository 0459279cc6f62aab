//! Unpredictable hex ids for sessions, batches and calls.
//!
//! Each id is SipHash (std's keyed hasher, keyed from the OS's randomness once per process) of a
//! process-wide counter: unique within the process, unguessable without the key, and free of a
//! system call per id (opening `/dev/urandom` for every call cost a tenth of the API's CPU).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// `bytes` random bytes as lower-case hex (`2 * bytes` characters).
pub fn hex(bytes: usize) -> String {
    static KEY: OnceLock<RandomState> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let key = KEY.get_or_init(RandomState::new);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut out = String::with_capacity(bytes * 2);
    for block in 0..bytes.div_ceil(8) {
        let mut hasher = key.build_hasher();
        hasher.write_u64(n);
        hasher.write_u64(block as u64);
        for byte in hasher.finish().to_le_bytes().iter().take(bytes - block * 8) {
            out.push(char::from(DIGITS[usize::from(byte >> 4)]));
            out.push(char::from(DIGITS[usize::from(byte & 0xf)]));
        }
    }
    out
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
