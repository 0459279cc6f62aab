//! The records every read surface shows, rendered here and nowhere else.
//!
//! The supervisor builds them from its state; the API serializes them unchanged on REST and MCP.
//! So a server's `dead` object is byte-for-byte the same on every surface (invariant 1), its
//! words included (it carries its own `note`, which the status page shows as it came), and
//! every string in them is the hangar's own words (invariant 2): no field is filled from what an
//! upstream printed, except tool names, descriptions and schemas, which it declares.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::isolation::Isolation;
use crate::lifecycle::{Dead, DeadReason, RevivedBy, State};
use crate::time::rfc3339_millis;

/// The `dead` object: `null`, or why and since when a server is dead. It is written with its
/// [`note`](DeadRecord::note); read, the note is ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "DeadObject")]
pub struct DeadRecord {
    pub reason: DeadReason,
    pub since: String,
    pub retry_allowed_at: Option<String>,
    pub revived_by: RevivedBy,
    /// How its process ended, in the hangar's words, when known: `its process exited with code
    /// 101`, `its process was killed by SIGSEGV`, or what the hangar did and why: `its process
    /// closed its stdout, so the hangar killed it (SIGKILL)`; for `upstream_unauthorized`, what
    /// the upstream refused and asked for (its challenge's parsed parameters) and the key to fix.
    /// Absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl From<&Dead> for DeadRecord {
    fn from(dead: &Dead) -> Self {
        DeadRecord {
            reason: dead.reason,
            since: rfc3339_millis(dead.since),
            retry_allowed_at: dead.retry_allowed_at.map(rfc3339_millis),
            revived_by: dead.reason.revived_by(),
            detail: dead.detail.clone(),
        }
    }
}

/// The `dead` object as every surface writes it: the record's fields, then its note (`Failed
/// (<reason>): <how it is revived>; <detail>`), rendered here once, so that a reader that shows
/// words (the status page) shows these and words nothing itself.
#[derive(Serialize)]
struct DeadObject {
    reason: DeadReason,
    since: String,
    retry_allowed_at: Option<String>,
    revived_by: RevivedBy,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<String>,
    note: String,
}

impl From<DeadRecord> for DeadObject {
    fn from(record: DeadRecord) -> Self {
        let note = record.note();
        let DeadRecord { reason, since, retry_allowed_at, revived_by, detail } = record;
        DeadObject { reason, since, retry_allowed_at, revived_by, detail, note }
    }
}

/// How a dead server comes back, as both renderings below tell it.
enum Revival<'a> {
    StartOnly,
    CallAfter(&'a str),
    NextCall,
}

/// Every rendering of a dead server, long and short, is here.
impl DeadRecord {
    /// The `note` of a dead server in `hangar_status`: `Failed (<reason>): <how it is revived>`,
    /// then `; <detail>` when the record has one.
    pub fn note(&self) -> String {
        let how = match self.revival() {
            Revival::StartOnly => "revived only by an explicit start".to_string(),
            Revival::CallAfter(at) => format!("a call after {at}, or an explicit start, revives it"),
            Revival::NextCall => "the next call, or an explicit start, revives it".to_string(),
        };
        self.with_detail(format!("Failed ({}): {how}", self.reason))
    }

    /// The short form, one cell of `hangar status`'s DEAD column: `<reason>`, then how the
    /// server is revived when not by the next call (`, retry after <time>` or `, start to
    /// revive`), then `; <detail>` when the record has one.
    pub fn short(&self) -> String {
        let head = match self.revival() {
            Revival::StartOnly => format!("{}, start to revive", self.reason),
            Revival::CallAfter(at) => format!("{}, retry after {at}", self.reason),
            Revival::NextCall => self.reason.to_string(),
        };
        self.with_detail(head)
    }

    /// Why a call to server `id`, dead as this record says, is refused (the error's message).
    pub fn call_refusal(&self, id: &str) -> String {
        match self.revival() {
            Revival::StartOnly => format!("`{id}` is dead ({}); only an explicit start revives it", self.reason),
            Revival::CallAfter(at) => format!("{}; a call then revives it", self.backing_off(id, at)),
            Revival::NextCall => format!("`{id}` is dead ({})", self.reason),
        }
    }

    /// Why a request to server `id` failed when its process ended under it, told once this
    /// record says so (the error's message): `` `hog` died during tool `allocate` (crashed); its
    /// process ran out of memory (memory_mb: 256), so the kernel killed it (SIGKILL)``. `what`
    /// names the request (`` tool `allocate` ``).
    pub fn died_during(&self, id: &str, what: &str) -> String {
        self.with_detail(format!("`{id}` died during {what} ({})", self.reason))
    }

    /// Why an explicit start of server `id` is refused until `next_start_at` (the error's message).
    pub fn start_refusal(&self, id: &str, next_start_at: &str) -> String {
        self.backing_off(id, next_start_at)
    }

