//! Timestamps as every surface prints them: RFC 3339, UTC, milliseconds; and as they are
//! stored, milliseconds since the Unix epoch.

use std::time::{SystemTime, UNIX_EPOCH};

/// `2026-11-29T23:20:23.427Z`.
pub fn rfc3339_millis(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

/// Now, in milliseconds since the Unix epoch (0 on a clock set before it).
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Milliseconds since the Unix epoch of an RFC 3339 time (`2026-12-04T10:00:00Z`, fractions
/// allowed); `None` if it does not parse or lies before the epoch.
pub fn parse_millis(text: &str) -> Option<u64> {
    let at = humantime::parse_rfc3339_weak(text).ok()?;
    let since = at.duration_since(UNIX_EPOCH).ok()?;
    u64::try_from(since.as_millis()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn renders_utc_with_millis() {
        let at = UNIX_EPOCH + Duration::from_millis(1_764_458_423_427);
        assert_eq!(rfc3339_millis(at), "2025-11-29T23:20:23.427Z");
        assert_eq!(parse_millis("2025-11-29T23:20:23.427Z"), Some(1_764_458_423_427));
        assert_eq!(parse_millis("yesterday"), None);
    }
}
