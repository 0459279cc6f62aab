//! The `hangar_*` tools served at `/mcp`: their declarations and what each one does, and which
//! of them a caller's view lists (`WhoAmI::hangar_tools`, the supervisor's decision by
//! `policy::View::own_tools`). `tools/list` shows only those, and a call of any other is refused
//! before it runs, however it is made ([`refusal`]): `forbidden`, as a tool a profile denies
//! is; an admin tool called by a non-admin goes on to the supervisor, which refuses it
//! `forbidden` and keeps the attempt in the audit trail.

use hangar_core::batch::{tool_result, with_upstream_blocks};
use hangar_core::echo::bounded;
use hangar_core::front_door::Unknown;
use hangar_core::ipc::{CallSpec, Called, ErrorKind, IpcError, Relay};
use hangar_core::jsonrpc::RpcError;
use hangar_core::lifecycle::State;
use hangar_core::mcp::{
    HELD_BATCH_STATE_PREFIX, INPUT_RESPONSES, META_CLIENT_CAPABILITIES, META_LOG_LEVEL, REQUEST_STATE, can_be_asked,
};
use hangar_core::policy::{ADMIN_TOOLS, OWN_TOOLS};
use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::args::Arguments;
use super::batch;
use super::errors::ToolFailure;
use super::stance;
use crate::shapes::{HealthReport, ServerList, StatusReport, ToolList};
use crate::supervisor::{AsCaller, BoxFuture};

type Outcome = Result<Value, ToolFailure>;

/// Every tool, in the fixed order `tools/list` shows them (argument-free ones first, so a
/// client probing "the first tool" with no arguments gets an answer).
pub fn definitions() -> Vec<Value> {
    let server = json!({"type": "string", "description": "The MCP server's id, as configured."});
    let by_server = |name: &str, description: &str| {
        json!({
            "name": name,
            "description": description,
            "inputSchema": {"type": "object", "properties": {"mcp_server": server}, "required": ["mcp_server"]},
        })
    };
    vec![
        json!({
            "name": "hangar_list",
            "description": "List the configured MCP servers with their state, mode, tool count and dead reason.",
            "inputSchema": {
                "type": "object",
                "properties": {"state_filter": {
                    "type": "string",
                    "enum": ["cold", "initializing", "ready", "degraded", "dead"],
                    "description": "Only servers in this state.",
                }},
                "required": [],
            },
        }),
        json!({
            "name": "hangar_status",
            "description": "Show every MCP server's state at a glance, with notes and counts by state.",
            "inputSchema": {"type": "object", "properties": {}, "required": []},
        }),
        json!({
            "name": "hangar_health",
            "description": "Report the hangar's overall health (healthy, degraded or unhealthy) with counts by state.",
            "inputSchema": {"type": "object", "properties": {}, "required": []},
        }),
        by_server("hangar_details", "Show one MCP server in full: tools, health counters, process facts, dead reason."),
        by_server("hangar_tools", "List the tools one MCP server declares, with input schemas and digests."),
        by_server("hangar_start", "Start an MCP server, or revive a dead one, and wait until it is ready."),
        by_server("hangar_stop", "Stop a running MCP server."),
        json!({
            "name": "hangar_call",
            "description": "Call tools on MCP servers, many at once, and collect every result in order.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "calls": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": batch::MAX_CALLS,
                        "items": {
                            "type": "object",
                            "properties": {
                                "mcp_server": server,
                                "tool": {"type": "string", "description": "The upstream tool's name."},
                                "arguments": {"type": "object", "description": "The tool's arguments."},
                                "timeout": {"type": "number", "exclusiveMinimum": 0, "description": "Seconds; overrides the batch timeout."},
                            },
                            "required": ["mcp_server", "tool"],
                        },
                    },
                    "max_concurrency": {
                        "type": "integer",
                        "minimum": 1,
                        "description": format!("Calls in flight at once (default {}, at most {}).", batch::DEFAULT_CONCURRENCY, batch::MAX_CONCURRENCY),
                    },
                    "timeout": {"type": "number", "exclusiveMinimum": 0, "description": "Seconds per call (default 60)."},
                    "fail_fast": {"type": "boolean", "description": "After a failure, do not start the remaining calls."},
                },
                "required": ["calls"],
            },
        }),
    ]
}

