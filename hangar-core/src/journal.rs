//! The journal's vocabulary: its config keys (`state_dir`, `journal`, `audit`, `telemetry`), what
//! it records ([`JournalEvent`], [`AuditEntry`]) and how it is read ([`AuditQuery`], pages).
//!
//! The supervisor owns the journal (an SQLite database in the state directory, written by it
//! alone); every other process reads it through the control socket with these types.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::record::StateChange;
use crate::reloaded::Reloaded;

/// `journal:`: how long entries are kept.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JournalConfig {
    /// Days an entry is kept; older ones are pruned. At least 1.
    #[serde(default = "default_retention_days")]
    #[schemars(range(min = 1))]
    pub retention_days: u32,
    /// The journal's size cap in megabytes: past it, the oldest entries are pruned first. At
    /// least 1.
    #[serde(default = "default_max_mb")]
    #[schemars(range(min = 1))]
    pub max_mb: u64,
}

impl Default for JournalConfig {
    fn default() -> Self {
        JournalConfig { retention_days: default_retention_days(), max_mb: default_max_mb() }
    }
}

impl JournalConfig {
    /// Both keep at least something: a day, a megabyte.
    pub fn check(&self) -> Result<(), crate::key_error::KeyError> {
        let at_least_one = |key: &str, value: u64, unit: &str| {
            (value < 1).then(|| crate::key_error::KeyError {
                key: format!("journal.{key}"),
                message: format!("must be at least 1 ({unit}), got {value}"),
            })
        };
        match at_least_one("retention_days", u64::from(self.retention_days), "a day")
            .or_else(|| at_least_one("max_mb", self.max_mb, "a megabyte"))
        {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }
}

fn default_retention_days() -> u32 {
    30
}

fn default_max_mb() -> u64 {
    512
}

/// `audit:`: what is kept of each call.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// Whether calls and admin actions are recorded at all (state changes, reloads and drift
    /// are recorded either way).
    #[serde(default = "enabled")]
    pub enabled: bool,
    /// What is kept of a call's arguments.
    #[serde(default)]
    pub arguments: ArgumentsKept,
    /// With `arguments: full`, the most bytes of an entry's arguments (their JSON text, after
    /// secrets are redacted) kept; longer ones are cut there and marked. From 64 to 1048576
    /// (a megabyte).
    #[serde(default = "default_max_argument_bytes")]
    #[schemars(range(min = *ARGUMENT_BYTES.start(), max = *ARGUMENT_BYTES.end()))]
    pub max_argument_bytes: usize,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            enabled: true,
            arguments: ArgumentsKept::default(),
            max_argument_bytes: default_max_argument_bytes(),
        }
    }
}

/// The default of `audit.max_argument_bytes`: 4 KiB.
fn default_max_argument_bytes() -> usize {
    4096
}

/// The smallest `audit.max_argument_bytes` accepted, and the largest (a megabyte).
const ARGUMENT_BYTES: std::ops::RangeInclusive<usize> = 64..=1 << 20;

impl AuditConfig {
    pub fn check(&self) -> Result<(), crate::key_error::KeyError> {
        if ARGUMENT_BYTES.contains(&self.max_argument_bytes) {
            return Ok(());
        }
        Err(crate::key_error::KeyError {
            key: "audit.max_argument_bytes".into(),
            message: format!(
                "expected a whole number of bytes from {} to {}, got {}",
                ARGUMENT_BYTES.start(),
                ARGUMENT_BYTES.end(),
                self.max_argument_bytes
            ),
        })
    }
}

fn enabled() -> bool {
    true
}

/// What the audit trail keeps of a call's arguments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ArgumentsKept {
    /// Nothing.
    #[default]
    None,
    /// `sha256:<hex>` of the arguments' canonical JSON (keys sorted, no whitespace).
    Digest,
    /// The arguments as the caller sent them, secrets redacted and cut at
    /// `audit.max_argument_bytes`.
    Full,
}

/// `telemetry:`: where spans are exported (OTLP over HTTP/protobuf); off when absent.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP receiver, an http(s) URL with a host and no credentials, query or
    /// fragment, e.g. `http://127.0.0.1:4318` (`/v1/traces` is appended). Default: none, no
    /// export.
    #[serde(default)]
    pub otlp_endpoint: Option<String>,
}

/// Where the state directory is when the config names none: systemd's `$STATE_DIRECTORY`, else
/// `$XDG_STATE_HOME/hangar`, else `./.hangar`. `env` is passed in (pure).
pub fn default_state_dir(env: impl Fn(&str) -> Option<String>) -> PathBuf {
    let set = |name: &str| env(name).filter(|v| !v.is_empty());
    if let Some(dir) = set("STATE_DIRECTORY") {
        // systemd may list several, separated by colons; the first is ours.
        return PathBuf::from(dir.split(':').next().unwrap_or(&dir));
    }
    if let Some(dir) = set("XDG_STATE_HOME") {
        return Path::new(&dir).join("hangar");
    }
    PathBuf::from(".hangar")
}

