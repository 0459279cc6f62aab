//! `/metrics`: a snapshot of every server's counters, and its Prometheus text rendering.
//!
//! The supervisor keeps the counters (it sees every call and check); the API asks for a
//! snapshot and renders it here, so every instance prints the same numbers the same way.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::lifecycle::State;

/// Upper bounds (seconds) of the call latency histogram's buckets.
pub const LATENCY_BUCKETS: [f64; 12] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0];

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricsSnapshot {
    pub servers: Vec<ServerMetrics>,
    /// Requests refused by the hangar-wide limits.
    #[serde(default)]
    pub refused: Refused,
    /// The journal's writes.
    #[serde(default)]
    pub journal: JournalCounts,
    /// Calls running in the supervisor right now, tasks' included, whoever made them: what a
    /// draining API waits on before it stops answering `tasks/*` (not rendered: a gauge per
    /// scrape would say little).
    #[serde(default)]
    pub calls_in_flight: u64,
}

/// What the journal wrote, and what it had to drop (its queue full, or the disk full or locked).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalCounts {
    pub entries: u64,
    pub dropped: u64,
}

/// Requests a limit refused, by which limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused {
    pub max_concurrent_calls: u64,
    pub rate_limit: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerMetrics {
    pub mcp_server_id: String,
    pub state: State,
    pub starts: u64,
    /// Stops by reason (`user_request`, `idle`, `shutdown`).
    pub stops: BTreeMap<String, u64>,
    /// Deaths by reason (`crashed`, `start_failed`, ...).
    pub deaths: BTreeMap<String, u64>,
    pub tool_calls: u64,
    pub tool_call_errors: u64,
    pub call_latency: Histogram,
    pub health_checks_ok: u64,
    pub health_checks_failed: u64,
    pub capability_violations: u64,
    /// Messages from the server over the size limit, skipped unread (each one failure).
    #[serde(default)]
    pub messages_skipped: u64,
    /// Pinned tools found changed or missing (`capabilities.tools.pinned`), in either mode.
    #[serde(default)]
    pub tool_drifts: u64,
    /// Requests refused by this server's own limits.
    #[serde(default)]
    pub refused: Refused,
}

/// A latency histogram over [`LATENCY_BUCKETS`]: per-bucket counts (not cumulative).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    pub counts: Vec<u64>,
    pub sum_seconds: f64,
    pub count: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: vec![0; LATENCY_BUCKETS.len()], sum_seconds: 0.0, count: 0 }
    }
}

impl Histogram {
    pub fn observe(&mut self, seconds: f64) {
        if let Some(i) = LATENCY_BUCKETS.iter().position(|bound| seconds <= *bound)
            && let Some(count) = self.counts.get_mut(i)
        {
            *count += 1;
        }
        self.sum_seconds += seconds;
        self.count += 1;
    }
}

