//! The control socket's refused connections, logged so that no peer can flood the log.
//!
//! Each refusal is worth a warning (it is how an operator learns that something tried the
//! socket), but a peer that reconnects in a loop would otherwise write one line per attempt. So
//! at most [`PER_WINDOW`] refusals are logged one by one in each [`WINDOW`]; the rest are counted,
//! and the first refusal after the window says how many went unlogged. The count is pure
//! ([`Refusals::admit`], time passed in) and tested; [`refused`] is the one logging call.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long one window of logged refusals lasts.
pub const WINDOW: Duration = Duration::from_secs(10);
/// How many refusals a window logs one by one.
pub const PER_WINDOW: u32 = 10;

/// Whether a refusal is logged, and how many before it were not.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// Log it; `unlogged` refusals of the windows before went unlogged (0: none).
    Log { unlogged: u64 },
    /// Count it only.
    Count,
}

/// Refusals in the current window.
#[derive(Debug)]
pub struct Refusals {
    started: Option<Instant>,
    logged: u32,
    unlogged: u64,
}

impl Refusals {
    pub const fn new() -> Refusals {
        Refusals { started: None, logged: 0, unlogged: 0 }
    }

    /// Counts one refusal at `now` and says whether to log it.
    pub fn admit(&mut self, now: Instant) -> Admit {
        if self.started.is_none_or(|started| now.saturating_duration_since(started) >= WINDOW) {
            self.started = Some(now);
            self.logged = 0;
        }
        if self.logged < PER_WINDOW {
            self.logged += 1;
            Admit::Log { unlogged: std::mem::take(&mut self.unlogged) }
        } else {
            self.unlogged += 1;
            Admit::Count
        }
    }
}

static REFUSALS: Mutex<Refusals> = Mutex::new(Refusals::new());

/// Logs a refused control connection (at warn, with the peer's pid and why), unless this window
/// has logged its share already.
pub fn refused(pid: &str, why: &str) {
    let admitted = REFUSALS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).admit(Instant::now());
    match admitted {
        Admit::Log { unlogged: 0 } => tracing::warn!(pid, %why, "control connection refused"),
        Admit::Log { unlogged } => {
            tracing::warn!(pid, %why, unlogged, "control connection refused (and {unlogged} more before it, not logged one by one)");
        }
        Admit::Count => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_logs_its_share_and_the_next_says_how_many_went_unlogged() {
        let start = Instant::now();
        let mut refusals = Refusals::new();
        for _ in 0..PER_WINDOW {
            assert_eq!(refusals.admit(start), Admit::Log { unlogged: 0 });
        }
        for _ in 0..25 {
            assert_eq!(refusals.admit(start + Duration::from_secs(1)), Admit::Count);
        }
        assert_eq!(refusals.admit(start + WINDOW), Admit::Log { unlogged: 25 });
        assert_eq!(refusals.admit(start + WINDOW), Admit::Log { unlogged: 0 });
    }
}
