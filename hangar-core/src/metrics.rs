//! `/metrics`: a snapshot of every server's counters, and its Prometheus text rendering.
//!
//! The supervisor keeps the counters (it sees every call and check); the API asks for a
//! snapshot and renders it here, so every instance prints the same numbers the same way.
//!
//! [`FAMILIES`] lists every metric family (name, type, labels, help): [`render`] writes each
//! family's `# HELP` and `# TYPE` lines from it, and the table of families in
//! `docs/operating.md` is generated from it (`hangar-runtime`'s `generated_docs` test).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::lifecycle::State;

use Kind::{Counter, Gauge, Histogram as Buckets};

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
    /// Each tool's calls, by name (at most `call_stats::MAX_TOOLS`, the rest as
    /// `call_stats::OTHER_TOOLS`), so that the per-tool families stay bounded.
    #[serde(default)]
    pub tools: Vec<ToolMetrics>,
}

/// One tool's calls since the hangar started: their latency, and how many failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolMetrics {
    pub tool: String,
    pub errors: u64,
    pub latency: Histogram,
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

/// What kind of Prometheus metric a family is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    /// The word on the family's `# TYPE` line.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// One metric family `/metrics` has: its name, kind, help and the labels of its samples. Its
/// `# HELP` and `# TYPE` lines are written from here, and the docs' table of families is
/// generated from [`FAMILIES`], so the two say the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
    /// The labels of its samples (a histogram's buckets also carry `le`).
    pub labels: &'static [&'static str],
}

