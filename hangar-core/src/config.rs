//! The YAML config: its model, defaults and validation.
//!
//! Keys and defaults follow the Python `mcp-hangar`, so a config written for it with the keys
//! both share loads unchanged. Every error names the file, the key's path and what was expected.
//!
//! The doc comments on the config types here and in the blocks they embed (`access`, `limits`,
//! `journal`, `sandbox`, `cluster`, `shutdown`, `front_door`) are the reference of every key:
//! `config_reference` turns them into `docs/hangar.schema.json` and `docs/config.md`. Write each
//! key's type, default, bounds and effect there, for an operator.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::access::{AuthConfig, Profiles};
use crate::credential::{Credential, EnvValue, Sources};
use crate::credentials_config::CredentialsConfig;
use crate::front_door::{Names, Naming};
use crate::journal::{AuditConfig, JournalConfig, TelemetryConfig};
use crate::limits::Limits;
use crate::sandbox::SandboxSetting;
use crate::upstream_auth::UpstreamAuth;

// A problem at one key, defined below the config so that the blocks it checks can name it.
pub use crate::key_error::KeyError;

/// A loaded, validated config: `hangar.yaml`, every key optional (an empty file is a hangar with
/// no servers), unknown keys refused.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Who may call: named API keys and OAuth. Empty (the default): no authentication, and the
    /// API listens on loopback only.
    #[serde(default)]
    pub auth: AuthConfig,
    /// Profile name to what a caller with that profile sees and may do; a key or an OAuth
    /// group names its profile. Default: none.
    #[serde(default)]
    pub profiles: Profiles,
    /// What `/mcp` serves, and how: the hangar's own tools only, or the upstreams' too.
    #[serde(default)]
    pub tool_access: ToolAccess,
    /// Defaults for every server's recovery; a server may override any key.
    #[serde(default)]
    pub recovery: Recovery,
    /// Admission limits for the whole hangar (a server's own `limits` apply as well).
    #[serde(default)]
    pub limits: Limits,
    /// The state directory, where the journal (audit, events) lives. Default: systemd's
    /// `$STATE_DIRECTORY`, else `$XDG_STATE_HOME/hangar`, else `./.hangar`.
    #[serde(default)]
    pub state_dir: Option<PathBuf>,
    /// How long the journal keeps its entries, and how large it may grow.
    #[serde(default)]
    pub journal: JournalConfig,
    /// What the audit trail keeps of each call.
    #[serde(default)]
    pub audit: AuditConfig,
    /// Secrets and personal data kept out of what upstreams return (tool results, resource
    /// contents, prompt texts): built-in detectors and patterns of your own. Default: off.
    #[serde(default)]
    pub redaction: crate::redaction::RedactionConfig,
    /// How calls a profile's rule marks `approve` wait for a person's decision.
    #[serde(default)]
    pub approvals: crate::approvals::ApprovalsConfig,
    /// Gateway-side tasks (a call the client asked to run as a task): how many one identity
    /// may hold.
    #[serde(default)]
    pub tasks: TasksConfig,
    /// The key that seals the upstream credentials the hangar stores.
    #[serde(default)]
    pub credentials: CredentialsConfig,
    /// Span export (OTLP over HTTP); off unless an endpoint is set.
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// The sandbox of every spawned server (`subprocess` and `http`) that does not set its own
    /// `sandbox:`. Default: none (no sandbox).
    #[serde(default)]
    pub sandbox_defaults: Option<SandboxSetting>,
    /// How a stop drains the calls in flight (`shutdown.grace_s`).
    #[serde(default)]
    pub shutdown: crate::shutdown::ShutdownConfig,
    /// This hangar's place in a fleet of hangars behind one Service (round robin, no
    /// affinity). Default: none, a hangar on its own.
    #[serde(default)]
    pub cluster: Option<crate::cluster::ClusterConfig>,
    /// Server id to the upstream MCP server it names, in config order (the order every surface
    /// lists them in). An id is 1 to 64 letters, digits, `_`, `-` and `.`, starting with a
    /// letter or digit. `providers:` is accepted as an old name of this key. Default: none.
    #[serde(default, alias = "providers")]
    #[schemars(extend("propertyNames" = {"pattern": SERVER_ID_PATTERN, "maxLength": 64}))]
    pub mcp_servers: IndexMap<String, ServerConfig>,
}

/// `tool_access:`: what `/mcp` serves, and how.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolAccess {
    /// Which tools `/mcp` serves.
    #[serde(default)]
    pub mode: ToolAccessMode,
    /// How the front door names upstream tools, prompts and resources.
    #[serde(default)]
    pub names: Names,
    /// Whether the front door passes an upstream's JSON-RPC error message to the client that
    /// called it (bounded, control characters stripped), or keeps the hangar's own words.
    #[serde(default)]
    pub upstream_errors: UpstreamErrors,
    /// Whether the front door also passes an upstream error's `data` (the protocol's own
    /// codes' data always pass). Default: `false`.
    #[serde(default)]
    pub upstream_error_data: bool,
    /// Legacy (2025-11-25 and older) sessions: how long one lives idle, how many are kept.
    #[serde(default)]
    pub sessions: SessionsConfig,
    /// Seconds a question an upstream asks a client mid-call (sampling, elicitation, roots)
    /// waits for the client's answer before the upstream is answered with an error; greater
    /// than 0, at most a day. Default: 600 ([`DEFAULT_CLIENT_ANSWER_TIMEOUT_S`]).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0, "maximum" = MAX_CLIENT_ANSWER_TIMEOUT_S, "default" = DEFAULT_CLIENT_ANSWER_TIMEOUT_S))]
    pub client_answer_timeout_s: Option<f64>,
}

/// The default of `tool_access.sessions.idle_ttl_s`: an hour.
pub const DEFAULT_SESSION_IDLE_TTL_S: f64 = 3600.0;
/// The default of `tool_access.sessions.max_sessions`.
pub const DEFAULT_MAX_SESSIONS: usize = 10_000;
/// The default of `tool_access.sessions.max_per_identity`.
pub const DEFAULT_MAX_SESSIONS_PER_IDENTITY: usize = 1_000;
/// The default of `tool_access.client_answer_timeout_s` (a person may be answering).
pub const DEFAULT_CLIENT_ANSWER_TIMEOUT_S: f64 = 600.0;
/// The longest `tool_access.sessions.idle_ttl_s` accepted: a week.
const MAX_SESSION_IDLE_TTL_S: f64 = 7.0 * 24.0 * 3600.0;
/// The most sessions `tool_access.sessions.max_sessions` may keep (each holds some state).
const MAX_MAX_SESSIONS: usize = 1_000_000;
/// The longest `tool_access.client_answer_timeout_s` accepted: a day.
pub const MAX_CLIENT_ANSWER_TIMEOUT_S: f64 = 24.0 * 3600.0;

/// `tool_access.sessions`: the legacy (2025-11-25 and older) sessions the API keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionsConfig {
    /// Seconds a session lives without use (a held stream counts as use); greater than 0, at
    /// most a week. Default: 3600.
    #[schemars(extend("exclusiveMinimum" = 0, "maximum" = MAX_SESSION_IDLE_TTL_S, "default" = DEFAULT_SESSION_IDLE_TTL_S))]
    pub idle_ttl_s: Option<f64>,
    /// The most sessions kept at once; opening one more forgets the idlest session of the
    /// identity that holds the most. 1 to 1,000,000; default: 10,000.
    #[schemars(range(min = 1, max = MAX_MAX_SESSIONS), extend("default" = DEFAULT_MAX_SESSIONS))]
    pub max_sessions: Option<usize>,
    /// The most sessions one identity may hold at once; opening one more is refused
    /// (`concurrency_limited`, HTTP 429) until one of its own ends or expires. 1 to 1,000,000;
    /// default: 1,000.
    #[schemars(range(min = 1, max = MAX_MAX_SESSIONS), extend("default" = DEFAULT_MAX_SESSIONS_PER_IDENTITY))]
    pub max_per_identity: Option<usize>,
}

impl SessionsConfig {
    pub fn idle_ttl(&self) -> Duration {
        Duration::from_secs_f64(self.idle_ttl_s.unwrap_or(DEFAULT_SESSION_IDLE_TTL_S))
    }

    pub fn max_sessions(&self) -> usize {
        self.max_sessions.unwrap_or(DEFAULT_MAX_SESSIONS)
    }

    pub fn max_per_identity(&self) -> usize {
        self.max_per_identity.unwrap_or(DEFAULT_MAX_SESSIONS_PER_IDENTITY)
    }
}

impl ToolAccess {
    /// `client_answer_timeout_s` as a duration.
    pub fn client_answer_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.client_answer_timeout_s.unwrap_or(DEFAULT_CLIENT_ANSWER_TIMEOUT_S))
    }

    fn check(&self) -> Result<(), KeyError> {
        let within = |key: &str, value: Option<f64>, max: f64| match value {
            Some(v) if !(v.is_finite() && v > 0.0 && v <= max) => Err(KeyError {
                key: format!("tool_access.{key}"),
                message: format!("expected seconds greater than 0 and at most {max} (fractions allowed), got {v}"),
            }),
            _ => Ok(()),
        };
        within("sessions.idle_ttl_s", self.sessions.idle_ttl_s, MAX_SESSION_IDLE_TTL_S)?;
        within("client_answer_timeout_s", self.client_answer_timeout_s, MAX_CLIENT_ANSWER_TIMEOUT_S)?;
        for (key, value) in
            [("max_sessions", self.sessions.max_sessions), ("max_per_identity", self.sessions.max_per_identity)]
        {
            if let Some(n) = value.filter(|n| !(1..=MAX_MAX_SESSIONS).contains(n)) {
                return Err(KeyError {
                    key: format!("tool_access.sessions.{key}"),
                    message: format!("expected a whole number from 1 to {MAX_MAX_SESSIONS}, got {n}"),
                });
            }
        }
        Ok(())
    }
}