/// The Prometheus text exposition of `snapshot`.
pub fn render(snapshot: &MetricsSnapshot) -> String {
    let mut out = String::with_capacity(4096 + snapshot.servers.len() * 2048);
    let servers = &snapshot.servers;
    family(
        &mut out,
        "hangar_mcp_server_state",
        "gauge",
        "State of each server: 0 cold, 1 initializing, 2 ready, 3 degraded, 4 dead.",
    );
    for s in servers {
        let _ =
            writeln!(out, "hangar_mcp_server_state{{mcp_server=\"{}\"}} {}", label(&s.mcp_server_id), s.state.gauge());
    }
    family(
        &mut out,
        "hangar_mcp_server_up",
        "gauge",
        "1 if the server is ready or degraded (its process is serving), else 0.",
    );
    for s in servers {
        let up = u8::from(matches!(s.state, State::Ready | State::Degraded));
        let _ = writeln!(out, "hangar_mcp_server_up{{mcp_server=\"{}\"}} {up}", label(&s.mcp_server_id));
    }
    counter(&mut out, servers, "hangar_mcp_server_starts_total", "Starts of each server's process.", |s| s.starts);
    family(&mut out, "hangar_mcp_server_stops_total", "counter", "Stops of each server, by reason.");
    for s in servers {
        for (reason, n) in &s.stops {
            let _ = writeln!(
                out,
                "hangar_mcp_server_stops_total{{mcp_server=\"{}\",reason=\"{}\"}} {n}",
                label(&s.mcp_server_id),
                label(reason)
            );
        }
    }
    family(&mut out, "hangar_mcp_server_deaths_total", "counter", "Times each server went dead, by reason.");
    for s in servers {
        for (reason, n) in &s.deaths {
            let _ = writeln!(
                out,
                "hangar_mcp_server_deaths_total{{mcp_server=\"{}\",reason=\"{}\"}} {n}",
                label(&s.mcp_server_id),
                label(reason)
            );
        }
    }
    counter(&mut out, servers, "hangar_tool_calls_total", "Tool calls sent to each server.", |s| s.tool_calls);
    counter(
        &mut out,
        servers,
        "hangar_tool_call_errors_total",
        "Tool calls that failed (timeout, upstream error, exit).",
        |s| s.tool_call_errors,
    );
    family(&mut out, "hangar_tool_call_duration_seconds", "histogram", "Latency of tool calls to each server.");
    for s in servers {
        let id = label(&s.mcp_server_id);
        let mut cumulative = 0;
        for (bound, n) in LATENCY_BUCKETS.iter().zip(&s.call_latency.counts) {
            cumulative += n;
            let _ = writeln!(
                out,
                "hangar_tool_call_duration_seconds_bucket{{mcp_server=\"{id}\",le=\"{bound}\"}} {cumulative}"
            );
        }
        let h = &s.call_latency;
        let _ =
            writeln!(out, "hangar_tool_call_duration_seconds_bucket{{mcp_server=\"{id}\",le=\"+Inf\"}} {}", h.count);
        let _ = writeln!(out, "hangar_tool_call_duration_seconds_sum{{mcp_server=\"{id}\"}} {}", h.sum_seconds);
        let _ = writeln!(out, "hangar_tool_call_duration_seconds_count{{mcp_server=\"{id}\"}} {}", h.count);
    }
    family(&mut out, "hangar_health_checks_total", "counter", "Health checks of each server, by result.");
    for s in servers {
        let id = label(&s.mcp_server_id);
        let _ = writeln!(out, "hangar_health_checks_total{{mcp_server=\"{id}\",result=\"ok\"}} {}", s.health_checks_ok);
        let _ = writeln!(
            out,
            "hangar_health_checks_total{{mcp_server=\"{id}\",result=\"failed\"}} {}",
            s.health_checks_failed
        );
    }
    counter(
        &mut out,
        servers,
        "hangar_capability_violations_total",
        "Times a server served tools outside its expected tools.",
        |s| s.capability_violations,
    );
    counter(
        &mut out,
        servers,
        "hangar_upstream_messages_skipped_total",
        "Messages from a server over the size limit, skipped unread; each counts as one failure.",
        |s| s.messages_skipped,
    );
    counter(
        &mut out,
        servers,
        "hangar_tool_drift_total",
        "Times a pinned tool's declaration was found changed or missing.",
        |s| s.tool_drifts,
    );
    family(
        &mut out,
        "hangar_requests_refused_total",
        "counter",
        "Requests refused by the hangar-wide limits (limits: in the config), by limit.",
    );
    for (limit, n) in snapshot.refused.by_limit() {
        let _ = writeln!(out, "hangar_requests_refused_total{{limit=\"{limit}\"}} {n}");
    }
    family(
        &mut out,
        "hangar_mcp_server_requests_refused_total",
        "counter",
        "Requests refused by each server's own limits, by limit.",
    );
    for s in servers {
        let id = label(&s.mcp_server_id);
        for (limit, n) in s.refused.by_limit() {
            let _ =
                writeln!(out, "hangar_mcp_server_requests_refused_total{{mcp_server=\"{id}\",limit=\"{limit}\"}} {n}");
        }
    }
    family(&mut out, "hangar_journal_entries_total", "counter", "Entries written to the journal.");
    let _ = writeln!(out, "hangar_journal_entries_total {}", snapshot.journal.entries);
    family(
        &mut out,
        "hangar_journal_dropped_total",
        "counter",
        "Journal entries dropped because the writer could not keep up or the database could not be written.",
    );
    let _ = writeln!(out, "hangar_journal_dropped_total {}", snapshot.journal.dropped);
    out
}

