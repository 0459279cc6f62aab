//! Exponential backoff with jitter: how long a server waits before its next restart.
//!
//! Pure: the caller supplies the jitter draw, so every delay is unit-tested.

use std::time::Duration;

use crate::config::RecoveryPolicy;

/// ±10 %: enough to keep servers that failed together from restarting together.
pub const JITTER: f64 = 0.10;

/// The wait before restart number `attempt` (0 for the first), with `draw` in `[0, 1)` turned
/// into a jitter of ±[`JITTER`].
pub fn delay(policy: &RecoveryPolicy, attempt: u32, draw: f64) -> Duration {
    let base = policy.initial_backoff.as_secs_f64() * policy.backoff_multiplier.powi(attempt.min(64) as i32);
    let capped = base.min(policy.max_backoff.as_secs_f64());
    let jitter = 1.0 + JITTER * (2.0 * draw.clamp(0.0, 1.0) - 1.0);
    Duration::try_from_secs_f64(capped * jitter).unwrap_or(policy.max_backoff)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RecoveryPolicy {
        RecoveryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_secs(5),
            backoff_multiplier: 2.0,
            max_backoff: Duration::from_secs(60),
        }
    }

    #[test]
    fn doubles_from_the_first_wait_up_to_the_cap() {
        let waits: Vec<u64> = (0..6).map(|n| delay(&policy(), n, 0.5).as_secs()).collect();
        assert_eq!(waits, [5, 10, 20, 40, 60, 60]);
        assert_eq!(delay(&policy(), u32::MAX, 0.5), Duration::from_secs(60), "no overflow however many attempts");
    }

    #[test]
    fn jitter_stays_within_ten_percent() {
        assert_eq!(delay(&policy(), 0, 0.0), Duration::from_millis(4500));
        assert!(delay(&policy(), 0, 0.999_999) <= Duration::from_millis(5500));
        assert_eq!(delay(&policy(), 0, 7.0), Duration::from_millis(5500), "out-of-range draws are clamped");
    }
}
