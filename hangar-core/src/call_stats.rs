//! Calls, errors and latency over the last hour, per server and per tool: what
//! `GET /api/calls/stats` answers and the status page shows (p50 and p95 beside the counts).
//!
//! Each tool keeps [`WINDOWS`] windows of ten minutes ([`RecentCalls`]); a window older than the
//! hour is reused for the current one, so "the last hour" moves on in ten-minute steps and covers
//! 50 to 60 minutes. Latencies go into log-spaced buckets, each [`GROWTH`] times the one before,
//! from [`FIRST_BOUND_S`] (25 µs) to about 15 minutes, so a percentile is known to within its
//! bucket (a span of 1.5×, interpolated inside it): enough to tell 0.2 ms from 0.4 ms, at a
//! fixed 200 bytes a window. A tool never called costs nothing: its first call makes its first
//! window.
//!
//! `/metrics` keeps its own all-time histograms per server and tool (`metrics.rs`); this is the
//! moving view a person reads.

use serde::{Deserialize, Serialize};

/// Ten minutes, in seconds: one window.
pub const WINDOW_S: u64 = 600;
/// How many windows make the hour.
pub const WINDOWS: usize = 6;
/// The upper bound of the first bucket, in seconds.
pub const FIRST_BOUND_S: f64 = 25e-6;
/// Each bucket's upper bound over the one before it.
pub const GROWTH: f64 = 1.5;
/// How many buckets: the last ends at 25 µs × 1.5^43, about 930 s (slower calls count in it).
pub const BUCKETS: usize = 44;
/// The most tools a server keeps apart; calls to any other are counted under [`OTHER_TOOLS`]
/// (a server declaring thousands of tools must not grow the hangar's memory or `/metrics`
/// without bound).
pub const MAX_TOOLS: usize = 256;
/// Where calls to tools past [`MAX_TOOLS`] are counted.
pub const OTHER_TOOLS: &str = "_other";

/// One ten-minute window of one tool's calls.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Window {
    /// Which ten minutes: seconds since the Unix epoch over [`WINDOW_S`].
    number: u64,
    calls: u64,
    errors: u64,
    buckets: [u32; BUCKETS],
}

/// One tool's (or server's) calls over the last hour, in ten-minute windows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecentCalls {
    windows: Vec<Window>,
}

impl RecentCalls {
    /// Counts a call that ended at `now_s` (seconds since the Unix epoch) after `seconds`.
    pub fn observe(&mut self, now_s: u64, seconds: f64, failed: bool) {
        let number = now_s / WINDOW_S;
        let window = match self.windows.iter().position(|w| w.number == number) {
            Some(at) => &mut self.windows[at],
            None => {
                let fresh = Window { number, calls: 0, errors: 0, buckets: [0; BUCKETS] };
                if self.windows.len() < WINDOWS {
                    self.windows.push(fresh);
                    let last = self.windows.len() - 1;
                    &mut self.windows[last]
                } else {
                    // The oldest window is past the hour once a new one begins: reuse it.
                    let oldest = (0..self.windows.len()).min_by_key(|i| self.windows[*i].number).unwrap_or(0);
                    self.windows[oldest] = fresh;
                    &mut self.windows[oldest]
                }
            }
        };
        window.calls += 1;
        window.errors += u64::from(failed);
        let bucket = &mut window.buckets[bucket_of(seconds)];
        *bucket = bucket.saturating_add(1);
    }

    /// Adds this one's windows of the last hour as of `now_s` into `into`.
    pub fn add_to(&self, now_s: u64, into: &mut Merged) {
        let current = now_s / WINDOW_S;
        for window in self.windows.iter().filter(|w| w.number + (WINDOWS as u64) > current && w.number <= current) {
            into.calls += window.calls;
            into.errors += window.errors;
            for (sum, n) in into.buckets.iter_mut().zip(window.buckets) {
                *sum += u64::from(n);
            }
        }
    }

    /// The last hour's figures as of `now_s`.
    pub fn summary(&self, now_s: u64) -> Latency {
        let mut merged = Merged::default();
        self.add_to(now_s, &mut merged);
        merged.latency()
    }
}

/// The bucket a latency of `seconds` falls in.
fn bucket_of(seconds: f64) -> usize {
    if seconds.is_nan() || seconds <= FIRST_BOUND_S {
        return 0;
    }
    let steps = ((seconds / FIRST_BOUND_S).ln() / GROWTH.ln()).ceil();
    if steps >= (BUCKETS - 1) as f64 { BUCKETS - 1 } else { steps as usize }
}

/// The upper bound of bucket `i`, in seconds.
fn upper_bound(i: usize) -> f64 {
    FIRST_BOUND_S * GROWTH.powi(i as i32)
}

/// Several windows (of one tool, or of a server's tools) added up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    calls: u64,
    errors: u64,
    buckets: [u64; BUCKETS],
}

impl Default for Merged {
    fn default() -> Self {
        Merged { calls: 0, errors: 0, buckets: [0; BUCKETS] }
    }
}