fn is_unset(id: &u64) -> bool {
    *id == 0
}

/// How a call ended, as the audit trail records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallOutcome {
    /// The upstream answered with a result.
    Ok,
    /// The upstream answered with a tool error (`isError: true`).
    IsError,
    /// The call failed; `error_type` says how (`forbidden`, `timeout`, `unknown_tool`, ...).
    Error,
}

/// One audited request: a tool call, a front-door request, or an admin action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// The journal id (the cursor). Inside a [`JournalEvent`] it is the event's, left out of the
    /// entry's own fields until read back (so it is written once).
    #[serde(default, skip_serializing_if = "is_unset")]
    pub id: u64,
    /// RFC 3339, milliseconds, UTC; like `id`, the event's.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub at: String,
    pub identity: String,
    pub profile: Option<String>,
    pub mcp_server: String,
    /// The tool, for `tools/call`.
    pub tool: Option<String>,
    /// `tools/call`, `prompts/get`, ..., or an admin action: `start`, `stop`, `restart`, `reload`.
    pub method: String,
    pub outcome: CallOutcome,
    pub error_type: Option<String>,
    pub duration_ms: f64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// As `audit.arguments` says: absent, `sha256:<hex>`, or the arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// The W3C trace id the request carried, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The profile's rule that decided the call (`profiles.<name>.rules[<n>]`), if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// What `redaction:` found in the answer, by name (never the values); empty: nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<String>,
    /// The person's approval the call waited for (a rule's `then: approve`): which, and who
    /// decided when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<Box<crate::approvals::ApprovalNote>>,
}

/// One journal entry as `/api/events` streams it: `id` is the event id (`Last-Event-ID`).
///
/// Its JSON is one object: `id`, `at` and the fields of `what` beside them. An audit entry has
/// `id` and `at` of its own, the event's: they are written once, and read back into both.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalEvent {
    pub id: u64,
    pub at: String,
    pub what: Happened,
}

impl Serialize for JournalEvent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        EventParts { id: self.id, at: &self.at, what: &self.what }.serialize(serializer)
    }
}

/// A [`JournalEvent`]'s parts, borrowed: serialized exactly as the event, streamed, nothing built
/// in between (the journal's writer serializes every entry this way, from its own keeping).
#[derive(Serialize)]
pub struct EventParts<'a> {
    pub id: u64,
    pub at: &'a str,
    #[serde(flatten)]
    pub what: &'a Happened,
}

impl<'de> Deserialize<'de> for JournalEvent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let object = serde_json::Map::deserialize(deserializer)?;
        let id = object.get("id").and_then(Value::as_u64).ok_or_else(|| D::Error::missing_field("id"))?;
        let at = object.get("at").and_then(Value::as_str).ok_or_else(|| D::Error::missing_field("at"))?.to_owned();
        let what = Happened::deserialize(Value::Object(object)).map_err(D::Error::custom)?;
        Ok(JournalEvent { id, at, what })
    }
}

/// What a journal entry records. `kind` is the SSE event name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Happened {
    /// A server changed state (with its `dead` record when it died).
    State(StateChange),
    /// Someone started, stopped or restarted a server. `identity` is empty (and left out) where
    /// a reader may not learn who did it (another identity's action, to a non-admin).
    Action {
        mcp_server: String,
        action: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        identity: String,
        profile: Option<String>,
    },
    /// The config was reloaded. As a non-admin reads it: only the servers its view sees, and
    /// `identity` empty (left out).
    Reload {
        #[serde(flatten)]
        changes: Reloaded,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        identity: String,
    },
    /// A server's tools no longer match what its config expects or pins.
    Drift { mcp_server: String, detail: String },
    /// An audited request (seen only by admins on `/api/events`).
    Audit(AuditEntry),
    /// A call waits for a person's approval, or its approval was decided, expired or given up
    /// (seen by admins, approvers and the caller who asked; never with the arguments).
    Approval { approval: Box<crate::approvals::Approval> },
    /// Entries were lost (the disk was full or too slow, a block was found corrupt, the file
    /// was empty at start); `dropped` says how many (0: unknown), `reason` why when it was not
    /// the disk.
    Gap {
        dropped: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl Happened {
    /// The SSE event name.
    pub fn kind(&self) -> &'static str {
        match self {
            Happened::State(_) => "state",
            Happened::Action { .. } => "action",
            Happened::Reload { .. } => "reload",
            Happened::Drift { .. } => "drift",
            Happened::Audit(_) => "audit",
            Happened::Approval { .. } => "approval",
            Happened::Gap { .. } => "gap",
        }
    }

    /// The server an entry is about, if it is about one (what a view filters on).
    pub fn mcp_server(&self) -> Option<&str> {
        match self {
            Happened::State(change) => Some(&change.mcp_server_id),
            Happened::Action { mcp_server, .. } | Happened::Drift { mcp_server, .. } => Some(mcp_server),
            Happened::Audit(entry) => Some(&entry.mcp_server),
            Happened::Approval { approval } => Some(&approval.mcp_server),
            Happened::Reload { .. } | Happened::Gap { .. } => None,
        }
    }
}

