//! Random hex strings for session, batch and call ids.

use std::collections::hash_map::RandomState;
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// `bytes` random bytes as lower-case hex (`2 * bytes` characters).
pub fn hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    fill(&mut buf);
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

fn fill(buf: &mut [u8]) {
    if File::open("/dev/urandom").and_then(|mut f| f.read_exact(buf)).is_ok() {
        return;
    }
    // No /dev/urandom (a bare chroot): std's per-process random hasher keys, a counter and the
    // clock still give ids that do not repeat. These ids guard no secret.
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let seed = RandomState::new();
    for chunk in buf.chunks_mut(8) {
        let mut hasher = seed.build_hasher();
        hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        hasher.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
        let word = hasher.finish().to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gives_distinct_lower_hex() {
        let (a, b) = (hex(16), hex(16));
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
        assert_ne!(a, b);
    }
}