/// The default of `tasks.max_per_identity`: a quarter of the book.
pub const DEFAULT_MAX_TASKS_PER_IDENTITY: usize = 256;
/// The most tasks the supervisor's book keeps at once, over every identity.
pub const MAX_LIVE_TASKS: usize = 1024;

/// `tasks:`: gateway-side tasks (SEP-2663), which the supervisor keeps for every identity in
/// one book of [`MAX_LIVE_TASKS`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TasksConfig {
    /// The most unfinished tasks one identity holds at once; at it, a call that may become a
    /// task is refused before it runs (`concurrency_limited`); its finished tasks give way to
    /// its new ones. 1 to 1024 (the book's size); default: 256.
    #[schemars(range(min = 1, max = MAX_LIVE_TASKS), extend("default" = DEFAULT_MAX_TASKS_PER_IDENTITY))]
    pub max_per_identity: Option<usize>,
}

impl TasksConfig {
    pub fn max_per_identity(&self) -> usize {
        self.max_per_identity.unwrap_or(DEFAULT_MAX_TASKS_PER_IDENTITY)
    }

    fn check(&self) -> Result<(), KeyError> {
        match self.max_per_identity {
            Some(n) if !(1..=MAX_LIVE_TASKS).contains(&n) => Err(KeyError {
                key: "tasks.max_per_identity".into(),
                message: format!("expected a whole number from 1 to {MAX_LIVE_TASKS}, got {n}"),
            }),
            _ => Ok(()),
        }
    }
}

/// `tool_access.upstream_errors`. The `hangar_*` tools and every other surface never show an
/// upstream's text, whatever this says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamErrors {
    /// The front door is a transparent proxy: the client addressed that upstream itself.
    #[default]
    Pass,
    /// The strict rule everywhere: "the upstream answered with JSON-RPC error <code>".
    Hide,
}

/// `tool_access.mode`: which tools `/mcp` serves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolAccessMode {
    /// Only the `hangar_*` tools are served at `/mcp`.
    #[default]
    Egress,
    /// The upstreams' own tools are served too.
    FrontDoor,
}

/// Restart policy after a degradation. Every key optional so a server can override a few: a
/// server's own key, else the top-level `recovery:`'s, else the built-in default.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Recovery {
    /// Restarts tried after a degradation before the server is left dead. Default: 3.
    #[schemars(extend("default" = 3))]
    pub max_retries: Option<u32>,
    /// Seconds before the first restart; greater than 0, at most a year. Default: 5.
    #[schemars(extend("exclusiveMinimum" = 0, "maximum" = MAX_SECONDS, "default" = 5.0))]
    pub initial_backoff_s: Option<f64>,
    /// What each wait is multiplied by for the next restart; 1 to 100. Default: 2.
    #[schemars(range(min = 1.0, max = 100.0), extend("default" = 2.0))]
    pub backoff_multiplier: Option<f64>,
    /// The longest wait between restarts, in seconds; greater than 0, at most a year. Default: 60.
    #[schemars(extend("exclusiveMinimum" = 0, "maximum" = MAX_SECONDS, "default" = 60.0))]
    pub max_backoff_s: Option<f64>,
}

/// A recovery policy with every default filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveryPolicy {
    pub max_retries: u32,
    pub initial_backoff: Duration,
    pub backoff_multiplier: f64,
    pub max_backoff: Duration,
}

impl Recovery {
    /// `self` over `defaults` over the built-in defaults.
    pub fn resolve(&self, defaults: &Recovery) -> RecoveryPolicy {
        let secs = |v: Option<f64>, d: Option<f64>, builtin: f64| Duration::from_secs_f64(v.or(d).unwrap_or(builtin));
        RecoveryPolicy {
            max_retries: self.max_retries.or(defaults.max_retries).unwrap_or(3),
            initial_backoff: secs(self.initial_backoff_s, defaults.initial_backoff_s, 5.0),
            backoff_multiplier: self.backoff_multiplier.or(defaults.backoff_multiplier).unwrap_or(2.0),
            max_backoff: secs(self.max_backoff_s, defaults.max_backoff_s, 60.0),
        }
    }
}

/// `mcp_servers.<id>.mode`: how the hangar reaches a server, and whether it runs it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// A stdio child.
    #[default]
    Subprocess,
    /// A managed child serving MCP over HTTP at `endpoint`.
    Http,
    /// Not spawned: only the endpoint.
    Remote,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        crate::wire_name::of(&self)
    }
}

/// One entry of `mcp_servers:`: an upstream MCP server, how it is reached, watched and boxed.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = mode_rules)]
pub struct ServerConfig {
    /// How the hangar reaches the server, and whether it runs it.
    #[serde(default)]
    pub mode: Mode,
    /// Program and arguments, `[program, arg, ...]`; never a shell string. Required by
    /// `subprocess` and `http`, refused by `remote`.
    #[serde(default)]
    pub command: Vec<String>,
    /// More arguments, appended to `command` when the config is loaded (the Python
    /// `mcp-hangar` writes `command: [program]` and `args: [...]`). Always empty after loading.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment for the child: variable name (not empty, without `=`) to value, the
    /// text itself or a credential, `{file: PATH}` or `{env: NAME}` with an optional `prefix`
    /// (read at start and on each reload). Values are secrets as far as logs are concerned.
    /// Refused by `remote`, which is not spawned (give its credentials in `auth.headers`).
    /// Default: none.
    #[serde(default)]
    #[schemars(extend("propertyNames" = {"minLength": 1, "pattern": "^[^=\\u0000]*$"}))]
    pub env: IndexMap<String, EnvValue>,
    /// The server's MCP endpoint, an `http://` or `https://` URL such as
    /// `http://127.0.0.1:8931/mcp`. Required by `http` and `remote`, refused by `subprocess`.
    #[schemars(regex(pattern = r"^https?://"), length(min = 10))]
    pub endpoint: Option<String>,
    /// How the hangar proves itself to the upstream: exactly one of `headers` (static
    /// credentials sent on every request), `oauth` or `token_exchange` (the last two not yet
    /// supported). Only for `http` and `remote`. The caller's own `Authorization`, API key or
    /// cookie never reaches an upstream.
    pub auth: Option<UpstreamAuth>,
    /// Free text for operators; shown in the server's details (`meta`).
    pub description: Option<String>,
    /// Failed health checks in a row that degrade a ready server (then `recovery` restarts
    /// it); 1 or more.
    #[serde(default = "defaults::max_consecutive_failures")]
    #[schemars(range(min = 1))]
    pub max_consecutive_failures: u32,
    /// Seconds between the prober's health checks of a ready server; greater than 0, at most
    /// a year.
    #[serde(default = "defaults::health_check_interval_s")]
    #[schemars(extend("exclusiveMinimum" = 0, "maximum" = MAX_SECONDS))]
    pub health_check_interval_s: f64,
    /// Seconds one health check may take before it counts as failed; greater than 0, at most
    /// a year.
    #[serde(default = "defaults::probe_timeout_s")]
    #[schemars(extend("exclusiveMinimum" = 0, "maximum" = MAX_SECONDS))]
    pub probe_timeout_s: f64,
    /// Seconds a starting server has to answer MCP's `initialize`; greater than 0, at most a
    /// year.
    #[serde(default = "defaults::handshake_timeout_s")]
    #[schemars(extend("exclusiveMinimum" = 0, "maximum" = MAX_SECONDS))]
    pub handshake_timeout_s: f64,
    /// Seconds a ready server may go unused before it is stopped (it starts again on the next
    /// call); 0 or more, 0 keeping it running however long it is unused.
    #[serde(default = "defaults::idle_ttl_s")]
    #[schemars(range(min = 0.0))]
    pub idle_ttl_s: f64,
    /// What the server may declare, and what happens when it declares more.
    #[serde(default)]
    pub capabilities: Capabilities,
    /// This server's restart policy, key by key over the top-level `recovery:`.
    #[serde(default)]
    pub recovery: Recovery,
    /// Admission limits for this server alone.
    #[serde(default)]
    pub limits: Limits,
    /// The prefix of this server's qualified front-door names (`<prefix>__<name>`), instead of
    /// its id; it follows the rules of a server id, and no two servers share a prefix.
    #[schemars(regex(pattern = SERVER_ID_PATTERN), length(max = 64))]
    pub expose_as: Option<String>,
    /// What the kernel lets the server's process do. Default: `sandbox_defaults:`, else none;
    /// refused for `mode: remote`, which is not spawned.
    // After loading, never `Inherit`: see `ServerConfig::sandbox`.
    #[serde(default)]
    #[schemars(extend("default" = null))]
    pub sandbox: SandboxSetting,
    /// Whether one process serves every client (`shared`), or each caller identity
    /// (`per_identity`) or client session (`per_session`) gets an instance of its own: its own
    /// process, sandbox, private `$HOME` and `/tmp`, limits and log, started on its owner's
    /// first use and stopped after `idle_ttl_s`. Only for spawned servers (`subprocess`, `http`).
    #[serde(default)]
    pub isolation: crate::isolation::Isolation,
    /// The most instances an isolated server runs at once, 1 to 4096; past it the least
    /// recently used idle one stops, and with none idle a new owner's call is refused
    /// (`instances_exhausted`).
    #[serde(default = "defaults::max_instances")]
    #[schemars(range(min = 1, max = 4096))]
    pub max_instances: u32,
}