    fn backing_off(&self, id: &str, next_start_at: &str) -> String {
        format!("`{id}` is dead ({}) and backing off: next start at {next_start_at}", self.reason)
    }

    fn revival(&self) -> Revival<'_> {
        match (self.revived_by, &self.retry_allowed_at) {
            (RevivedBy::Start, _) => Revival::StartOnly,
            (RevivedBy::CallOrStart, Some(at)) => Revival::CallAfter(at),
            (RevivedBy::CallOrStart, None) => Revival::NextCall,
        }
    }

    fn with_detail(&self, head: String) -> String {
        match &self.detail {
            Some(detail) => format!("{head}; {detail}"),
            None => head,
        }
    }
}

/// A tool as an upstream declares it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(rename = "inputSchema")]
    pub input_schema: Value,
}

/// A tool with the digest of its declaration (`crate::tool_digest`), the value a pin in
/// `capabilities.tools.pinned` must match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRecord {
    #[serde(flatten)]
    pub tool: ToolInfo,
    pub digest: String,
}

/// Pinned tools (`capabilities.tools.pinned`) whose declaration no longer matches its pin. The
/// names are the config's own keys, so the rendering below names them in the hangar's words; the
/// declarations themselves go to the server's logs only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolDrift {
    /// Declared with another digest than the pinned one.
    pub changed: Vec<String>,
    /// Pinned but no longer declared.
    pub missing: Vec<String>,
}

impl ToolDrift {
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.missing.is_empty()
    }

    /// Every tool that drifted, changed ones first.
    pub fn tools(&self) -> impl Iterator<Item = &str> {
        self.changed.iter().chain(&self.missing).map(String::as_str)
    }

    /// The dead record's `detail` of a server blocked for drift (and the refusal of its start):
    /// `pinned tools drifted: `add` changed, `sub` missing; the definitions are in its logs`.
    pub fn detail(&self) -> String {
        let changed = self.changed.iter().map(|t| format!("`{t}` changed"));
        let missing = self.missing.iter().map(|t| format!("`{t}` missing"));
        let list: Vec<String> = changed.chain(missing).collect();
        let noun = if list.len() == 1 { "tool" } else { "tools" };
        format!("pinned {noun} drifted: {}; the definitions are in its logs", list.join(", "))
    }
}

/// Counters a server accumulates while it runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Health {
    pub consecutive_failures: u32,
    pub total_invocations: u64,
    pub total_failures: u64,
    pub last_check_at: Option<String>,
    pub last_success_at: Option<String>,
}

/// One line of `GET /api/mcp_servers` and `hangar_list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerSummary {
    pub mcp_server_id: String,
    pub state: State,
    pub mode: String,
    pub alive: bool,
    pub tools_count: usize,
    pub health_status: String,
    pub dead: Option<DeadRecord>,
    /// The server's last state change in this run of the hangar (`null` before its first).
    #[serde(default)]
    pub last_change: Option<LastChange>,
    /// Who gets a process of their own (`mcp_servers.<id>.isolation`); absent when `shared`.
    #[serde(default, skip_serializing_if = "Isolation::is_shared")]
    pub isolation: Isolation,
    /// An isolated server's running instances the caller may see: its own, or all for an admin.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<InstanceSummary>,
}

/// One instance of an isolated server, under its server on every read surface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceSummary {
    /// Its name, `<server>@<label>`: what its logs and details are asked by.
    pub instance: String,
    /// Whose it is.
    pub identity: String,
    pub state: State,
    pub alive: bool,
    pub pid: Option<u32>,
    /// Seconds since its last call.
    pub idle_s: u64,
    pub dead: Option<DeadRecord>,
}

/// When a server last changed state, and from what to what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastChange {
    pub from: State,
    pub to: State,
    pub at: String,
}

/// `GET /api/mcp_servers` and `hangar_list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerList {
    pub mcp_servers: Vec<ServerSummary>,
}

/// Facts about the running process and its protocol, in the hangar's words.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub pid: Option<u32>,
    pub started_at: Option<String>,
    /// `modern` (2026-07-28) or `legacy`, once a handshake has told.
    pub protocol_era: Option<String>,
    pub protocol_version: Option<String>,
    /// The program only: arguments and environment may carry secrets.
    pub program: String,
    pub description: Option<String>,
    pub idle_ttl_s: f64,
    pub health_check_interval_s: f64,
    pub restarts: u64,
}