impl Family {
    const fn new(name: &'static str, kind: Kind, labels: &'static [&'static str], help: &'static str) -> Family {
        Family { name, kind, help, labels }
    }
}

/// The labels of a family with one sample per server.
const SERVER: &[&str] = &["mcp_server"];
/// The labels of a family with one sample per server and reason.
const SERVER_REASON: &[&str] = &["mcp_server", "reason"];

// The families, each named after what it counts; `render` writes them in FAMILIES' order.

const STATE: Family = Family::new(
    "hangar_mcp_server_state",
    Gauge,
    SERVER,
    "State of each server: 0 cold, 1 initializing, 2 ready, 3 degraded, 4 dead.",
);
const UP: Family = Family::new(
    "hangar_mcp_server_up",
    Gauge,
    SERVER,
    "1 if the server is ready or degraded (its process is serving), else 0.",
);
const STARTS: Family =
    Family::new("hangar_mcp_server_starts_total", Counter, SERVER, "Starts of each server's process.");
const STOPS: Family =
    Family::new("hangar_mcp_server_stops_total", Counter, SERVER_REASON, "Stops of each server, by reason.");
const DEATHS: Family =
    Family::new("hangar_mcp_server_deaths_total", Counter, SERVER_REASON, "Times each server went dead, by reason.");
const TOOL_CALLS: Family = Family::new("hangar_tool_calls_total", Counter, SERVER, "Tool calls sent to each server.");
const TOOL_CALL_ERRORS: Family = Family::new(
    "hangar_tool_call_errors_total",
    Counter,
    SERVER,
    "Tool calls that failed (timeout, upstream error, exit).",
);
const TOOL_CALL_DURATION: Family =
    Family::new("hangar_tool_call_duration_seconds", Buckets, SERVER, "Latency of tool calls to each server.");
const TOOL_DURATION: Family = Family::new(
    "hangar_mcp_tool_call_duration_seconds",
    Buckets,
    &["mcp_server", "tool"],
    "Latency of calls to each tool of each server (at most 256 tools a server; the rest as tool=\"_other\").",
);
const TOOL_ERRORS: Family = Family::new(
    "hangar_mcp_tool_call_errors_total",
    Counter,
    &["mcp_server", "tool"],
    "Calls to each tool that failed (timeout, upstream error, exit).",
);
const HEALTH_CHECKS: Family = Family::new(
    "hangar_health_checks_total",
    Counter,
    &["mcp_server", "result"],
    "Health checks of each server, by result.",
);
const CAPABILITY_VIOLATIONS: Family = Family::new(
    "hangar_capability_violations_total",
    Counter,
    SERVER,
    "Times a server served tools outside its expected tools.",
);
const MESSAGES_SKIPPED: Family = Family::new(
    "hangar_upstream_messages_skipped_total",
    Counter,
    SERVER,
    "Messages from a server over the size limit, skipped unread; each counts as one failure.",
);
const TOOL_DRIFT: Family = Family::new(
    "hangar_tool_drift_total",
    Counter,
    SERVER,
    "Times a pinned tool's declaration was found changed or missing.",
);
const REQUESTS_REFUSED: Family = Family::new(
    "hangar_requests_refused_total",
    Counter,
    &["limit"],
    "Requests refused by the hangar-wide limits (limits: in the config), by limit.",
);
const SERVER_REQUESTS_REFUSED: Family = Family::new(
    "hangar_mcp_server_requests_refused_total",
    Counter,
    &["mcp_server", "limit"],
    "Requests refused by each server's own limits, by limit.",
);
const JOURNAL_ENTRIES: Family =
    Family::new("hangar_journal_entries_total", Counter, &[], "Entries written to the journal.");
const JOURNAL_DROPPED: Family = Family::new(
    "hangar_journal_dropped_total",
    Counter,
    &[],
    "Journal entries dropped because the writer could not keep up or the database could not be written.",
);

/// Every family [`render`] writes, in the order it writes them.
pub const FAMILIES: &[Family] = &[
    STATE,
    UP,
    STARTS,
    STOPS,
    DEATHS,
    TOOL_CALLS,
    TOOL_CALL_ERRORS,
    TOOL_CALL_DURATION,
    TOOL_DURATION,
    TOOL_ERRORS,
    HEALTH_CHECKS,
    CAPABILITY_VIOLATIONS,
    MESSAGES_SKIPPED,
    TOOL_DRIFT,
    REQUESTS_REFUSED,
    SERVER_REQUESTS_REFUSED,
    JOURNAL_ENTRIES,
    JOURNAL_DROPPED,
];

/// The Prometheus text exposition of `snapshot`.
pub fn render(snapshot: &MetricsSnapshot) -> String {
    let mut out = String::with_capacity(4096 + snapshot.servers.len() * 2048);
    let servers = &snapshot.servers;
    one_per_server(&mut out, servers, &STATE, |s| u64::from(s.state.gauge()));
    one_per_server(&mut out, servers, &UP, |s| u64::from(matches!(s.state, State::Ready | State::Degraded)));
    one_per_server(&mut out, servers, &STARTS, |s| s.starts);
    by_reason(&mut out, servers, &STOPS, |s| &s.stops);
    by_reason(&mut out, servers, &DEATHS, |s| &s.deaths);
    one_per_server(&mut out, servers, &TOOL_CALLS, |s| s.tool_calls);
    one_per_server(&mut out, servers, &TOOL_CALL_ERRORS, |s| s.tool_call_errors);
    let name = TOOL_CALL_DURATION.name;
    family(&mut out, &TOOL_CALL_DURATION);
    for s in servers {
        let labels = format!("mcp_server=\"{}\"", label(&s.mcp_server_id));
        histogram(&mut out, name, &labels, &s.call_latency);
    }
    let name = TOOL_DURATION.name;
    family(&mut out, &TOOL_DURATION);
    for s in servers {
        for t in &s.tools {
            let labels = format!("mcp_server=\"{}\",tool=\"{}\"", label(&s.mcp_server_id), label(&t.tool));
            histogram(&mut out, name, &labels, &t.latency);
        }
    }
    let name = TOOL_ERRORS.name;
    family(&mut out, &TOOL_ERRORS);
    for s in servers {
        for t in &s.tools {
            let (id, tool) = (label(&s.mcp_server_id), label(&t.tool));
            let _ = writeln!(out, "{name}{{mcp_server=\"{id}\",tool=\"{tool}\"}} {}", t.errors);
        }
    }
    let name = HEALTH_CHECKS.name;
    family(&mut out, &HEALTH_CHECKS);
    for s in servers {
        let id = label(&s.mcp_server_id);
        let _ = writeln!(out, "{name}{{mcp_server=\"{id}\",result=\"ok\"}} {}", s.health_checks_ok);
        let _ = writeln!(out, "{name}{{mcp_server=\"{id}\",result=\"failed\"}} {}", s.health_checks_failed);
    }
    one_per_server(&mut out, servers, &CAPABILITY_VIOLATIONS, |s| s.capability_violations);
    one_per_server(&mut out, servers, &MESSAGES_SKIPPED, |s| s.messages_skipped);
    one_per_server(&mut out, servers, &TOOL_DRIFT, |s| s.tool_drifts);
    let name = REQUESTS_REFUSED.name;
    family(&mut out, &REQUESTS_REFUSED);
    for (limit, n) in snapshot.refused.by_limit() {
        let _ = writeln!(out, "{name}{{limit=\"{limit}\"}} {n}");
    }
    let name = SERVER_REQUESTS_REFUSED.name;
    family(&mut out, &SERVER_REQUESTS_REFUSED);
    for s in servers {
        let id = label(&s.mcp_server_id);
        for (limit, n) in s.refused.by_limit() {
            let _ = writeln!(out, "{name}{{mcp_server=\"{id}\",limit=\"{limit}\"}} {n}");
        }
    }
    family(&mut out, &JOURNAL_ENTRIES);
    let _ = writeln!(out, "{} {}", JOURNAL_ENTRIES.name, snapshot.journal.entries);
    family(&mut out, &JOURNAL_DROPPED);
    let _ = writeln!(out, "{} {}", JOURNAL_DROPPED.name, snapshot.journal.dropped);
    out
}

/// A histogram's `_bucket` (cumulative), `_sum` and `_count` samples, each with `labels`.
fn histogram(out: &mut String, name: &str, labels: &str, h: &Histogram) {
    let mut cumulative = 0;
    for (bound, n) in LATENCY_BUCKETS.iter().zip(&h.counts) {
        cumulative += n;
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
    }
    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", h.count);
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum_seconds);
    let _ = writeln!(out, "{name}_count{{{labels}}} {}", h.count);
}