/// What each `mode` needs and refuses (checked by [`Config::validate`]), for the schema:
/// `subprocess` (also when `mode` is absent) a `command` and no `endpoint` or `auth`; `http`
/// both; `remote` an `endpoint`, and no `command`, `args`, `env` or `sandbox`.
fn mode_rules(schema: &mut schemars::Schema) {
    // `mode` absent passes every `properties` test: only `subprocess`, the default, tests so.
    let mode = |mode: &str| serde_json::json!({"properties": {"mode": {"const": mode}}});
    let written = |mode: &str| serde_json::json!({"required": ["mode"], "properties": {"mode": {"const": mode}}});
    let command = serde_json::json!({"type": "array", "minItems": 1});
    let endpoint = serde_json::json!({"type": "string"});
    let rules = serde_json::json!([
        {"if": mode("subprocess"), "then": {
            "required": ["command"],
            "properties": {"command": command, "endpoint": {"type": "null"}, "auth": {"type": "null"}}
        }},
        {"if": written("http"), "then": {
            "required": ["command", "endpoint"],
            "properties": {"command": command, "endpoint": endpoint}
        }},
        {"if": written("remote"), "then": {
            "required": ["endpoint"],
            "properties": {
                "command": {"maxItems": 0}, "args": {"maxItems": 0}, "env": {"maxProperties": 0}, "endpoint": endpoint
            },
            "not": {"required": ["sandbox"]}
        }},
    ]);
    schema.insert("allOf".into(), rules);
}

mod defaults {
    pub fn max_consecutive_failures() -> u32 {
        3
    }
    pub fn health_check_interval_s() -> f64 {
        60.0
    }
    pub fn probe_timeout_s() -> f64 {
        5.0
    }
    pub fn handshake_timeout_s() -> f64 {
        10.0
    }
    pub fn idle_ttl_s() -> f64 {
        300.0
    }
    pub fn max_instances() -> u32 {
        crate::isolation::DEFAULT_MAX_INSTANCES
    }
}

impl ServerConfig {
    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.handshake_timeout_s)
    }
    pub fn probe_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.probe_timeout_s)
    }
    pub fn health_check_interval(&self) -> Duration {
        Duration::from_secs_f64(self.health_check_interval_s)
    }
    /// `None` when idle stop is off.
    pub fn idle_ttl(&self) -> Option<Duration> {
        (self.idle_ttl_s > 0.0).then(|| Duration::from_secs_f64(self.idle_ttl_s))
    }
    /// The sandbox its process runs in, if any.
    pub fn sandbox(&self) -> Option<&crate::sandbox::Sandbox> {
        self.sandbox.sandbox()
    }

    /// The environment its process gets from the config, credentials read.
    pub fn env_values(&self) -> impl Iterator<Item = (&str, &str)> {
        self.env.iter().map(|(name, value)| (name.as_str(), value.value()))
    }

    /// The headers sent with every request to it (`auth.headers`), credentials read.
    pub fn auth_headers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.auth.iter().flat_map(UpstreamAuth::headers).map(|(name, credential)| (name, credential.value().expose()))
    }

    /// Every value of its config that logs and audit entries are cleaned of: env values, and
    /// each credential both as sent and as read (without its prefix).
    pub fn secrets(&self) -> Vec<String> {
        let mut secrets: Vec<String> = self.env.values().map(|value| value.value().to_owned()).collect();
        for credential in self.credentials() {
            secrets.push(credential.value().expose().to_owned());
            secrets.push(credential.bare().expose().to_owned());
        }
        secrets.retain(|secret| !secret.is_empty());
        secrets.sort();
        secrets.dedup();
        secrets
    }

    /// The files its credentials are read from, as written (`env:` and `auth.headers`).
    pub fn credential_files(&self) -> impl Iterator<Item = &Path> {
        self.credentials().filter_map(|credential| credential.file.as_deref())
    }

    /// Every file holding a secret of this server, where it is: its credentials' files (a
    /// relative one under `credentials_directory`) and its OAuth client's `secret_file`.
    pub fn secret_paths(&self, credentials_directory: Option<&Path>) -> impl Iterator<Item = PathBuf> {
        let files =
            self.credential_files().filter_map(move |file| crate::credential::file_path(file, credentials_directory));
        let clients = self.auth.iter().flat_map(|auth| {
            let oauth = auth.oauth.as_ref().and_then(|oauth| oauth.registered());
            let exchange = auth.token_exchange.as_ref().map(|exchange| &exchange.client);
            oauth.into_iter().chain(exchange)
        });
        files.chain(clients.map(|client| client.secret_file.clone()))
    }

    /// The variables of the hangar's environment its credentials are read from.
    pub fn credential_variables(&self) -> impl Iterator<Item = &str> {
        self.credentials().filter_map(|credential| credential.env.as_deref())
    }

    /// Each credential it names (`env:` and `auth.headers`).
    fn credentials(&self) -> impl Iterator<Item = &Credential> {
        let env = self.env.values().filter_map(|value| match value {
            EnvValue::Credential(credential) => Some(credential),
            EnvValue::Text(_) => None,
        });
        env.chain(self.auth.iter().flat_map(UpstreamAuth::headers).map(|(_, credential)| credential))
    }

    /// Each credential it names, with its key under the server (`env.TOKEN`,
    /// `auth.headers.Authorization`).
    fn credentials_mut(&mut self) -> Vec<(String, &mut Credential)> {
        let env = self.env.iter_mut().filter_map(|(name, value)| match value {
            EnvValue::Credential(credential) => Some((format!("env.{name}"), credential)),
            EnvValue::Text(_) => None,
        });
        let headers = self
            .auth
            .iter_mut()
            .flat_map(|auth| auth.headers.iter_mut().flatten())
            .map(|(name, credential)| (format!("auth.headers.{name}"), credential));
        env.chain(headers).collect()
    }
}

/// `mcp_servers.<id>.capabilities`: what a server may declare.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Capabilities {
    /// What happens when the server declares a tool outside `tools.expected_tools`.
    #[serde(default)]
    pub enforcement_mode: EnforcementMode,
    /// The tools it is expected to declare, and the declarations pinned.
    #[serde(default)]
    pub tools: ToolCapabilities,
}

/// `mcp_servers.<id>.capabilities.tools`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCapabilities {
    /// The tool names the server may declare. Default: none given, any tool is allowed.
    pub expected_tools: Option<Vec<String>>,
    /// Tool name to the digest of its reviewed declaration; a pinned
    /// tool whose declaration changes, or that disappears, has drifted. A digest is `sha256:`
    /// and 64 lowercase hex digits, as `hangar pin` prints it. Default: nothing pinned.
    #[serde(default)]
    #[schemars(extend("additionalProperties" = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}))]
    pub pinned: Option<IndexMap<String, String>>,
}

/// `mcp_servers.<id>.capabilities.enforcement_mode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EnforcementMode {
    /// Refuse to serve a server with tools outside `expected_tools`.
    #[default]
    Block,
    /// Keep serving, and record the violation.
    Alert,
}

/// The largest config file read: far beyond any real hangar's (a thousand servers take about
/// 200 KiB), small enough that a wrong path (a log, a disk image) is refused at once.
pub const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// How long reading the config may take before it is given up (a hung network file system).
pub const CONFIG_READ_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: cannot read the config: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: cannot read the config: not a regular file (it is {what})")]
    NotRegular { path: PathBuf, what: &'static str },
    #[error("{path}: cannot read the config: it is larger than the limit of {} MiB", MAX_CONFIG_BYTES / 1024 / 1024)]
    TooLarge { path: PathBuf },
    #[error("{path}: cannot read the config: no answer within {} s (a hung file system?)", .after.as_secs())]
    TimedOut { path: PathBuf, after: Duration },
    #[error("{path}: cannot read the config: an earlier read of it is still blocked")]
    StillBlocked { path: PathBuf },
    #[error("{path}: {key}: {message}")]
    Invalid { path: PathBuf, key: String, message: String },
}

