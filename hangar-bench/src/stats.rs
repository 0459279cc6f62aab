//! Latency samples in, one summary row out (as a table line and as a JSON object).

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

/// What one run measured. Latencies are of every completed request, failed ones included
/// (failures are counted in `errors`, and any failure fails a suite step anyway).
#[derive(Debug, Clone)]
pub struct Summary {
    pub label: String,
    pub count: u64,
    pub errors: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    pub elapsed: Duration,
    pub calls_per_s: f64,
    /// How the run was set up (mode, wire, concurrency, ...), carried into the JSON line.
    pub setup: Value,
}

impl Summary {
    /// Merges the per-client sample vectors, sorts once and reads the percentiles.
    pub fn new(label: &str, per_client: Vec<Vec<u64>>, errors: u64, elapsed: Duration, setup: Value) -> Summary {
        let mut all: Vec<u64> = Vec::with_capacity(per_client.iter().map(Vec::len).sum());
        for samples in per_client {
            all.extend(samples);
        }
        all.sort_unstable();
        let count = all.len() as u64;
        let secs = elapsed.as_secs_f64();
        Summary {
            label: label.to_owned(),
            count,
            errors,
            p50_ns: percentile(&all, 0.50),
            p90_ns: percentile(&all, 0.90),
            p99_ns: percentile(&all, 0.99),
            max_ns: all.last().copied().unwrap_or(0),
            elapsed,
            calls_per_s: if secs > 0.0 { count as f64 / secs } else { 0.0 },
            setup,
        }
    }

    pub fn header() -> String {
        format!(
            "{:<44} {:>8} {:>6} {:>9} {:>9} {:>9} {:>9} {:>10}",
            "label", "count", "errors", "p50_ms", "p90_ms", "p99_ms", "max_ms", "calls/s"
        )
    }

    pub fn row(&self) -> String {
        format!(
            "{:<44} {:>8} {:>6} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>10.1}",
            self.label,
            self.count,
            self.errors,
            ms(self.p50_ns),
            ms(self.p90_ns),
            ms(self.p99_ns),
            ms(self.max_ns),
            self.calls_per_s
        )
    }

    pub fn to_json(&self) -> Value {
        let round3 = |x: f64| (x * 1000.0).round() / 1000.0;
        json!({
            "label": self.label,
            "count": self.count,
            "errors": self.errors,
            "p50_ms": round3(ms(self.p50_ns)),
            "p90_ms": round3(ms(self.p90_ns)),
            "p99_ms": round3(ms(self.p99_ns)),
            "max_ms": round3(ms(self.max_ns)),
            "calls_per_s": (self.calls_per_s * 10.0).round() / 10.0,
            "elapsed_s": round3(self.elapsed.as_secs_f64()),
            "setup": self.setup,
        })
    }
}

pub fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Nearest-rank percentile of sorted samples (0 for none).
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Appends one JSON object as a line, so several runs build one JSONL file.
pub fn append_json(path: &Path, value: &Value) -> anyhow::Result<()> {
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    writeln!(file, "{value}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let sorted: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&sorted, 0.50), 50);
        assert_eq!(percentile(&sorted, 0.99), 99);
        assert_eq!(percentile(&sorted, 1.0), 100);
        assert_eq!(percentile(&[7], 0.5), 7);
        assert_eq!(percentile(&[], 0.5), 0);
    }

    #[test]
    fn merges_clients() {
        let s = Summary::new("x", vec![vec![3, 1], vec![2]], 0, Duration::from_secs(1), Value::Null);
        assert_eq!((s.count, s.p50_ns, s.max_ns), (3, 2, 3));
        assert!((s.calls_per_s - 3.0).abs() < 1e-9);
    }
}