/// `GET /api/mcp_servers/{id}` and `hangar_details`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerDetails {
    pub mcp_server_id: String,
    pub state: State,
    pub mode: String,
    pub alive: bool,
    pub tools: Vec<ToolInfo>,
    /// Whether `tools` are as its upstream declared them in this run of the hangar, or what the
    /// last run knew (kept in the journal; the first start refreshes them).
    #[serde(default)]
    pub tools_source: ToolsSource,
    pub health: Health,
    pub meta: Meta,
    pub dead: Option<DeadRecord>,
    /// Its sandbox (`hangar_core::sandbox`): configured and in effect; `None`: not sandboxed.
    #[serde(default)]
    pub sandbox: Option<crate::sandbox::SandboxDetails>,
    /// How the hangar proves itself to the upstream (`mcp_servers.<id>.auth`), never a secret;
    /// `None`: it sends no credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthDetails>,
    /// Who gets a process of their own; absent when `shared`.
    #[serde(default, skip_serializing_if = "Isolation::is_shared")]
    pub isolation: Isolation,
    /// An isolated server's running instances the caller may see.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<InstanceSummary>,
    /// What its config says (program, endpoint, env names, limits, prefix), never a secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<crate::server_facts::ConfigFacts>,
    /// Its process as `/proc` tells (memory, CPU, threads), while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<crate::server_facts::ProcessFacts>,
}

/// A server's `auth:` as every surface shows it: the kind, the names of the headers it sends
/// (never their values), and what its health checks use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthDetails {
    /// `headers`, or `oauth`.
    pub kind: String,
    /// The header names `auth.headers` sends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<String>,
    /// What the health checks and the tool pinning call the upstream with: `its credential` (the
    /// one every call carries), or `reachability only` (a server whose credentials are each
    /// caller's own).
    pub checks: String,
}

/// Where a server's tool list comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolsSource {
    /// Declared by its upstream in this run.
    #[default]
    Live,
    /// The last run's list, remembered across a restart; no upstream was asked yet.
    Remembered,
    /// Not known: it has not run in this hangar's run and nothing was remembered (its list is
    /// empty, which says nothing of its tools).
    Unknown,
}

/// One entry of `hangar_status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusEntry {
    pub id: String,
    pub indicator: String,
    pub state: State,
    pub mode: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub dead: Option<DeadRecord>,
}

impl From<&ServerSummary> for StatusEntry {
    fn from(s: &ServerSummary) -> Self {
        let note = match (&s.dead, s.state) {
            (Some(dead), _) => Some(dead.note()),
            (None, State::Cold) => Some("Starts on first use".into()),
            (None, State::Degraded) => Some("Health checks failing; recovery restarts pending".into()),
            _ => None,
        };
        StatusEntry {
            id: s.mcp_server_id.clone(),
            indicator: format!("[{}]", s.state.as_str().to_uppercase()),
            state: s.state,
            mode: s.mode.clone(),
            note,
            dead: s.dead.clone(),
        }
    }
}

/// Counts by state, for `hangar_status` and `hangar_health`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateCounts {
    pub total: usize,
    pub cold: usize,
    pub initializing: usize,
    pub ready: usize,
    pub degraded: usize,
    pub dead: usize,
}

impl StateCounts {
    pub fn of<'a>(servers: impl IntoIterator<Item = &'a ServerSummary>) -> Self {
        let mut c = StateCounts::default();
        for s in servers {
            c.total += 1;
            *match s.state {
                State::Cold => &mut c.cold,
                State::Initializing => &mut c.initializing,
                State::Ready => &mut c.ready,
                State::Degraded => &mut c.degraded,
                State::Dead => &mut c.dead,
            } += 1;
        }
        c
    }
}

/// One line of an upstream's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    pub mcp_server_id: String,
    /// `stderr`; `stdout` for lines on stdout that are not protocol messages.
    pub stream: String,
    pub content: String,
    pub recorded_at: String,
}

/// `GET /api/mcp_servers/{id}/logs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogList {
    pub logs: Vec<LogLine>,
    pub mcp_server_id: String,
    pub count: usize,
}