impl Config {
    /// Reads, parses and validates the config at `path`: a regular file (a symlink to one is
    /// fine) of at most [`MAX_CONFIG_BYTES`], read within [`CONFIG_READ_TIMEOUT`]. It blocks
    /// the calling thread for at most that long (async callers run it on a blocking thread).
    /// Then every credential it names is read ([`Config::resolve_credentials`]): one that cannot
    /// be read is an invalid config, named by its key.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = read_config_text(path)?;
        let invalid = |e: KeyError| ConfigError::Invalid { path: path.to_owned(), key: e.key, message: e.message };
        let mut config = Config::parse(&text).map_err(invalid)?;
        config.resolve_credentials(&Sources::of_process()).map_err(invalid)?;
        Ok(config)
    }

    /// Reads every credential the servers name (`env:` values and `auth.headers`) from
    /// `sources`; the first that cannot be read, or cannot go in a header, is refused at its key
    /// (`mcp_servers.gh.auth.headers.Authorization.file`), in words that never hold it.
    pub fn resolve_credentials(&mut self, sources: &Sources<'_>) -> Result<(), KeyError> {
        for (id, server) in &mut self.mcp_servers {
            for (key, credential) in server.credentials_mut() {
                credential.resolve(sources).map_err(|unreadable| KeyError {
                    key: format!("mcp_servers.{id}.{key}.{}", unreadable.key),
                    message: unreadable.message,
                })?;
            }
            if let Some(auth) = &server.auth {
                auth.check_values(&format!("mcp_servers.{id}.auth"))?;
            }
        }
        Ok(())
    }

    /// Parses and validates YAML text. An error quotes the file within bounds: a value or key
    /// of megabytes is not repeated whole on every surface that shows the error.
    pub fn parse(text: &str) -> Result<Config, KeyError> {
        Config::parse_unbounded(text).map_err(|err| KeyError {
            key: crate::echo::bounded_to(&err.key, MAX_ERROR_KEY_BYTES).into_owned(),
            message: crate::echo::bounded_to(&err.message, MAX_ERROR_MESSAGE_BYTES).into_owned(),
        })
    }

    fn parse_unbounded(text: &str) -> Result<Config, KeyError> {
        // Before deserializing, which would keep the last of two keys without a word, take time
        // quadratic in the nesting, and copy every aliased node at each alias.
        if let Some(problem) = crate::yaml_keys::find_problem(text) {
            return Err(yaml_problem(problem));
        }
        let mut config: Config = if text.trim().is_empty() {
            // An empty file is a hangar with no servers, not a parse error.
            Config {
                auth: AuthConfig::default(),
                profiles: Profiles::default(),
                tool_access: ToolAccess::default(),
                recovery: Recovery::default(),
                limits: Limits::default(),
                state_dir: None,
                journal: JournalConfig::default(),
                audit: AuditConfig::default(),
                redaction: Default::default(),
                approvals: Default::default(),
                tasks: TasksConfig::default(),
                credentials: CredentialsConfig::default(),
                telemetry: TelemetryConfig::default(),
                sandbox_defaults: None,
                shutdown: crate::shutdown::ShutdownConfig::default(),
                cluster: None,
                mcp_servers: IndexMap::new(),
            }
        } else {
            let deserializer = serde_norway::Deserializer::from_str(text);
            serde_path_to_error::deserialize(deserializer).map_err(|err| {
                let key = err.path().to_string();
                let message = err.into_inner().to_string();
                let message = without_path_prefix(&message, &key).to_owned();
                KeyError { key: if key == "." { "(top level)".into() } else { key }, message }
            })?
        };
        for (name, server) in &mut config.mcp_servers {
            if !server.args.is_empty() {
                if server.command.is_empty() {
                    return Err(KeyError {
                        key: format!("mcp_servers.{name}.args"),
                        message: "`args` are appended to `command`, which is missing".into(),
                    });
                }
                let args = std::mem::take(&mut server.args);
                server.command.extend(args);
            }
        }
        check_sandboxes(&config)?;
        for server in config.mcp_servers.values_mut() {
            // Defaults reach only what is spawned; a remote server's own block was refused above.
            let defaults = if server.mode == Mode::Remote { None } else { config.sandbox_defaults.as_ref() };
            server.sandbox = std::mem::take(&mut server.sandbox).or_defaults(defaults);
        }
        config.validate()?;
        Ok(config)
    }

    /// Refuses a sandbox whose `filesystem` grants would open one of `protected` (the control
    /// socket's directory, the state directory: places only the running supervisor knows, so
    /// it checks them after loading and on every reload) to the box. `sandbox_defaults:` is
    /// named first, so a server that only inherits it is not blamed. `resolve` follows
    /// symbolic links (the caller's I/O; nothing here touches the file system).
    pub fn check_grants(
        &self,
        protected: &[(&str, PathBuf, bool)],
        resolve: impl Fn(&Path) -> PathBuf,
    ) -> Result<(), KeyError> {
        let defaults = self.sandbox_defaults.as_ref().and_then(SandboxSetting::sandbox);
        let servers =
            self.mcp_servers.iter().map(|(id, server)| (format!("mcp_servers.{id}.sandbox"), server.sandbox()));
        for (at, sandbox) in [("sandbox_defaults".to_owned(), defaults)].into_iter().chain(servers) {
            if let Some((key, message)) = sandbox.and_then(|sandbox| sandbox.grant_over(protected, &resolve)) {
                return Err(KeyError { key: format!("{at}.{key}"), message });
            }
        }
        Ok(())
    }

    /// The front door's naming settings: `tool_access.names` and every server's `expose_as`.
    pub fn naming(&self) -> Naming {
        Naming {
            names: self.tool_access.names,
            expose_as: self
                .mcp_servers
                .iter()
                .filter_map(|(id, server)| Some((id.clone(), server.expose_as.clone()?)))
                .collect(),
        }
    }

    fn validate(&self) -> Result<(), KeyError> {
        self.check_keys_and_profiles()?;
        if let Some(oauth) = &self.auth.oauth {
            crate::access::validate_oauth(oauth, &self.profiles)
                .map_err(|invalid| KeyError { key: invalid.key, message: invalid.message })?;
        }
        check_recovery("recovery", &self.recovery)?;
        check_limits("limits", &self.limits)?;
        self.tool_access.check()?;
        self.tasks.check()?;
        self.approvals.check()?;
        self.credentials.check()?;
        self.journal.check()?;
        self.audit.check()?;
        for (name, server) in &self.mcp_servers {
            let at = |key: &str| format!("mcp_servers.{name}.{key}");
            if !valid_server_id(name) {
                return Err(KeyError {
                    key: format!("mcp_servers.{name}"),
                    message: "a server id is 1 to 64 characters of letters, digits, '_', '-' and '.', starting with a letter or digit".into(),
                });
            }
            match server.mode {
                Mode::Subprocess => {
                    if server.command.is_empty() || server.command[0].is_empty() {
                        return Err(KeyError {
                            key: at("command"),
                            message: "a subprocess server needs `command`, a non-empty list: [program, arg, ...]"
                                .into(),
                        });
                    }
                    if server.endpoint.is_some() {
                        return Err(KeyError {
                            key: at("endpoint"),
                            message: "`endpoint` belongs to `mode: http` or `mode: remote`, not `subprocess`".into(),
                        });
                    }
                }
                Mode::Http | Mode::Remote => {
                    let endpoint = server.endpoint.as_deref().unwrap_or_default();
                    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) || endpoint.len() < 10 {
                        return Err(KeyError {
                            key: at("endpoint"),
                            message: format!(
                                "`mode: {}` needs `endpoint`, an http:// or https:// URL such as http://127.0.0.1:8931/mcp",
                                server.mode.as_str()
                            ),
                        });
                    }
                    match (server.mode, server.command.first()) {
                        (Mode::Http, None) => {
                            return Err(KeyError {
                                key: at("command"),
                                message: "`mode: http` needs `command`, the server to spawn: [program, arg, ...]"
                                    .into(),
                            });
                        }
                        (Mode::Remote, Some(_)) => {
                            return Err(KeyError { key: at("command"), message: "`mode: remote` is not spawned: remove `command`, or use `mode: http` for a managed server".into() });
                        }
                        _ => {}
                    }
                }
            }
            if server.mode == Mode::Remote && !server.env.is_empty() {
                return Err(KeyError {
                    key: at("env"),
                    message: "`mode: remote` is not spawned, so `env` would reach nothing: give its credentials in `auth.headers`".into(),
                });
            }
            if let Some(auth) = &server.auth {
                if server.mode == Mode::Subprocess {
                    return Err(KeyError {
                        key: at("auth"),
                        message: "`auth` is for `mode: http` and `mode: remote` servers, reached over HTTP; give a subprocess server its credentials in `env`".into(),
                    });
                }
                auth.check(&at("auth"))?;
                if auth.per_user() && self.credentials.public_url.is_none() {
                    return Err(KeyError {
                        key: "credentials.public_url".into(),
                        message: format!(
                            "server `{name}` has `auth.oauth.per: user`: its users connect in a browser, so the hangar needs its address as the browser reaches it (such as https://hangar.example.com)"
                        ),
                    });
                }
            }
            if let Some(endpoint) = &server.endpoint
                && url::Url::parse(endpoint).is_ok_and(|url| !url.username().is_empty() || url.password().is_some())
            {
                // The URL is not repeated: it holds the password.
                return Err(KeyError {
                    key: at("endpoint"),
                    message: "put no user or password in the URL: give the credential as a header in `auth.headers` (e.g. `Authorization: {file: PATH, prefix: \"Basic \"}`)".into(),
                });
            }
            for key in server.env.keys() {
                if key.is_empty() || key.contains('=') || key.contains('\0') {
                    return Err(KeyError {
                        key: at("env"),
                        message: format!("`{key}` is not a valid environment variable name"),
                    });
                }
            }
            positive(&at("health_check_interval_s"), server.health_check_interval_s)?;
            positive(&at("probe_timeout_s"), server.probe_timeout_s)?;
            positive(&at("handshake_timeout_s"), server.handshake_timeout_s)?;
            if !(server.idle_ttl_s.is_finite() && server.idle_ttl_s >= 0.0) {
                return Err(KeyError {
                    key: at("idle_ttl_s"),
                    message: "expected seconds, 0 or more (0 turns idle stop off)".into(),
                });
            }
            if !(1..=crate::isolation::MAX_MAX_INSTANCES).contains(&server.max_instances) {
                return Err(KeyError {
                    key: at("max_instances"),
                    message: "expected a whole number, 1 to 4096".into(),
                });
            }
            if server.mode == Mode::Remote && !server.isolation.is_shared() {
                return Err(KeyError {
                    key: at("isolation"),
                    message: "a `mode: remote` server runs no process of the hangar's to isolate: give each caller their own connection with `auth.oauth.per: user` or `auth.token_exchange` instead".into(),
                });
            }
            if server.max_consecutive_failures == 0 {
                return Err(KeyError {
                    key: at("max_consecutive_failures"),
                    message: "expected a whole number, 1 or more".into(),
                });
            }
            if server.mode == Mode::Http
                && server.sandbox().is_some_and(|sandbox| sandbox.network == crate::sandbox::Network::None)
            {
                return Err(KeyError {
                    key: at("sandbox.network"),
                    message: "a `mode: http` server is reached over the network: `none` (here or in sandbox_defaults) would cut the hangar off from it; list its port under `tcp_bind` instead".into(),
                });
            }
            check_recovery(&at("recovery"), &server.recovery)?;
            check_limits(&at("limits"), &server.limits)?;
            check_pins(&at("capabilities.tools.pinned"), &server.capabilities.tools)?;
        }
        check_expose_as(&self.mcp_servers)?;
        crate::redaction::Redaction::compile(&self.redaction)?;
        check_telemetry(&self.telemetry)?;
        if let Some(cluster) = &self.cluster {
            cluster.check()?;
        }
        self.shutdown.check()
    }
}

