//! What every hangar process shares.
//!
//! - [`config`]: the YAML config model and its validation.
//! - [`approvals`]: `approvals:`, and a person's approval of a call a rule marks `approve`.
//! - [`config_check`]: every problem of a config, not only the first (`hangar check`).
//! - [`config_reference`]: the config's JSON Schema and reference page, generated from [`config`].
//! - [`credential`]: `{file: PATH}` / `{env: NAME}` credentials, read at load, never shown.
//! - [`audit_page`]: the page `GET /api/audit` answers, written by the API, read by the CLI.
//! - [`backoff`]: exponential backoff with jitter.
//! - [`call`]: a tool call as it crosses the control socket, and its client's stance.
//! - [`challenge`]: an upstream's `WWW-Authenticate` challenge, summarised from parsed parameters.
//! - [`call_requests`]: the other requests about calls (resolve, tasks, a legacy client's cancels).
//! - [`batch`]: `hangar_call`'s batch as data: its calls, its report, and the result carrying it.
//! - [`echo`]: bounding the client input an error message quotes back.
//! - [`front_door`]: how upstream tools and prompts are named behind one endpoint.
//! - [`metrics`]: the Prometheus text of `/metrics`, rendered from a snapshot.
//! - [`limits`]: concurrency and rate limits on requests that reach an upstream.
//! - [`lifecycle`]: the pure server state machine and its dead reasons.
//! - [`record`]: the records every read surface renders (rendered here, once).
//! - [`isolation`]: `isolation:`, one upstream process for all or an instance per owner, and
//!   instances' names.
//! - [`ipc`]: the control-socket protocol between supervisor, prober and API.
//! - [`ipc_error`]: a failure in the hangar's own words, and its kind every surface maps alike.
//! - [`key_error`]: a problem at one key of the config.
//! - [`reloaded`]: what a config reload did.
//! - [`jsonrpc`]: JSON-RPC messages, error codes and objects, and id remapping for many callers
//!   sharing one pipe.
//! - [`mcp`]: MCP's revisions, error codes, `_meta` keys and headers.
//! - [`paths`]: where the control socket lives by default.
//! - [`pin_edit`]: writing `capabilities.tools.pinned` into the config text, comments kept.
//! - [`server_edit`]: adding `mcp_servers.<id>` entries to the config text, comments kept.
//! - [`preflight`]: rule 4, refusing a port something already answers on.
//! - [`quotas`]: a profile's quotas for each identity holding it.
//! - [`redaction`]: secrets and personal data kept out of what upstreams return.
//! - [`rules`]: a profile's rules on calls, by tool and by arguments (CEL), compiled at load.
//! - [`sandbox`]: the `sandbox:` block: what the kernel lets a spawned upstream do.
//! - [`shutdown`]: the `shutdown:` block, how long a stop drains the calls in flight.
//! - [`small_file`]: reading a file the operator names, a regular one only, size-capped.
//! - [`terminal`]: client and upstream text shown on a terminal, its control characters visible.
//! - [`tool_digest`]: the canonical digest of a tool declaration, which pins compare.
//! - [`trace`]: W3C Trace Context (`traceparent`, `tracestate`), read strictly and written back.
//! - [`upstream_auth`]: a remote or managed HTTP upstream's `auth:` block (static headers).
//! - [`wire_name`]: the serde name of an enum variant, for logs, labels and messages.
//! - [`yaml_keys`]: finding a key given twice in the YAML, with both lines.
//!
//! Architecture invariant: this crate does no I/O beyond reading the config file (a regular file
//! only, size-capped, on a thread of its own with a timeout), reading the API keys file and the
//! credential files the config names (regular files only, size-capped) and the port preflight
//! (blocking connects with short timeouts), spawns no process and knows nothing of tokio;
//! everything in it is testable without processes.
#![forbid(unsafe_code)]

pub mod access;
pub mod approvals;
pub mod audit_page;
pub mod backoff;
pub mod batch;
pub mod call;
pub mod call_requests;
pub mod call_stats;
pub mod challenge;
pub mod cluster;
pub mod config;
pub mod config_check;
pub mod config_reference;
pub mod credential;
pub mod credentials_config;
pub mod custom_headers;
pub mod echo;
pub mod front_door;
pub mod ipc;
pub mod ipc_error;
pub mod isolation;
pub mod journal;
pub mod json_size;
pub mod jsonrpc;
pub mod key_error;
pub mod keyring;
pub mod lifecycle;
pub mod limits;
pub mod mcp;
pub mod metrics;
pub mod paths;
pub mod pin_edit;
pub mod policy;
pub mod preflight;
pub mod quotas;
pub mod record;
pub mod redaction;
pub mod reloaded;
pub mod rules;
pub mod sandbox;
pub mod server_edit;
pub mod server_facts;
pub mod server_requests;
pub mod session_meta;
pub mod session_requests;
pub mod shutdown;
pub mod small_file;
pub mod sync;
pub mod terminal;
pub mod time;
pub mod tool_digest;
pub mod trace;
pub mod upstream_auth;
pub mod upstream_tokens;
pub mod wire_name;
pub mod yaml_keys;