/// A state change, as the control socket streams it to subscribers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateChange {
    pub mcp_server_id: String,
    pub from: State,
    pub to: State,
    pub at: String,
    pub dead: Option<DeadRecord>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    fn at(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
    }

    #[test]
    fn dead_record_has_the_documented_shape() {
        let dead = Dead {
            reason: DeadReason::GivenUp,
            since: at(1_764_458_423_427),
            retry_allowed_at: Some(at(1_764_458_427_822)),
            detail: None,
        };
        let record = DeadRecord::from(&dead);
        let json = serde_json::to_string(&record).unwrap();
        assert_eq!(
            json,
            r#"{"reason":"given_up","since":"2025-11-29T23:20:23.427Z","retry_allowed_at":"2025-11-29T23:20:27.822Z","revived_by":"call_or_start","note":"Failed (given_up): a call after 2025-11-29T23:20:27.822Z, or an explicit start, revives it"}"#
        );
        assert_eq!(serde_json::from_str::<DeadRecord>(&json).unwrap(), record, "read back as written");
        assert_eq!(record.short(), "given_up, retry after 2025-11-29T23:20:27.822Z");
        assert_eq!(
            record.call_refusal("w"),
            "`w` is dead (given_up) and backing off: next start at 2025-11-29T23:20:27.822Z; a call then revives it"
        );
        assert_eq!(
            record.start_refusal("w", "2025-11-29T23:20:27.822Z"),
            "`w` is dead (given_up) and backing off: next start at 2025-11-29T23:20:27.822Z"
        );
        assert_eq!(
            record.note(),
            "Failed (given_up): a call after 2025-11-29T23:20:27.822Z, or an explicit start, revives it"
        );
    }

    #[test]
    fn capability_blocked_is_revived_by_start() {
        let dead = Dead { reason: DeadReason::CapabilityBlocked, since: at(0), retry_allowed_at: None, detail: None };
        let record = DeadRecord::from(&dead);
        assert_eq!((record.revived_by, record.retry_allowed_at.as_deref()), (RevivedBy::Start, None));
        assert_eq!(record.note(), "Failed (capability_blocked): revived only by an explicit start");
        assert_eq!(record.short(), "capability_blocked, start to revive");
        assert_eq!(record.call_refusal("b"), "`b` is dead (capability_blocked); only an explicit start revives it");
    }

    #[test]
    fn status_entry_carries_the_same_dead_object_and_a_note_naming_the_reason() {
        let dead = DeadRecord::from(&Dead {
            reason: DeadReason::Crashed,
            since: at(5),
            retry_allowed_at: None,
            detail: Some("its process closed its stdout, so the hangar killed it (SIGKILL)".into()),
        });
        let summary = ServerSummary {
            mcp_server_id: "math".into(),
            state: State::Dead,
            mode: "subprocess".into(),
            alive: false,
            tools_count: 0,
            health_status: "unhealthy".into(),
            dead: Some(dead.clone()),
            last_change: None,
            isolation: Isolation::Shared,
            instances: Vec::new(),
        };
        let entry = StatusEntry::from(&summary);
        assert_eq!(entry.indicator, "[DEAD]");
        assert_eq!(entry.dead.as_ref(), Some(&dead));
        assert_eq!(
            entry.note.as_deref(),
            Some(
                "Failed (crashed): the next call, or an explicit start, revives it; \
                 its process closed its stdout, so the hangar killed it (SIGKILL)"
            )
        );
        assert_eq!(dead.short(), "crashed; its process closed its stdout, so the hangar killed it (SIGKILL)");
        assert_eq!(DeadRecord { detail: None, ..dead.clone() }.short(), "crashed");
        assert_eq!(dead.call_refusal("math"), "`math` is dead (crashed)");
        assert_eq!(
            dead.died_during("math", "tool `add`"),
            "`math` died during tool `add` (crashed); its process closed its stdout, so the hangar killed it (SIGKILL)"
        );
        let json = serde_json::to_value(&dead).unwrap();
        assert_eq!(json["detail"], "its process closed its stdout, so the hangar killed it (SIGKILL)");
        assert_eq!(StateCounts::of([&summary]).dead, 1);
    }

    #[test]
    fn tool_record_flattens_its_declaration() {
        let record = ToolRecord {
            tool: ToolInfo {
                name: "add".into(),
                description: Some("Adds".into()),
                input_schema: serde_json::json!({"type": "object"}),
            },
            digest: "sha256:00".into(),
        };
        let value = serde_json::to_value(&record).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"name": "add", "description": "Adds", "inputSchema": {"type": "object"}, "digest": "sha256:00"})
        );
    }

    #[test]
    fn a_drift_detail_names_each_tool_and_reads_the_same_in_every_rendering() {
        let one = ToolDrift { changed: vec!["add".into()], missing: vec![] };
        assert_eq!(one.detail(), "pinned tool drifted: `add` changed; the definitions are in its logs");
        let two = ToolDrift { changed: vec!["add".into()], missing: vec!["sub".into()] };
        assert_eq!(two.detail(), "pinned tools drifted: `add` changed, `sub` missing; the definitions are in its logs");
        assert_eq!(two.tools().collect::<Vec<_>>(), ["add", "sub"]);
        assert!(ToolDrift::default().is_empty() && !one.is_empty());
        let dead = Dead {
            reason: DeadReason::CapabilityBlocked,
            since: at(0),
            retry_allowed_at: None,
            detail: Some(one.detail()),
        };
        let record = DeadRecord::from(&dead);
        assert_eq!(
            record.short(),
            "capability_blocked, start to revive; pinned tool drifted: `add` changed; the definitions are in its logs"
        );
        assert_eq!(
            record.note(),
            "Failed (capability_blocked): revived only by an explicit start; pinned tool drifted: `add` changed; \
             the definitions are in its logs"
        );
    }
}
