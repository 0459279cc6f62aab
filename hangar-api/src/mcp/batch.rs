//! `hangar_call`: many upstream tool calls at once, bounded, reported in order. The batch's
//! data and report are `hangar_core::batch`'s, its runner `hangar_runtime::batch`'s (which the
//! supervisor runs too, for a `hangar_call` that becomes a task); here, its arguments read and
//! each call a request to the supervisor.

use hangar_core::ipc::{ErrorKind, IpcError, Relay};
use hangar_core::jsonrpc::RpcError;
use serde_json::Value;
use tokio::sync::mpsc;

use super::args::Arguments;
use super::errors::ToolFailure;
use crate::supervisor::AsCaller;

pub use hangar_core::batch::{BatchReport, BatchSpec, CallSpec};

pub const MAX_CALLS: usize = 100;
pub const DEFAULT_CONCURRENCY: usize = 8;
pub const MAX_CONCURRENCY: usize = 64;
const DEFAULT_TIMEOUT_S: f64 = 60.0;
/// Longer timeouts are clamped: a day is already longer than any client waits.
const MAX_TIMEOUT_S: f64 = 86_400.0;

/// Reads `hangar_call`'s arguments. Wrong shapes are JSON-RPC errors; a batch over the limit is
/// the tool's own `invalid_argument` failure.
pub fn parse(mut args: Arguments) -> Result<BatchSpec, ToolFailure> {
    let fail_fast = args.optional_bool("fail_fast")?.unwrap_or(false);
    let max_concurrency = args
        .optional_count("max_concurrency")?
        .map_or(DEFAULT_CONCURRENCY, |n| usize::try_from(n).unwrap_or(MAX_CONCURRENCY).min(MAX_CONCURRENCY));
    let batch_timeout = args.optional_seconds("timeout")?.unwrap_or(DEFAULT_TIMEOUT_S);
    let calls = match args.take("calls") {
        Some(Value::Array(calls)) => calls,
        Some(_) => return Err(invalid_params("`calls` must be an array of calls").into()),
        None => return Err(invalid_params("missing required argument `calls`").into()),
    };
    if calls.is_empty() {
        return Err(IpcError::new(ErrorKind::InvalidArgument, "`calls` is empty: give at least one call").into());
    }
    if calls.len() > MAX_CALLS {
        return Err(IpcError::new(
            ErrorKind::InvalidArgument,
            format!("a batch holds at most {MAX_CALLS} calls, not {}", calls.len()),
        )
        .into());
    }
    let calls = calls
        .into_iter()
        .enumerate()
        .map(|(index, call)| parse_call(index, call, batch_timeout))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(BatchSpec { calls, max_concurrency, fail_fast })
}

fn parse_call(index: usize, call: Value, batch_timeout: f64) -> Result<CallSpec, ToolFailure> {
    let prefix = format!("calls[{index}].");
    let mut call = Arguments::nested(Some(call), &prefix, &format!("calls[{index}]"))?;
    let mcp_server = call.required_str("mcp_server")?;
    let tool = call.required_str("tool")?;
    let timeout = call.optional_seconds("timeout")?.unwrap_or(batch_timeout);
    let arguments = match call.take("arguments") {
        None => Value::Object(Default::default()),
        Some(arguments @ Value::Object(_)) => arguments,
        Some(_) => return Err(invalid_params(&format!("`{}` must be an object", call.name("arguments"))).into()),
    };
    Ok(CallSpec { mcp_server, tool, arguments, timeout_ms: seconds_to_ms(timeout) })
}

fn seconds_to_ms(seconds: f64) -> u64 {
    // Float-to-int casts saturate, and the value is clamped first anyway.
    (seconds.min(MAX_TIMEOUT_S) * 1000.0).ceil() as u64
}

fn invalid_params(message: &str) -> RpcError {
    RpcError::invalid_params(format!("Invalid arguments: {message}"))
}

/// What a client that asked to hear of its calls hears: their upstream notifications as far as
/// `relay` asks (each as the upstream sent it, progress with the supervisor's token), sent to
/// `sink` while they run; `extra`, the client's params for every upstream (its log level).
#[derive(Clone)]
pub struct Watch {
    pub sink: mpsc::UnboundedSender<Value>,
    pub relay: Relay,
    pub extra: Option<Value>,
}

/// Runs every call, at most `max_concurrency` at a time, starting them in index order. With
/// `fail_fast`, calls not yet started when one fails are reported as cancelled.
pub async fn run(supervisor: AsCaller, spec: BatchSpec) -> BatchReport {
    run_watched(supervisor, spec, None).await
}

/// [`run`], with every call's notifications sent as `watch` says.
pub async fn run_watched(supervisor: AsCaller, spec: BatchSpec, watch: Option<Watch>) -> BatchReport {
    hangar_runtime::batch::run(spec, move |call| {
        let (supervisor, watch) = (supervisor.clone(), watch.clone());
        async move { call_one(&supervisor, call, watch).await }
    })
    .await
}

async fn call_one(supervisor: &AsCaller, call: CallSpec, watch: Option<Watch>) -> Result<Value, IpcError> {
    let Some(Watch { sink, relay, extra }) = watch else {
        let target = (call.mcp_server.as_str(), call.tool.as_str());
        return supervisor.call_tool(target, call.arguments, Some(call.timeout_ms), Relay::default(), None).1.await;
    };
    let target = (call.mcp_server.as_str(), call.tool.as_str());
    let (mut notices, reply) = supervisor.call_tool(target, call.arguments, Some(call.timeout_ms), relay, extra);
    tokio::pin!(reply);
    loop {
        tokio::select! {
            Some(notice) = notices.recv() => { let _ = sink.send(notice); }
            outcome = &mut reply => {
                // Notices that raced the reply still go first.
                while let Ok(notice) = notices.try_recv() {
                    let _ = sink.send(notice);
                }
                return outcome;
            }
        }
    }
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