impl Merged {
    /// The latency under which a share `q` (0 to 1) of the calls ended, in seconds, linear
    /// within its bucket; `None` without calls.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total: u64 = self.buckets.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = (q.clamp(0.0, 1.0) * total as f64).ceil().max(1.0);
        let mut below = 0u64;
        for (i, n) in self.buckets.iter().enumerate() {
            if *n > 0 && (below + n) as f64 >= rank {
                let low = if i == 0 { 0.0 } else { upper_bound(i - 1) };
                let share = (rank - below as f64) / *n as f64;
                return Some(low + (upper_bound(i) - low) * share);
            }
            below += n;
        }
        Some(upper_bound(BUCKETS - 1))
    }

    /// Adds `other`'s calls into these.
    pub fn add(&mut self, other: &Merged) {
        self.calls += other.calls;
        self.errors += other.errors;
        for (sum, n) in self.buckets.iter_mut().zip(other.buckets) {
            *sum += n;
        }
    }

    pub fn latency(&self) -> Latency {
        let ms = |q| self.quantile(q).map(|s| (s * 1e6).round() / 1e3);
        Latency { calls: self.calls, errors: self.errors, p50_ms: ms(0.5), p95_ms: ms(0.95) }
    }
}

/// Calls, failed calls and latency percentiles over the last hour.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub calls: u64,
    /// Calls that failed (timeout, upstream error, exit); a tool's `isError` result is an
    /// answer, not a failure.
    pub errors: u64,
    /// Milliseconds; `null` without calls.
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
}

/// `GET /api/calls/stats`: each server the caller sees, with its tools, over the last hour.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallStats {
    /// How far back the figures reach, in seconds (the hour, in ten-minute steps).
    pub window_s: u64,
    pub mcp_servers: Vec<ServerCallStats>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerCallStats {
    pub mcp_server: String,
    /// All its tools' calls together.
    pub latency: Latency,
    /// Each tool called in the hour, the most called first.
    pub tools: Vec<ToolCallStats>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallStats {
    pub tool: String,
    pub latency: Latency,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const NOW: u64 = 1_764_000_000;

    #[test]
    fn buckets_grow_by_half_from_25_microseconds() {
        assert_eq!(bucket_of(0.0), 0);
        assert_eq!(bucket_of(25e-6), 0);
        assert_eq!(bucket_of(30e-6), 1);
        assert_eq!(bucket_of(37.5e-6), 1);
        assert_eq!(bucket_of(38e-6), 2);
        assert_eq!(bucket_of(f64::NAN), 0);
        assert_eq!(bucket_of(1e9), BUCKETS - 1);
        assert!((upper_bound(BUCKETS - 1) - 930.0).abs() < 30.0, "{}", upper_bound(BUCKETS - 1));
    }

    #[test]
    fn percentiles_land_in_the_bucket_of_the_truth() {
        let mut recent = RecentCalls::default();
        // 90 calls of 0.2 ms and 10 of 5 ms: p50 is 0.2 ms, p95 5 ms.
        for i in 0..100 {
            recent.observe(NOW, if i < 90 { 0.0002 } else { 0.005 }, i == 99);
        }
        let latency = recent.summary(NOW);
        assert_eq!((latency.calls, latency.errors), (100, 1));
        let (p50, p95) = (latency.p50_ms.unwrap(), latency.p95_ms.unwrap());
        // 0.2 ms lies in the bucket (0.19, 0.285], 5 ms in (4.87, 7.3].
        assert!((0.189..=0.285).contains(&p50), "{p50}");
        assert!((4.86..=7.3).contains(&p95), "{p95}");
    }

    #[test]
    fn no_calls_no_percentiles() {
        let latency = RecentCalls::default().summary(NOW);
        assert_eq!(latency, Latency { calls: 0, errors: 0, p50_ms: None, p95_ms: None });
    }

    #[test]
    fn the_hour_moves_on_in_ten_minute_steps_and_old_windows_are_reused() {
        let mut recent = RecentCalls::default();
        recent.observe(NOW, 0.001, false);
        assert_eq!(recent.summary(NOW + 50 * 60).calls, 1, "still within the hour");
        assert_eq!(recent.summary(NOW + 61 * 60).calls, 0, "past the hour");
        for minute in 0..120 {
            recent.observe(NOW + minute * 60, 0.001, false);
        }
        assert_eq!(recent.windows.len(), WINDOWS, "at most an hour of windows");
        let hour = recent.summary(NOW + 119 * 60).calls;
        assert!((50..=60).contains(&hour), "{hour}");
    }

    #[test]
    fn merged_tools_make_the_servers_figures() {
        let (mut a, mut b) = (RecentCalls::default(), RecentCalls::default());
        a.observe(NOW, 0.001, false);
        b.observe(NOW, 0.001, true);
        let mut merged = Merged::default();
        a.add_to(NOW, &mut merged);
        b.add_to(NOW, &mut merged);
        assert_eq!((merged.latency().calls, merged.latency().errors), (2, 1));
    }
}