impl Refused {
    fn by_limit(&self) -> [(&'static str, u64); 2] {
        [("max_concurrent_calls", self.max_concurrent_calls), ("rate_limit", self.rate_limit)]
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn counter(out: &mut String, servers: &[ServerMetrics], name: &str, help: &str, value: impl Fn(&ServerMetrics) -> u64) {
    family(out, name, "counter", help);
    for s in servers {
        let _ = writeln!(out, "{name}{{mcp_server=\"{}\"}} {}", label(&s.mcp_server_id), value(s));
    }
}

/// A label value escaped as the exposition format requires.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(id: &str, state: State) -> ServerMetrics {
        ServerMetrics {
            mcp_server_id: id.into(),
            state,
            starts: 2,
            stops: BTreeMap::from([("idle".to_string(), 1)]),
            deaths: BTreeMap::from([("crashed".to_string(), 1)]),
            tool_calls: 3,
            tool_call_errors: 1,
            call_latency: Histogram::default(),
            health_checks_ok: 4,
            health_checks_failed: 5,
            capability_violations: 0,
            messages_skipped: 0,
            tool_drifts: 3,
            refused: Refused { max_concurrent_calls: 0, rate_limit: 7 },
        }
    }

    #[test]
    fn renders_every_family_with_its_type_and_the_state_gauge() {
        let mut s = server("math", State::Dead);
        s.call_latency.observe(0.002);
        s.call_latency.observe(0.2);
        s.call_latency.observe(99.0);
        let refused = Refused { max_concurrent_calls: 2, rate_limit: 0 };
        let text = render(&MetricsSnapshot {
            servers: vec![s, server("web", State::Ready)],
            refused,
            journal: JournalCounts { entries: 7, dropped: 2 },
            calls_in_flight: 0,
        });
        assert!(text.contains("hangar_mcp_server_state{mcp_server=\"math\"} 4\n"), "{text}");
        assert!(text.contains("hangar_mcp_server_up{mcp_server=\"math\"} 0\n"));
        assert!(text.contains("hangar_mcp_server_up{mcp_server=\"web\"} 1\n"));
        assert!(text.contains("hangar_mcp_server_stops_total{mcp_server=\"math\",reason=\"idle\"} 1\n"));
        assert!(text.contains("hangar_tool_call_duration_seconds_bucket{mcp_server=\"math\",le=\"0.0025\"} 1\n"));
        assert!(text.contains("hangar_tool_call_duration_seconds_bucket{mcp_server=\"math\",le=\"0.5\"} 2\n"));
        assert!(text.contains("hangar_tool_call_duration_seconds_bucket{mcp_server=\"math\",le=\"+Inf\"} 3\n"));
        assert!(text.contains("hangar_health_checks_total{mcp_server=\"web\",result=\"failed\"} 5\n"));
        assert!(text.contains("# TYPE hangar_tool_drift_total counter\n"), "{text}");
        assert!(text.contains("hangar_tool_drift_total{mcp_server=\"web\"} 3\n"), "{text}");
        assert!(text.contains("hangar_requests_refused_total{limit=\"max_concurrent_calls\"} 2\n"), "{text}");
        assert!(text.contains("hangar_mcp_server_requests_refused_total{mcp_server=\"web\",limit=\"rate_limit\"} 7\n"));
        assert!(text.contains("# TYPE hangar_journal_entries_total counter\nhangar_journal_entries_total 7\n"));
        assert!(text.contains("# TYPE hangar_journal_dropped_total counter\nhangar_journal_dropped_total 2\n"));
        for family in ["state", "up", "starts_total", "stops_total"] {
            assert_eq!(text.matches(&format!("# TYPE hangar_mcp_server_{family} ")).count(), 1);
        }
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