/// The most entries one page holds.
pub const MAX_PAGE: usize = 1000;
/// A page's size when the query names none.
pub const DEFAULT_PAGE: usize = 100;

/// `GET /api/audit`'s filters. Without `since`, the newest `limit` entries; with it, the entries
/// after that id, oldest first. Either way a page lists newest last.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AuditQuery {
    pub since: Option<u64>,
    pub limit: Option<usize>,
    pub identity: Option<String>,
    pub mcp_server: Option<String>,
    /// `ok`, `is_error`, `error`, or an error type (`forbidden`, `timeout`, ...).
    pub outcome: Option<String>,
    /// Entries recorded at or after this time (RFC 3339) only, read from there on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Entries recorded before this time (RFC 3339) only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

/// Journal events after `since` (or the newest page without it), as the caller's view sees
/// them (audit entries only for admins). With `follow`, the request stays open: each event from
/// `since` on comes as a [`ServerFrame::Notice`](crate::ipc::ServerFrame::Notice) (a
/// [`JournalEvent`]), replayed from the journal first, then live, until the caller cancels.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Events {
    pub since: Option<u64>,
    pub limit: Option<usize>,
    #[serde(default)]
    pub follow: bool,
}

/// Tool calls and their failures per minute over the last `minutes` (at most a day), as the
/// caller's view sees them. Answers [`Reply::Rates`](crate::ipc::Reply::Rates).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    pub minutes: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditPage {
    pub entries: Vec<AuditEntry>,
    /// The cursor to ask `since=` for what comes next (the last id returned, or the `since` asked).
    pub next: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventPage {
    pub events: Vec<JournalEvent>,
    pub next: u64,
}

/// Calls and failed calls in one minute (for the status page's chart).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MinuteCount {
    /// The minute's start, RFC 3339.
    pub at: String,
    pub calls: u64,
    /// Calls whose outcome was not `ok` (`is_error` or `error`).
    pub errors: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_dir_is_systemds_then_xdgs_then_the_working_directorys() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
        };
        assert_eq!(
            default_state_dir(env(&[("STATE_DIRECTORY", "/var/lib/hangar:/var/lib/other"), ("XDG_STATE_HOME", "/x")])),
            PathBuf::from("/var/lib/hangar")
        );
        assert_eq!(
            default_state_dir(env(&[("XDG_STATE_HOME", "/home/u/.local/state")])),
            PathBuf::from("/home/u/.local/state/hangar")
        );
        assert_eq!(default_state_dir(env(&[("STATE_DIRECTORY", "")])), PathBuf::from(".hangar"));
    }

    #[test]
    fn retention_and_size_cap_must_keep_something() {
        let error = |yaml: &str| crate::config::Config::parse(yaml).unwrap_err();
        let err = error("journal: {retention_days: 0}\nmcp_servers: {}\n");
        assert_eq!(err.key, "journal.retention_days", "{err:?}");
        let err = error("journal: {max_mb: 0}\nmcp_servers: {}\n");
        assert_eq!(err.key, "journal.max_mb", "{err:?}");
        let config =
            crate::config::Config::parse("journal: {retention_days: 1, max_mb: 1}\nmcp_servers: {}\n").unwrap();
        assert_eq!(config.journal, JournalConfig { retention_days: 1, max_mb: 1 });
        assert!(config.audit.enabled, "audit is on unless turned off");
    }

    #[test]
    fn an_event_reads_with_its_kind_beside_its_fields() {
        let event = JournalEvent { id: 7, at: "t".into(), what: Happened::Gap { dropped: 3, reason: None } };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json, serde_json::json!({"id": 7, "at": "t", "kind": "gap", "dropped": 3}));
        assert_eq!(serde_json::from_value::<JournalEvent>(json).unwrap(), event);
    }

    #[test]
    fn an_audit_event_names_its_id_and_time_once_and_reads_back_whole() {
        let entry = AuditEntry {
            id: 0,
            at: String::new(),
            identity: "ci".into(),
            profile: None,
            mcp_server: "m".into(),
            tool: Some("add".into()),
            method: "tools/call".into(),
            outcome: CallOutcome::Ok,
            error_type: None,
            duration_ms: 1.5,
            bytes_in: 2,
            bytes_out: 3,
            arguments: None,
            trace_id: None,
            rule: None,
            redacted: Vec::new(),
            approval: None,
        };
        let event = JournalEvent { id: 9, at: "t".into(), what: Happened::Audit(entry.clone()) };
        let text = serde_json::to_string(&event).unwrap();
        assert_eq!(text.matches("\"id\"").count(), 1, "{text}");
        let back = serde_json::from_str::<JournalEvent>(&text).unwrap();
        let whole = AuditEntry { id: 9, at: "t".into(), ..entry };
        assert_eq!(back, JournalEvent { id: 9, at: "t".into(), what: Happened::Audit(whole) });
    }
}