/// `telemetry.otlp_endpoint`, when set, is an absolute http(s) URL with a host (the OTLP/HTTP
/// receiver; `/v1/traces` is appended), without credentials in it.
fn check_telemetry(telemetry: &TelemetryConfig) -> Result<(), KeyError> {
    let Some(endpoint) = &telemetry.otlp_endpoint else { return Ok(()) };
    let problem = match url::Url::parse(endpoint) {
        Err(err) => Some(format!("expected an http(s) URL such as http://127.0.0.1:4318: {err}")),
        Ok(url) if !matches!(url.scheme(), "http" | "https") => {
            Some(format!("expected an http or https URL, not `{}:`", crate::echo::bounded(url.scheme())))
        }
        Ok(url) if url.host_str().is_none_or(str::is_empty) => Some("the URL names no host".into()),
        Ok(url) if !url.username().is_empty() || url.password().is_some() => {
            Some("put no credentials in the URL".into())
        }
        Ok(url) if url.query().is_some() || url.fragment().is_some() => {
            Some("expected no query or fragment (`/v1/traces` is appended to the path)".into())
        }
        Ok(_) => None,
    };
    match problem {
        Some(message) => Err(KeyError { key: "telemetry.otlp_endpoint".into(), message }),
        None => Ok(()),
    }
}

/// Every `expose_as` reads like a server id, and no two servers' front-door prefixes (their
/// `expose_as`, else their id) are the same: a qualified name leads to one server only.
fn check_expose_as(servers: &IndexMap<String, ServerConfig>) -> Result<(), KeyError> {
    let mut prefixes: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    // Ids used as prefixes first, so a clash is reported at the `expose_as` that made it.
    let by_id = servers.iter().filter(|(_, s)| s.expose_as.is_none()).map(|(id, _)| (id, id));
    let chosen = servers.iter().filter_map(|(id, s)| Some((id, s.expose_as.as_ref()?)));
    for (id, prefix) in by_id.chain(chosen) {
        let key = || format!("mcp_servers.{id}.expose_as");
        if !valid_server_id(prefix) {
            return Err(KeyError {
                key: key(),
                message: "a front-door prefix follows the rules of a server id: 1 to 64 characters of letters, digits, '_', '-' and '.', starting with a letter or digit".into(),
            });
        }
        if let Some(other) = prefixes.insert(prefix, id) {
            let whose = if servers[other].expose_as.is_some() { "`expose_as`" } else { "id" };
            return Err(KeyError {
                key: key(),
                message: format!("`{prefix}` is already the front-door prefix of server `{other}` (its {whose})"),
            });
        }
    }
    Ok(())
}

impl Config {
    /// `auth.api_keys` and `profiles:`: every profile's globs compile; every key has a valid,
    /// unique name, a `sha256:<64 hex>` hash no other key has, and a profile that exists.
    fn check_keys_and_profiles(&self) -> Result<(), KeyError> {
        crate::policy::Policy::compile(&self.profiles)?;
        let mut names = std::collections::HashMap::new();
        let mut hashes = std::collections::HashMap::new();
        for (n, key) in self.auth.api_keys.iter().enumerate() {
            let at = |field: &str| format!("auth.api_keys[{n}].{field}");
            if let Some(problem) = crate::access::key_name_problem(&key.name) {
                return Err(KeyError {
                    key: at("name"),
                    message: format!("`{}`: {problem}", crate::echo::bounded(&key.name)),
                });
            }
            if let Some(first) = names.insert(key.name.as_str(), n) {
                return Err(KeyError {
                    key: at("name"),
                    message: format!("`{}` already names auth.api_keys[{first}]", key.name),
                });
            }
            let Some(digest) = crate::access::parse_key_hash(&key.hash) else {
                return Err(KeyError {
                    key: at("hash"),
                    message:
                        "expected `sha256:<64 hex digits>` (the hash of the key, e.g. from `printf %s KEY | sha256sum`)"
                            .into(),
                });
            };
            if let Some(first) = hashes.insert(digest, n) {
                return Err(KeyError { key: at("hash"), message: format!("the same key as auth.api_keys[{first}]") });
            }
            if let Some(profile) = &key.profile
                && !self.profiles.contains_key(profile)
            {
                return Err(KeyError {
                    key: at("profile"),
                    message: format!("no profile `{}` is configured under `profiles:`", crate::echo::bounded(profile)),
                });
            }
        }
        Ok(())
    }
}

/// Set while a read of the config runs on its thread; one that never returns (a hung file
/// system) keeps it set, so later reads are refused instead of piling up blocked threads.
static READING: AtomicBool = AtomicBool::new(false);

/// The config file's text, read as [`Config::load`] reads it (a regular file of at most
/// [`MAX_CONFIG_BYTES`]), on a thread of its own, giving up after [`CONFIG_READ_TIMEOUT`].
pub fn read_config_text(path: &Path) -> Result<String, ConfigError> {
    if READING.swap(true, Ordering::SeqCst) {
        return Err(ConfigError::StillBlocked { path: path.to_owned() });
    }
    let owned = path.to_owned();
    let outcome = with_timeout(CONFIG_READ_TIMEOUT, move || {
        let read = read_regular(&owned, MAX_CONFIG_BYTES);
        READING.store(false, Ordering::SeqCst);
        read
    });
    match outcome {
        Ok(Some(read)) => read,
        Ok(None) => Err(ConfigError::TimedOut { path: path.to_owned(), after: CONFIG_READ_TIMEOUT }),
        Err(source) => {
            // No thread ran, so none is blocked.
            READING.store(false, Ordering::SeqCst);
            Err(ConfigError::Read { path: path.to_owned(), source })
        }
    }
}

/// Runs `work` on a thread of its own: `Ok(None)` if it has not finished within `timeout` (it is
/// then left to finish, or block, on its own), `Err` if no thread could be started.
fn with_timeout<T: Send + 'static>(
    timeout: Duration,
    work: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<Option<T>> {
    let (done, result) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new().name("config-read".into()).spawn(move || {
        let _ = done.send(work());
    })?;
    Ok(result.recv_timeout(timeout).ok())
}

/// The config's text, read by [`crate::small_file::read_regular`], its refusals in the config's words.
fn read_regular(path: &Path, limit: u64) -> Result<String, ConfigError> {
    use crate::small_file::{SmallFileError, read_regular};
    read_regular(path, limit).map_err(|err| match err {
        SmallFileError::Io(source) => ConfigError::Read { path: path.to_owned(), source },
        SmallFileError::NotRegular(what) => ConfigError::NotRegular { path: path.to_owned(), what },
        SmallFileError::TooLarge { .. } => ConfigError::TooLarge { path: path.to_owned() },
    })
}

/// The most of a config error's key path, and of its message, that is shown.
const MAX_ERROR_KEY_BYTES: usize = 256;
const MAX_ERROR_MESSAGE_BYTES: usize = 1024;

/// What the YAML pre-pass found, as an error at the key it concerns.
fn yaml_problem(problem: crate::yaml_keys::Problem) -> KeyError {
    use crate::yaml_keys::{MAX_DEPTH, MAX_EXPANDED_BYTES, Problem};
    match problem {
        Problem::Duplicate(duplicate) => KeyError {
            key: duplicate.path(),
            message: format!(
                "duplicate key `{}` at line {} (first at line {}){}",
                duplicate.key,
                duplicate.line,
                duplicate.first_line,
                if duplicate.within.is_empty() { String::new() } else { format!(" in {}", duplicate.within) }
            ),
        },
        Problem::TooDeep { line } => KeyError {
            key: "(top level)".into(),
            message: format!("nested deeper than {MAX_DEPTH} levels at line {line}"),
        },
        Problem::ExpandsTooFar { line } => KeyError {
            key: "(top level)".into(),
            message: format!(
                "its aliases expand it past {} MiB at line {line}: a config may repeat a node by alias, not multiply it",
                MAX_EXPANDED_BYTES >> 20
            ),
        },
    }
}

/// The YAML parser sometimes starts its message with the path we already name.
fn without_path_prefix<'a>(message: &'a str, key: &str) -> &'a str {
    match message.split_once(": ") {
        Some((head, rest)) if key == head || key.starts_with(&format!("{head}.")) => rest,
        _ => message,
    }
}

/// The longest duration in seconds a `positive` key accepts: a year. Beyond it is a typo, and
/// `Duration::from_secs_f64` would panic on overflow.
const MAX_SECONDS: f64 = 31_536_000.0;

/// What a server id and an `expose_as` look like (see [`valid_server_id`]), for the schema.
const SERVER_ID_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9_.-]*$";

fn positive(key: &str, value: f64) -> Result<(), KeyError> {
    if value.is_finite() && value > 0.0 && value <= MAX_SECONDS {
        Ok(())
    } else {
        Err(KeyError {
            key: key.into(),
            message: format!("expected seconds greater than 0 (fractions allowed), got {value}"),
        })
    }
}