impl Refused {
    fn by_limit(&self) -> [(&'static str, u64); 2] {
        [("max_concurrent_calls", self.max_concurrent_calls), ("rate_limit", self.rate_limit)]
    }
}

/// The family's `# HELP` and `# TYPE` lines.
fn family(out: &mut String, family: &Family) {
    let Family { name, kind, help, .. } = family;
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {}", kind.as_str());
}

/// A family of one sample per server, labelled only by the server.
fn one_per_server(out: &mut String, servers: &[ServerMetrics], of: &Family, value: impl Fn(&ServerMetrics) -> u64) {
    family(out, of);
    for s in servers {
        let _ = writeln!(out, "{}{{mcp_server=\"{}\"}} {}", of.name, label(&s.mcp_server_id), value(s));
    }
}

/// A family of one sample per server and reason.
fn by_reason(
    out: &mut String,
    servers: &[ServerMetrics],
    of: &Family,
    reasons: impl Fn(&ServerMetrics) -> &BTreeMap<String, u64>,
) {
    family(out, of);
    for s in servers {
        for (reason, n) in reasons(s) {
            let _ = writeln!(
                out,
                "{}{{mcp_server=\"{}\",reason=\"{}\"}} {n}",
                of.name,
                label(&s.mcp_server_id),
                label(reason)
            );
        }
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
            tools: Vec::new(),
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

    /// The label names of a sample line, e.g. `["mcp_server", "le"]`.
    fn label_names(sample: &str) -> Vec<&str> {
        let Some((_, labels)) = sample.split_once('{') else { return Vec::new() };
        let labels = labels.split_once('}').map_or(labels, |(inside, _)| inside);
        labels.split("\",").filter_map(|pair| pair.split_once('=')).map(|(name, _)| name).collect()
    }

    #[test]
    fn render_writes_exactly_the_listed_families_in_order_with_their_labels() {
        let mut s = server("math", State::Ready);
        s.call_latency.observe(0.01);
        s.tools.push(ToolMetrics { tool: "add".into(), errors: 1, latency: s.call_latency.clone() });
        let text = render(&MetricsSnapshot { servers: vec![s], ..MetricsSnapshot::default() });
        let mut described = Vec::new();
        let mut current: Option<&Family> = None;
        for line in text.lines() {
            if let Some(help) = line.strip_prefix("# HELP ") {
                let family = FAMILIES.iter().find(|f| help == format!("{} {}", f.name, f.help));
                current = Some(family.unwrap_or_else(|| panic!("`{line}` is not a listed family's help")));
                described.push(line.to_owned());
            } else if let Some(kind) = line.strip_prefix("# TYPE ") {
                let family = current.expect("a TYPE after its HELP");
                assert_eq!(kind, format!("{} {}", family.name, family.kind.as_str()));
            } else {
                let family = current.expect("a sample after its family's HELP");
                let name = line.split(['{', ' ']).next().unwrap_or_default();
                let suffixes: &[&str] =
                    if family.kind == Kind::Histogram { &["_bucket", "_sum", "_count"] } else { &[""] };
                assert!(suffixes.iter().any(|suffix| name == format!("{}{suffix}", family.name)), "{line}");
                let extra: &[&str] = if name.ends_with("_bucket") { &["le"] } else { &[] };
                let expected: Vec<&str> = family.labels.iter().chain(extra).copied().collect();
                assert_eq!(label_names(line), expected, "{line}");
            }
        }
        let listed: Vec<String> = FAMILIES.iter().map(|f| format!("# HELP {} {}", f.name, f.help)).collect();
        assert_eq!(described, listed);
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