/// The hangar tools the caller's view lists, by name.
pub async fn listed(supervisor: &AsCaller) -> Result<Vec<String>, RpcError> {
    Ok(whoami(supervisor).await?.hangar_tools)
}

async fn whoami(supervisor: &AsCaller) -> Result<hangar_core::ipc::WhoAmI, RpcError> {
    supervisor.whoami().await.map_err(|err| RpcError::internal(err.message))
}

/// Why the hangar tool `name` may not run for this caller, as its answer: `Unknown tool` for
/// no such tool, an error result `forbidden` for one its view does not list; `None` when it
/// may run (or, an admin tool called by a non-admin, when the supervisor refuses it itself).
/// Checked before a hangar tool runs, whichever way it is called.
pub async fn refusal(supervisor: &AsCaller, name: &str) -> Result<Option<Value>, RpcError> {
    if !OWN_TOOLS.contains(&name) {
        return Err(unknown(name));
    }
    // A caller without a profile sees and does everything: no need to ask (the common case of a
    // hangar without `auth`, whose every `hangar_call` would otherwise cost a round trip).
    if supervisor.caller().profile.is_none() {
        return Ok(None);
    }
    let whoami = whoami(supervisor).await?;
    if whoami.hangar_tools.iter().any(|t| t == name) || (ADMIN_TOOLS.contains(&name) && !whoami.admin) {
        return Ok(None);
    }
    let refused = IpcError::forbidden(format!("the tool `{name}` is outside this caller's profile"));
    failed(refused.into()).map(Some)
}

fn unknown(name: &str) -> RpcError {
    RpcError::invalid_params(Unknown::default().message("tool", name))
}

/// Runs tool `name`. `Ok` is a `tools/call` result (possibly with `isError: true`); `Err` is a
/// JSON-RPC error (unknown tool, bad arguments).
pub async fn call(supervisor: &AsCaller, name: &str, arguments: Option<Value>) -> Result<Value, RpcError> {
    let unknown = || unknown(name);
    if !OWN_TOOLS.contains(&name) {
        return Err(unknown());
    }
    let args = Arguments::new(arguments)?;
    let outcome = match name {
        "hangar_list" => list(supervisor, args).await,
        "hangar_status" => status(supervisor).await,
        "hangar_health" => health(supervisor).await,
        "hangar_details" => details(supervisor, args).await,
        "hangar_tools" => tools(supervisor, args).await,
        "hangar_start" => start(supervisor, args).await,
        "hangar_stop" => stop(supervisor, args).await,
        "hangar_call" => hangar_call(supervisor, args).await,
        _ => return Err(unknown()),
    };
    match outcome {
        Ok(value) if name == "hangar_call" => Ok(with_upstream_blocks(value)),
        Ok(value) => Ok(tool_result(value, false)),
        Err(failure) => failed(failure),
    }
}

/// A tool's failure: its own error result, or a JSON-RPC error (bad arguments).
fn failed(failure: ToolFailure) -> Result<Value, RpcError> {
    match failure {
        ToolFailure::Tool(err) => {
            let value = json!({"error": err.message, "error_type": err.kind.as_str(), "details": err.details});
            Ok(tool_result(value, true))
        }
        ToolFailure::Rpc(err) => Err(err),
    }
}

fn to_json<T: Serialize>(value: &T) -> Outcome {
    serde_json::to_value(value)
        .map_err(|err| IpcError::new(ErrorKind::Internal, format!("could not render the result: {err}")).into())
}

