//! The `hangar_*` tools served at `/mcp`: their declarations and what each one does.

use hangar_core::echo::bounded;
use hangar_core::ipc::{ErrorKind, IpcError};
use hangar_core::jsonrpc::RpcError;
use hangar_core::lifecycle::State;
use serde::Serialize;
use serde_json::{Value, json};

use super::args::Arguments;
use super::batch;
use super::errors::ToolFailure;
use crate::json::object;
use crate::shapes::{HealthReport, ServerList, StatusReport, ToolList};
use crate::supervisor::AsCaller;

type Outcome = Result<Value, ToolFailure>;

const TOOL_NAMES: [&str; 8] = [
    "hangar_list",
    "hangar_status",
    "hangar_health",
    "hangar_details",
    "hangar_tools",
    "hangar_start",
    "hangar_stop",
    "hangar_call",
];

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

/// Runs tool `name`. `Ok` is a `tools/call` result (possibly with `isError: true`); `Err` is a
/// JSON-RPC error (unknown tool, bad arguments).
pub async fn call(supervisor: &AsCaller, name: &str, arguments: Option<Value>) -> Result<Value, RpcError> {
    let unknown = || RpcError::invalid_params(format!("Unknown tool: {}", bounded(name)));
    if !TOOL_NAMES.contains(&name) {
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
        Err(ToolFailure::Tool(err)) => {
            let value = json!({"error": err.message, "error_type": err.kind.as_str(), "details": err.details});
            Ok(tool_result(value, true))
        }
        Err(ToolFailure::Rpc(err)) => Err(err),
    }
}

/// The same JSON as text (for clients that read only text) and as structured content.
fn tool_result(value: Value, is_error: bool) -> Value {
    // serde_json::to_string writes straight into a buffer; `Value`'s Display goes through
    // fmt::Formatter a piece at a time, several times slower.
    let text = serde_json::to_string(&value).unwrap_or_default();
    let text = object([("type", Value::from("text")), ("text", Value::String(text))]);
    object([("content", Value::Array(vec![text])), ("structuredContent", value), ("isError", Value::Bool(is_error))])
}

/// The most content blocks of upstream results a `hangar_call` result carries besides its report.
pub const MAX_UPSTREAM_BLOCKS: usize = 64;
/// The most bytes of text and encoded data those blocks hold together.
pub const MAX_UPSTREAM_BLOCK_BYTES: usize = 8 << 20;
/// The content block types of MCP (2025-06-18 and later), which a client can render.
const BLOCK_TYPES: [&str; 5] = ["text", "image", "audio", "resource", "resource_link"];

/// The successful calls' own content blocks, in call order, after the report: an image stays an
/// image a model can see, not escaped JSON inside the report's text. Bounded in count and size; a
/// block of a type MCP does not define, or past the bounds, stays only in the report.
fn upstream_blocks(report: &Value) -> Vec<Value> {
    let results = report.get("results").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let blocks = results
        .iter()
        .filter_map(|r| r.pointer("/result/content").and_then(Value::as_array))
        .flatten()
        .filter(|b| b.get("type").and_then(Value::as_str).is_some_and(|t| BLOCK_TYPES.contains(&t)));
    let mut bytes = 0usize;
    let mut out = Vec::new();
    for block in blocks {
        let size = block_bytes(block);
        if out.len() == MAX_UPSTREAM_BLOCKS || bytes.saturating_add(size) > MAX_UPSTREAM_BLOCK_BYTES {
            break;
        }
        bytes += size;
        out.push(block.clone());
    }
    out
}

/// A block's bulk: its text, encoded data or embedded resource's text or blob.
fn block_bytes(block: &Value) -> usize {
    let len = |v: Option<&Value>| v.and_then(Value::as_str).map_or(0, str::len);
    let resource = block.get("resource");
    len(block.get("text"))
        + len(block.get("data"))
        + len(resource.and_then(|r| r.get("text")))
        + len(resource.and_then(|r| r.get("blob")))
        + len(block.get("uri"))
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

/// `hangar_call` with its calls' progress notifications sent to `progress` meanwhile; the
/// result is the one [`call`] answers.
pub async fn hangar_call_watched(
    supervisor: &AsCaller,
    spec: batch::BatchSpec,
    progress: batch::ProgressSink,
) -> Value {
    let value = batch::run_watched(supervisor.clone(), spec, progress).await.into_value();
    with_upstream_blocks(value)
}

/// The report (text and structured), then the calls' own content blocks.
fn with_upstream_blocks(value: Value) -> Value {
    let blocks = upstream_blocks(&value);
    let mut result = tool_result(value, false);
    if let Some(Value::Array(content)) = result.get_mut("content") {
        content.extend(blocks);
    }
    result
}

#[cfg(test)]
#[path = "tools_tests.rs"]
mod tests;