/// `sandbox_defaults:` and every server's own `sandbox:` block, each at its own key (before
/// the defaults are copied into servers, so a problem in them is named once, where written).
fn check_sandboxes(config: &Config) -> Result<(), KeyError> {
    let written = config.mcp_servers.iter().map(|(id, server)| (format!("mcp_servers.{id}.sandbox"), server));
    if let Some(sandbox) = config.sandbox_defaults.as_ref().and_then(SandboxSetting::sandbox)
        && let Some((key, message)) = sandbox.problem()
    {
        return Err(KeyError { key: format!("sandbox_defaults.{key}"), message });
    }
    for (at, server) in written {
        if server.mode == Mode::Remote && server.sandbox != SandboxSetting::Inherit {
            return Err(KeyError {
                key: at,
                message: "`mode: remote` is not spawned, so there is nothing to sandbox".into(),
            });
        }
        if let Some((key, message)) = server.sandbox.sandbox().and_then(crate::sandbox::Sandbox::problem) {
            return Err(KeyError { key: format!("{at}.{key}"), message });
        }
    }
    Ok(())
}

fn check_limits(at: &str, limits: &Limits) -> Result<(), KeyError> {
    match limits.problem() {
        Some((key, message)) => Err(KeyError { key: format!("{at}.{key}"), message }),
        None => Ok(()),
    }
}

/// Each pin is `sha256:` and 64 lowercase hex digits, the form `GET .../tools` reports.
fn check_pins(at: &str, tools: &ToolCapabilities) -> Result<(), KeyError> {
    for (tool, digest) in tools.pinned.iter().flatten() {
        if !crate::tool_digest::is_digest(digest) {
            return Err(KeyError {
                key: format!("{at}.{tool}"),
                message: "expected a tool digest, `sha256:` and 64 lowercase hex digits (`hangar pin` prints them)"
                    .into(),
            });
        }
    }
    Ok(())
}

fn check_recovery(at: &str, recovery: &Recovery) -> Result<(), KeyError> {
    if let Some(v) = recovery.initial_backoff_s {
        positive(&format!("{at}.initial_backoff_s"), v)?;
    }
    if let Some(v) = recovery.max_backoff_s {
        positive(&format!("{at}.max_backoff_s"), v)?;
    }
    if let Some(v) = recovery.backoff_multiplier
        && !(v.is_finite() && (1.0..=100.0).contains(&v))
    {
        return Err(KeyError {
            key: format!("{at}.backoff_multiplier"),
            message: format!("expected a number from 1 to 100, got {v}"),
        });
    }
    Ok(())
}