async fn list(supervisor: &AsCaller, args: Arguments) -> Outcome {
    let filter = match args.optional_str("state_filter")? {
        None => None,
        Some(name) => Some(serde_json::from_value::<State>(Value::String(name.clone())).map_err(|_| {
            RpcError::invalid_params(format!(
                "Invalid arguments: `state_filter` must be one of cold, initializing, ready, degraded, dead; not `{}`",
                bounded(&name)
            ))
        })?),
    };
    let mut mcp_servers = supervisor.list().await?;
    if let Some(state) = filter {
        mcp_servers.retain(|s| s.state == state);
    }
    to_json(&ServerList { mcp_servers })
}

async fn status(supervisor: &AsCaller) -> Outcome {
    to_json(&StatusReport::of(&supervisor.list().await?))
}

async fn health(supervisor: &AsCaller) -> Outcome {
    match supervisor.list().await {
        Ok(servers) => to_json(&HealthReport::of(&servers)),
        // Health is exactly the question to answer when the supervisor is away.
        Err(err) if matches!(err.kind, ErrorKind::SupervisorUnavailable | ErrorKind::ProtocolMismatch) => {
            to_json(&HealthReport::unreachable())
        }
        Err(err) => Err(err.into()),
    }
}

async fn details(supervisor: &AsCaller, args: Arguments) -> Outcome {
    to_json(&supervisor.get(&args.required_str("mcp_server")?).await?)
}

async fn tools(supervisor: &AsCaller, args: Arguments) -> Outcome {
    let id = args.required_str("mcp_server")?;
    let tools = supervisor.tools(&id).await?;
    let server = supervisor.get(&id).await?;
    to_json(&ToolList::of(tools, &server))
}

async fn start(supervisor: &AsCaller, args: Arguments) -> Outcome {
    to_json(&supervisor.start(&args.required_str("mcp_server")?).await?)
}

async fn stop(supervisor: &AsCaller, args: Arguments) -> Outcome {
    to_json(&supervisor.stop(&args.required_str("mcp_server")?).await?)
}

async fn hangar_call(supervisor: &AsCaller, args: Arguments) -> Outcome {
    let spec = batch::parse(args)?;
    Ok(batch::run(supervisor.clone(), spec).await.into_value())
}

/// `hangar_call`'s arguments read, for a call answered as an event stream: `None` when they are
/// wrong (the plain answer then says how).
pub fn hangar_call_spec(arguments: Option<Value>) -> Option<batch::BatchSpec> {
    batch::parse(Arguments::new(arguments).ok()?).ok()
}

/// `hangar_call` with its calls' notifications (as far as `relay` asks) sent to `sink`
/// meanwhile; `params`, the call's other params (the client's log level goes to the upstreams).
/// The result is the one [`call`] answers.
pub async fn hangar_call_watched(
    supervisor: &AsCaller,
    spec: batch::BatchSpec,
    params: &Map<String, Value>,
    sink: mpsc::UnboundedSender<Value>,
    relay: Relay,
) -> Value {
    let watch = batch::Watch { sink, relay, extra: batch_extra(params, false) };
    let value = batch::run_watched(supervisor.clone(), spec, Some(watch)).await.into_value();
    with_upstream_blocks(value)
}

/// `hangar_call` for a client that takes tasks (SEP-2663): the supervisor runs the batch, and
/// one slower than the shortcut becomes a task it owns (any API instance answers `tasks/get`).
/// Its arguments are read here first, and refused as [`call`] refuses them. The calls declare
/// the client's capabilities (from `params`, the call's other params) to their upstreams.
pub async fn hangar_call_task(
    supervisor: &AsCaller,
    arguments: Option<Value>,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let spec = match batch::parse(Arguments::new(arguments)?) {
        Ok(spec) => spec,
        Err(failure) => return failed(failure),
    };
    hangar_call_task_watched(supervisor, spec, params, Relay::default()).1.await
}

