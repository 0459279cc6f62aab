//! Timestamps as every surface prints them: RFC 3339, UTC, milliseconds.

use std::time::SystemTime;

/// `2026-11-29T23:20:23.427Z`.
pub fn rfc3339_millis(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn renders_utc_with_millis() {
        let at = UNIX_EPOCH + Duration::from_millis(1_764_458_423_427);
        assert_eq!(rfc3339_millis(at), "2025-11-29T23:20:23.427Z");
    }
}