pub fn valid_server_id(id: &str) -> bool {
    let mut chars = id.chars();
    id.len() <= 64
        && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
tool_access: {mode: egress}
recovery:
  max_retries: 3
  initial_backoff_s: 5
  backoff_multiplier: 2
  max_backoff_s: 60
mcp_servers:
  math:
    mode: subprocess
    command: [hangar-upstream-fake, --tools, add]
    env: {LOG_LEVEL: info}
    max_consecutive_failures: 3
    health_check_interval_s: 0.5
    probe_timeout_s: 5
    handshake_timeout_s: 10
    idle_ttl_s: 300
    capabilities:
      enforcement_mode: block
      tools: {expected_tools: [add]}
  echo:
    command: [hangar-upstream-fake]
    recovery: {max_retries: 1}
"#;

    #[test]
    fn loads_the_documented_shape_in_order() {
        let config = Config::parse(EXAMPLE).unwrap();
        let ids: Vec<_> = config.mcp_servers.keys().cloned().collect();
        assert_eq!(ids, ["math", "echo"]);
        let math = &config.mcp_servers["math"];
        assert_eq!(math.command, ["hangar-upstream-fake", "--tools", "add"]);
        assert_eq!(math.health_check_interval(), Duration::from_millis(500));
        assert_eq!(math.capabilities.tools.expected_tools.as_deref(), Some(&["add".to_string()][..]));
        let echo = &config.mcp_servers["echo"];
        assert_eq!(echo.mode, Mode::Subprocess);
        assert_eq!(echo.idle_ttl(), Some(Duration::from_secs(300)));
        let policy = echo.recovery.resolve(&config.recovery);
        assert_eq!(policy.max_retries, 1);
        assert_eq!(policy.initial_backoff, Duration::from_secs(5));
    }

    #[test]
    fn upstream_credentials_go_where_they_can_be_used_and_are_never_inline() {
        let key = |yaml: &str| Config::parse(&format!("mcp_servers:\n{yaml}")).unwrap_err().key;
        let remote = "  far:\n    mode: remote\n    endpoint: 'https://mcp.example.com/mcp'\n";
        assert_eq!(key(&format!("{remote}    env: {{T: {{env: X}}}}\n")), "mcp_servers.far.env");
        assert_eq!(key("  m:\n    command: [x]\n    auth: {headers: {A: {env: X}}}\n"), "mcp_servers.m.auth");
        let inline = Config::parse(&format!(
            "mcp_servers:\n{remote}    auth: {{headers: {{Authorization: 'Bearer ghp_inline'}}}}\n"
        ))
        .unwrap_err();
        assert_eq!(inline.key, "mcp_servers.far.auth.headers.Authorization");
        assert!(!inline.message.contains("ghp_inline"), "{inline:?}");
        let userinfo =
            Config::parse("mcp_servers:\n  far: {mode: remote, endpoint: 'https://u:hunter2@mcp.example.com/mcp'}\n")
                .unwrap_err();
        assert_eq!(userinfo.key, "mcp_servers.far.endpoint");
        assert!(userinfo.message.contains("auth.headers") && !userinfo.message.contains("hunter2"), "{userinfo:?}");
        let mut config = Config::parse(&format!(
            "mcp_servers:\n{remote}    auth: {{headers: {{Authorization: {{env: TOKEN, prefix: 'Bearer '}}}}}}\n  \
             n:\n    command: [x]\n    env: {{PLAIN: text, SECRET: {{env: TOKEN}}}}\n"
        ))
        .unwrap();
        let sources = |value: &'static str| Sources {
            var: Box::leak(Box::new(move |_: &str| Some(value.to_owned()))),
            credentials_directory: None,
        };
        config.resolve_credentials(&sources("tok-123")).unwrap();
        let far = &config.mcp_servers["far"];
        assert_eq!(far.auth_headers().collect::<Vec<_>>(), [("Authorization", "Bearer tok-123")]);
        assert_eq!(
            config.mcp_servers["n"].env_values().collect::<Vec<_>>(),
            [("PLAIN", "text"), ("SECRET", "tok-123")]
        );
        assert!(!format!("{config:?}").contains("tok-123"));
        assert!(far.secrets().contains(&"tok-123".to_owned()));
        let refused = config.resolve_credentials(&sources("two\r\nlines")).unwrap_err();
        assert_eq!(refused.key, "mcp_servers.far.auth.headers.Authorization");
    }

    #[test]
    fn the_otlp_endpoint_must_be_an_http_url() {
        let parse =
            |endpoint: &str| Config::parse(&format!("telemetry: {{otlp_endpoint: '{endpoint}'}}\nmcp_servers: {{}}\n"));
        for good in ["http://127.0.0.1:4318", "https://collector.example.com/otlp/"] {
            let config = parse(good).unwrap();
            assert_eq!(config.telemetry.otlp_endpoint.as_deref(), Some(good));
        }
        for bad in ["", "127.0.0.1:4318", "ftp://x/", "http://", "http://u:p@host/", "http://host/?a=b", "file:///tmp"]
        {
            let err = parse(bad).unwrap_err();
            assert_eq!(err.key, "telemetry.otlp_endpoint", "{bad}: {err:?}");
        }
        assert_eq!(Config::parse("mcp_servers: {}\n").unwrap().telemetry.otlp_endpoint, None);
    }

    #[test]
    fn unknown_key_names_its_path() {
        let err = Config::parse("mcp_servers:\n  math:\n    command: [x]\n    comand: [y]\n").unwrap_err();
        assert_eq!(err.key, "mcp_servers.math.comand");
        assert!(err.message.starts_with("unknown field `comand`"), "{}", err.message);
        assert!(err.message.contains("line 4"), "says where: {}", err.message);
    }

    #[test]
    fn bad_value_names_its_path_and_expectation() {
        let err = Config::parse("mcp_servers:\n  math:\n    command: [x]\n    idle_ttl_s: soon\n").unwrap_err();
        assert_eq!(err.key, "mcp_servers.math.idle_ttl_s");
        assert!(err.message.starts_with("invalid type: string \"soon\", expected f64"), "{}", err.message);
        let err = Config::parse("mcp_servers:\n  math:\n    command: [x]\n    probe_timeout_s: -1\n").unwrap_err();
        assert_eq!(err.key, "mcp_servers.math.probe_timeout_s");
    }

    #[test]
    fn limits_load_at_both_levels_and_bad_rates_name_their_key() {
        let config = Config::parse(
            "limits: {max_concurrent_calls: 100, rate_limit: {calls_per_s: 50}}\nmcp_servers:\n  math:\n    command: [x]\n    limits: {max_concurrent_calls: 0, rate_limit: {calls_per_s: 2, burst: 5}}\n",
        )
        .unwrap();
        assert_eq!(config.limits.concurrency(1024), Some(100));
        assert_eq!(config.limits.rate_limit.as_ref().map(|r| r.burst()), Some(50.0));
        let math = &config.mcp_servers["math"].limits;
        assert_eq!(math.concurrency(64), None);
        assert_eq!(math.rate_limit.as_ref().map(|r| r.burst()), Some(5.0));
        let err =
            Config::parse("mcp_servers:\n  math:\n    command: [x]\n    limits: {rate_limit: {calls_per_s: -1}}\n")
                .unwrap_err();
        assert_eq!(err.key, "mcp_servers.math.limits.rate_limit.calls_per_s");
        let err = Config::parse("limits: {rate_limit: {per_second: 3}}\n").unwrap_err();
        assert_eq!(err.key, "limits.rate_limit.per_second");
    }

    #[test]
    fn mcp_hangar_args_are_appended_to_the_command() {
        let config = Config::parse("mcp_servers:\n  m:\n    command: [fake]\n    args: [--tools, echo]\n").unwrap();
        assert_eq!(config.mcp_servers["m"].command, ["fake", "--tools", "echo"]);
        assert!(config.mcp_servers["m"].args.is_empty());
        let err = Config::parse("mcp_servers:\n  m:\n    args: [--tools]\n").unwrap_err();
        assert_eq!(err.key, "mcp_servers.m.args");
    }

    #[test]
    fn subprocess_needs_a_command() {
        let err = Config::parse("mcp_servers:\n  math:\n    mode: subprocess\n").unwrap_err();
        assert_eq!(err.key, "mcp_servers.math.command");
    }

    #[test]
    fn auth_is_for_what_the_hangar_sends_to_an_http_or_remote_server() {
        let oauth = "oauth: {per: shared, grant: client_credentials, client: {id: m, secret_file: /s}}";
        let remote =
            format!("mcp_servers:\n  far: {{mode: remote, endpoint: \"https://x.example/mcp\", auth: {{{oauth}}}}}\n");
        assert!(Config::parse(&remote).is_ok());
        let local = format!("mcp_servers:\n  near: {{command: [x], auth: {{{oauth}}}}}\n");
        assert_eq!(Config::parse(&local).unwrap_err().key, "mcp_servers.near.auth");
        let user = remote.replace("shared", "user");
        assert_eq!(Config::parse(&user).unwrap_err().key, "mcp_servers.far.auth.oauth.grant");
        // A person connects in a browser: the hangar must know the address it reaches.
        let user = user.replace("client_credentials", "authorization_code");
        assert_eq!(Config::parse(&user).unwrap_err().key, "credentials.public_url");
        let placed = format!("credentials: {{public_url: \"https://hangar.example.com\"}}\n{user}");
        assert!(Config::parse(&placed).is_ok());
        let pathed = placed.replace("example.com", "example.com/x");
        assert_eq!(Config::parse(&pathed).unwrap_err().key, "credentials.public_url");
    }

    #[test]
    fn http_and_remote_modes_need_an_endpoint() {
        let ok = Config::parse(
            "mcp_servers:\n  web: {mode: http, command: [x], endpoint: \"http://127.0.0.1:8931/mcp\"}\n  far: {mode: remote, endpoint: \"https://mcp.example.com/mcp\"}\n",
        );
        assert!(ok.is_ok(), "{ok:?}");
        for (yaml, key) in [
            ("mcp_servers:\n  web: {mode: http, command: [x]}\n", "mcp_servers.web.endpoint"),
            ("mcp_servers:\n  web: {mode: http, endpoint: \"http://127.0.0.1:1/mcp\"}\n", "mcp_servers.web.command"),
            ("mcp_servers:\n  far: {mode: remote, endpoint: \"ftp://x/y\"}\n", "mcp_servers.far.endpoint"),
            (
                "mcp_servers:\n  far: {mode: remote, command: [x], endpoint: \"https://x.example/mcp\"}\n",
                "mcp_servers.far.command",
            ),
        ] {
            assert_eq!(Config::parse(yaml).unwrap_err().key, key, "{yaml}");
        }
    }

    #[test]
    fn command_must_be_a_list() {
        let err = Config::parse("mcp_servers:\n  math:\n    command: python server.py\n").unwrap_err();
        assert_eq!(err.key, "mcp_servers.math.command");
    }

    #[test]
    fn rejects_ids_unfit_for_urls() {
        let err = Config::parse("mcp_servers:\n  \"a/b\":\n    command: [x]\n").unwrap_err();
        assert_eq!(err.key, "mcp_servers.a/b");
    }

    #[test]
    fn empty_file_is_an_empty_hangar() {
        assert!(Config::parse("").unwrap().mcp_servers.is_empty());
    }

    #[test]
    fn a_key_given_twice_is_an_error_naming_both_lines() {
        let err = Config::parse("mcp_servers:\n  math:\n    command: [a]\n  math:\n    command: [b]\n").unwrap_err();
        assert_eq!(err.key, "mcp_servers.math");
        assert_eq!(err.message, "duplicate key `math` at line 4 (first at line 2) in mcp_servers");
        for (yaml, key) in [
            ("mcp_servers: {}\nmcp_servers: {}\n", "mcp_servers"),
            ("mcp_servers:\n  m:\n    command: [a]\n    command: [b]\n", "mcp_servers.m.command"),
            ("mcp_servers:\n  m:\n    command: [a]\n    env: {K: 1, K: 2}\n", "mcp_servers.m.env.K"),
            ("recovery:\n  max_retries: 1\n  max_retries: 2\n", "recovery.max_retries"),
            ("limits: {rate_limit: {calls_per_s: 1, calls_per_s: 2}}\n", "limits.rate_limit.calls_per_s"),
        ] {
            let err = Config::parse(yaml).unwrap_err();
            assert_eq!(err.key, key, "{yaml}");
            assert!(err.message.starts_with("duplicate key"), "{yaml}: {}", err.message);
        }
    }

    #[test]
    fn only_a_regular_file_within_the_limit_is_read() {
        let dir = std::env::temp_dir().join(format!("hangar-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("hangar.yaml");
        std::fs::write(&file, "mcp_servers: {}\n").unwrap();
        assert_eq!(read_regular(&file, 100).unwrap(), "mcp_servers: {}\n");
        // A symlink to a regular file is fine (Kubernetes ConfigMaps are made of them).
        let link = dir.join("link.yaml");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(read_regular(&link, 100).is_ok());
        assert!(matches!(read_regular(&file, 5), Err(ConfigError::TooLarge { .. })));
        let err = read_regular(&dir, 100).unwrap_err();
        assert!(err.to_string().contains("not a regular file (it is a directory)"), "{err}");
        let err = read_regular(Path::new("/dev/zero"), 100).unwrap_err();
        assert!(err.to_string().contains("not a regular file (it is a character device)"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The timeout, with a reader that never returns (the real fault, a hung file system, cannot
    /// be made here without FUSE or NFS).
    #[test]
    fn a_read_that_never_returns_is_given_up() {
        let (_release, blocked) = std::sync::mpsc::channel::<()>();
        let outcome = with_timeout(Duration::from_millis(50), move || blocked.recv().is_ok());
        assert_eq!(outcome.ok(), Some(None));
        assert_eq!(with_timeout(Duration::from_secs(10), || 7).ok(), Some(Some(7)));
    }

    #[test]
    fn an_error_quotes_the_file_within_bounds() {
        let err = Config::parse(&format!("{}\n", "x".repeat(3 << 20))).unwrap_err();
        assert!(err.message.len() <= MAX_ERROR_MESSAGE_BYTES + 32, "{} bytes", err.message.len());
        assert!(err.message.starts_with("invalid type: string"), "{}", &err.message[..100]);
        let err = Config::parse(&format!("mcp_servers:\n  {}: {{command: [x]}}\n", "k".repeat(1 << 20))).unwrap_err();
        assert!(err.key.len() <= MAX_ERROR_KEY_BYTES + 32, "{} bytes", err.key.len());
        assert!(err.message.len() <= MAX_ERROR_MESSAGE_BYTES + 32, "{} bytes", err.message.len());
    }

    #[test]
    fn front_door_names_and_prefixes_load_and_default_to_today() {
        let config = Config::parse("mcp_servers:\n  m: {command: [x]}\n").unwrap();
        assert_eq!(config.tool_access.names, Names::BareWhenUnique);
        assert_eq!(config.naming(), Naming::default());
        let config = Config::parse(
            "tool_access: {mode: front_door, names: always_qualified}\nmcp_servers:\n  time-a: {command: [x], expose_as: clock}\n  time-b: {command: [x]}\n",
        )
        .unwrap();
        let naming = config.naming();
        assert_eq!(naming.names, Names::AlwaysQualified);
        assert_eq!((naming.prefix("time-a"), naming.prefix("time-b")), ("clock", "time-b"));
        let err = Config::parse("tool_access: {names: sometimes}\n").unwrap_err();
        assert_eq!(err.key, "tool_access.names");
    }

    #[test]
    fn a_prefix_is_shaped_like_an_id_and_leads_to_one_server() {
        for (yaml, key, says) in [
            ("  a: {command: [x], expose_as: \"c/d\"}\n", "mcp_servers.a.expose_as", "rules of a server id"),
            ("  a: {command: [x], expose_as: \"\"}\n", "mcp_servers.a.expose_as", "rules of a server id"),
            (
                "  a: {command: [x], expose_as: c}\n  b: {command: [x], expose_as: c}\n",
                "mcp_servers.b.expose_as",
                "`c` is already the front-door prefix of server `a` (its `expose_as`)",
            ),
            (
                "  a: {command: [x], expose_as: b}\n  b: {command: [x]}\n",
                "mcp_servers.a.expose_as",
                "`b` is already the front-door prefix of server `b` (its id)",
            ),
        ] {
            let err = Config::parse(&format!("mcp_servers:\n{yaml}")).unwrap_err();
            assert_eq!(err.key, key, "{yaml}");
            assert!(err.message.contains(says), "{yaml}: {}", err.message);
        }
        // An id freed by its own `expose_as` may be another's prefix; a server may name its own id.
        let ok = Config::parse(
            "mcp_servers:\n  a: {command: [x], expose_as: b}\n  b: {command: [x], expose_as: a}\n  c: {command: [x], expose_as: c}\n",
        );
        assert!(ok.is_ok(), "{ok:?}");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for text in
            ["[", "mcp_servers: 3", "\u{0}\u{1}", "mcp_servers:\n  x: {command: [a], health_check_interval_s: 1e400}"]
        {
            assert!(Config::parse(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn pins_are_read_and_a_malformed_one_names_its_key_path() {
        let digest = format!("sha256:{}", "0a".repeat(32));
        let text = format!(
            "mcp_servers:\n  m:\n    command: [x]\n    capabilities:\n      tools:\n        pinned: {{add: \"{digest}\"}}\n"
        );
        let config = Config::parse(&text).unwrap();
        let pinned = config.mcp_servers["m"].capabilities.tools.pinned.as_ref().unwrap();
        assert_eq!(pinned.get("add"), Some(&digest));
        for bad in ["add", "sha256:0a", "sha1:00", "SHA256:00"] {
            let err = Config::parse(&text.replace(&digest, bad)).unwrap_err();
            assert_eq!(err.key, "mcp_servers.m.capabilities.tools.pinned.add", "{bad}");
            assert!(err.message.contains("sha256:"), "{}", err.message);
        }
        let err = Config::parse(&text.replace(&format!("\"{digest}\""), "[1]")).unwrap_err();
        assert!(err.key.starts_with("mcp_servers.m.capabilities.tools.pinned"), "{}", err.key);
    }

    #[test]
    fn keys_and_profiles_are_checked_at_their_key_paths() {
        let hash = format!("sha256:{}", "ab".repeat(32));
        let other = format!("sha256:{}", "cd".repeat(32));
        let profiles = "profiles:\n  ci: {servers: [math], tools: {allow: [add]}}\n";
        let with = |keys: &str| Config::parse(&format!("{profiles}auth:\n  api_keys:\n{keys}"));
        let ok = with(&format!(
            "    - {{name: ci-bot, hash: \"{hash}\", profile: ci}}\n    - {{name: alice, hash: \"{other}\"}}\n"
        ))
        .unwrap();
        assert_eq!(ok.auth.api_keys.len(), 2);
        let refused = |keys: String| with(&keys).unwrap_err();
        let err = refused(format!("    - {{name: ci-bot, hash: \"{hash}\", profile: nope}}\n"));
        assert_eq!(err.key, "auth.api_keys[0].profile");
        assert!(err.message.contains("no profile `nope`"), "{}", err.message);
        assert_eq!(refused("    - {name: a, hash: \"sha256:abc\"}\n".into()).key, "auth.api_keys[0].hash");
        assert_eq!(refused(format!("    - {{name: a, hash: \"{}\"}}\n", "ab".repeat(32))).key, "auth.api_keys[0].hash");
        assert_eq!(refused(format!("    - {{name: \"\", hash: \"{hash}\"}}\n")).key, "auth.api_keys[0].name");
        assert_eq!(refused(format!("    - {{name: anonymous, hash: \"{hash}\"}}\n")).key, "auth.api_keys[0].name");
        let twice = refused(format!("    - {{name: a, hash: \"{hash}\"}}\n    - {{name: a, hash: \"{other}\"}}\n"));
        assert_eq!(
            (twice.key.as_str(), twice.message.as_str()),
            ("auth.api_keys[1].name", "`a` already names auth.api_keys[0]")
        );
        let same = refused(format!("    - {{name: a, hash: \"{hash}\"}}\n    - {{name: b, hash: \"{hash}\"}}\n"));
        assert_eq!(same.key, "auth.api_keys[1].hash");
    }

    #[test]
    fn a_server_takes_its_own_sandbox_else_the_defaults() {
        use crate::sandbox::{Network, SandboxSetting};
        let config = Config::parse(
            "sandbox_defaults: {network: none, memory_mb: 256}\nmcp_servers:\n  own: {command: [a], sandbox: strict}\n  \
             inherits: {command: [a]}\n  opted_out: {command: [a], sandbox: none}\n  \
             far: {mode: remote, endpoint: 'http://127.0.0.1:9/mcp'}\n",
        )
        .unwrap();
        let servers = &config.mcp_servers;
        assert_eq!(servers["own"].sandbox().unwrap().memory_mb, Some(512));
        let inherited = servers["inherits"].sandbox().unwrap();
        assert_eq!((&inherited.network, inherited.memory_mb), (&Network::None, Some(256)));
        assert_eq!(servers["opted_out"].sandbox, SandboxSetting::Off);
        assert_eq!(servers["far"].sandbox, SandboxSetting::Off, "defaults reach only spawned servers");
        assert_eq!(
            Config::parse("mcp_servers: {a: {command: [a]}}").unwrap().mcp_servers["a"].sandbox,
            SandboxSetting::Off
        );
    }

    #[test]
    fn a_grant_over_a_protected_place_names_the_defaults_first_else_the_server() {
        let places = [("state_dir", PathBuf::from("/var/lib/hangar"), true)];
        let check =
            |yaml: &str| Config::parse(yaml).unwrap().check_grants(&places, Path::to_path_buf).map_err(|e| e.key);
        let defaults = "sandbox_defaults: {filesystem: {write: [/var]}}\nmcp_servers:\n  a: {command: [a]}\n";
        assert_eq!(check(defaults).unwrap_err(), "sandbox_defaults.filesystem.write[0]");
        let own = "mcp_servers:\n  a: {command: [a], sandbox: {filesystem: {read: [/usr, /]}}}\n";
        assert_eq!(check(own).unwrap_err(), "mcp_servers.a.sandbox.filesystem.read[1]");
        assert_eq!(check("mcp_servers:\n  a: {command: [a], sandbox: strict}\n"), Ok(()));
    }

    #[test]
    fn sandbox_errors_name_the_dotted_key() {
        let key = |yaml: &str| Config::parse(yaml).unwrap_err().key;
        assert_eq!(
            key("mcp_servers: {a: {command: [a], sandbox: {network: {tcp_connect: [70000]}}}}"),
            "mcp_servers.a.sandbox.network.tcp_connect[0]"
        );
        assert_eq!(
            key("mcp_servers: {a: {command: [a], sandbox: {filesystem: {read: [etc]}}}}"),
            "mcp_servers.a.sandbox.filesystem.read[0]"
        );
        assert_eq!(key("mcp_servers: {a: {command: [a], sandbox: {memory: 5}}}"), "mcp_servers.a.sandbox.memory");
        assert_eq!(key("mcp_servers: {a: {command: [a], sandbox: loose}}"), "mcp_servers.a.sandbox");
        assert_eq!(
            key("sandbox_defaults: {max_open_files: 2}\nmcp_servers: {a: {command: [a]}}"),
            "sandbox_defaults.max_open_files"
        );
        assert_eq!(
            key("mcp_servers: {far: {mode: remote, endpoint: 'http://127.0.0.1:9/mcp', sandbox: strict}}"),
            "mcp_servers.far.sandbox"
        );
        let cut_off = "sandbox_defaults: strict\nmcp_servers: {web: {mode: http, command: [a], endpoint: 'http://127.0.0.1:9/mcp'}}";
        let err = Config::parse(cut_off).unwrap_err();
        assert_eq!(err.key, "mcp_servers.web.sandbox.network");
        assert!(err.message.contains("sandbox_defaults"), "{}", err.message);
    }

    #[test]
    fn session_bounds_and_the_answer_timeout_are_checked_at_their_keys() {
        let config = Config::parse(
            "tool_access:\n  sessions: {idle_ttl_s: 2.5, max_sessions: 3}\n  client_answer_timeout_s: 1\n",
        )
        .unwrap();
        assert_eq!(config.tool_access.sessions.idle_ttl(), Duration::from_millis(2500));
        assert_eq!(config.tool_access.sessions.max_sessions(), 3);
        assert_eq!(config.tool_access.client_answer_timeout(), Duration::from_secs(1));
        let defaults = Config::parse("").unwrap().tool_access;
        assert_eq!(defaults.sessions.idle_ttl(), Duration::from_secs(3600));
        assert_eq!(defaults.sessions.max_sessions(), 10_000);
        assert_eq!(defaults.sessions.max_per_identity(), 1_000);
        assert_eq!(Config::parse("").unwrap().tasks.max_per_identity(), 256);
        assert_eq!(Config::parse("tasks: {max_per_identity: 3}").unwrap().tasks.max_per_identity(), 3);
        assert_eq!(Config::parse("tasks: {max_per_identity: 2000}").unwrap_err().key, "tasks.max_per_identity");
        assert_eq!(defaults.client_answer_timeout(), Duration::from_secs(600));
        for (text, key) in [
            ("sessions: {idle_ttl_s: 0}", "tool_access.sessions.idle_ttl_s"),
            ("sessions: {idle_ttl_s: 1e12}", "tool_access.sessions.idle_ttl_s"),
            ("sessions: {idle_ttl_s: .nan}", "tool_access.sessions.idle_ttl_s"),
            ("sessions: {max_sessions: 0}", "tool_access.sessions.max_sessions"),
            ("sessions: {max_per_identity: 0}", "tool_access.sessions.max_per_identity"),
            ("sessions: {max_sessions: 100000000}", "tool_access.sessions.max_sessions"),
            ("client_answer_timeout_s: 0", "tool_access.client_answer_timeout_s"),
            ("client_answer_timeout_s: -5", "tool_access.client_answer_timeout_s"),
            ("client_answer_timeout_s: 1000000", "tool_access.client_answer_timeout_s"),
        ] {
            let err = Config::parse(&format!("tool_access:\n  {text}\n")).unwrap_err();
            assert_eq!(err.key, key, "{text}: {err}");
        }
        let unknown = Config::parse("tool_access:\n  sessions: {ttl: 5}\n").unwrap_err();
        assert!(unknown.key.starts_with("tool_access.sessions"), "{unknown}");
    }
}