/// [`hangar_call_task`] for a client that gave a progress token or a log level, its arguments
/// read (see [`hangar_call_spec`]): its calls' notifications, as far as `relay` asks (progress
/// with the supervisor's token), arrive on the receiver until it is answered, with its result
/// or as a task.
pub fn hangar_call_task_watched<'a>(
    supervisor: &'a AsCaller,
    spec: batch::BatchSpec,
    params: &Map<String, Value>,
    relay: Relay,
) -> (mpsc::UnboundedReceiver<Value>, BoxFuture<'a, Result<Value, RpcError>>) {
    let extra = batch_extra(params, true);
    let stance = stance::hangar(extra.as_ref(), true);
    let spec = CallSpec::new(Called::Batch(spec), stance, relay, extra);
    let (notices, answer) = supervisor.call(spec);
    (notices, Box::pin(async move { answer.await.or_else(|err| failed(err.into())) }))
}

/// Whether a 2026-07-28 client's `hangar_call` (`params`, its other params) is the
/// supervisor's to run as a held batch: its client can be asked something an upstream may ask
/// (its `_meta` client capabilities), or it retries a batch the hangar holds.
pub fn takes_questions(params: &Map<String, Value>) -> bool {
    let declared = params.get("_meta").and_then(|m| m.get(META_CLIENT_CAPABILITIES));
    retries_held_batch(params) || declared.is_some_and(can_be_asked)
}

fn retries_held_batch(params: &Map<String, Value>) -> bool {
    params.get(REQUEST_STATE).and_then(Value::as_str).is_some_and(|s| s.starts_with(HELD_BATCH_STATE_PREFIX))
}

/// `hangar_call` of a 2026-07-28 client that [`takes_questions`]: the supervisor runs the batch,
/// and the calls' questions (a legacy upstream's own sampling, elicitation or roots request, or
/// a modern upstream's `input_required`) come back as one `input_required`, answered by the
/// retry. Arguments are read, and refused, as [`call`] does.
pub async fn hangar_call_held(
    supervisor: &AsCaller,
    arguments: Option<Value>,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    let spec = match batch::parse(Arguments::new(arguments)?) {
        Ok(spec) => spec,
        Err(failure) => return failed(failure),
    };
    hangar_call_held_watched(supervisor, spec, params, Relay::default()).1.await
}

/// [`hangar_call_held`], its arguments read (see [`hangar_call_spec`]), with its calls'
/// notifications (as far as `relay` asks) on the receiver until it is answered.
pub fn hangar_call_held_watched<'a>(
    supervisor: &'a AsCaller,
    spec: batch::BatchSpec,
    params: &Map<String, Value>,
    relay: Relay,
) -> (mpsc::UnboundedReceiver<Value>, BoxFuture<'a, Result<Value, RpcError>>) {
    let retry = retries_held_batch(params);
    let mut extra = batch_extra(params, true).unwrap_or_else(|| json!({}));
    for key in [REQUEST_STATE, INPUT_RESPONSES] {
        if let Some(value) = params.get(key) {
            extra[key] = value.clone();
        }
    }
    let stance = stance::hangar(Some(&extra), false);
    let spec = CallSpec::new(Called::Batch(spec), stance, relay, Some(extra));
    let (notices, answer) = supervisor.call(spec);
    let answer = async move {
        match answer.await {
            // A retry naming no batch the hangar holds, or answering none of its questions.
            Err(err) if retry && err.kind == ErrorKind::InvalidArgument => Err(RpcError::invalid_params(err.message)),
            answer => answer.or_else(|err| failed(err.into())),
        }
    };
    (notices, Box::pin(answer))
}

/// What a batch's calls pass on to their upstreams of the client's params (`params`, the call's
/// other params): its log level, and (`capabilities`) its client capabilities.
pub(super) fn batch_extra(params: &Map<String, Value>, capabilities: bool) -> Option<Value> {
    let meta = params.get("_meta")?;
    let keys = if capabilities { &[META_LOG_LEVEL, META_CLIENT_CAPABILITIES][..] } else { &[META_LOG_LEVEL][..] };
    let passed: Map<String, Value> =
        keys.iter().filter_map(|key| meta.get(*key).map(|value| ((*key).to_owned(), value.clone()))).collect();
    (!passed.is_empty()).then(|| json!({"_meta": passed}))
}

#[cfg(test)]
#[path = "tools_tests.rs"]
mod tests;
