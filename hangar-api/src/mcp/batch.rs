//! `hangar_call`: many upstream tool calls at once, bounded, reported in order.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use hangar_core::ipc::{ErrorKind, IpcError};
use hangar_core::jsonrpc::RpcError;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

use super::args::Arguments;
use super::errors::ToolFailure;
use crate::random;
use crate::supervisor::AsCaller;

pub const MAX_CALLS: usize = 100;
pub const DEFAULT_CONCURRENCY: usize = 8;
pub const MAX_CONCURRENCY: usize = 64;
const DEFAULT_TIMEOUT_S: f64 = 60.0;
/// Longer timeouts are clamped: a day is already longer than any client waits.
const MAX_TIMEOUT_S: f64 = 86_400.0;

#[derive(Debug, Clone, PartialEq)]
pub struct BatchSpec {
    pub calls: Vec<CallSpec>,
    pub max_concurrency: usize,
    pub fail_fast: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CallSpec {
    pub mcp_server: String,
    pub tool: String,
    pub arguments: Value,
    pub timeout_ms: u64,
}

#[derive(Debug, Serialize)]
pub struct BatchReport {
    pub batch_id: String,
    pub success: bool,
    pub total: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub elapsed_ms: u64,
    pub results: Vec<CallReport>,
}

#[derive(Debug, Serialize)]
pub struct CallReport {
    pub index: usize,
    pub call_id: String,
    pub success: bool,
    /// The upstream's own `tools/call` result, verbatim; null on failure.
    pub result: Value,
    pub error: Option<String>,
    pub error_type: Option<&'static str>,
    pub elapsed_ms: u64,
}

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

/// Where the calls' upstream progress notifications go while they run (each as the upstream
/// sent it, with the supervisor's token), when the client asked to hear of progress.
pub type ProgressSink = Option<mpsc::UnboundedSender<Value>>;

/// Runs every call, at most `max_concurrency` at a time, starting them in index order. With
/// `fail_fast`, calls not yet started when one fails are reported as cancelled.
pub async fn run(supervisor: AsCaller, spec: BatchSpec) -> BatchReport {
    run_watched(supervisor, spec, None).await
}

/// [`run`], with every call's progress notifications sent to `progress`.
pub async fn run_watched(supervisor: AsCaller, mut spec: BatchSpec, progress: ProgressSink) -> BatchReport {
    let started = Instant::now();
    let total = spec.calls.len();
    if total == 1
        && let Some(call) = spec.calls.pop()
    {
        // The common case, one call: run it here rather than in a task of its own (a task hop
        // costs a wake-up and an allocation per call); dropping this future still cancels it.
        return report(started, vec![run_one(&supervisor, 0, call, progress).await]);
    }
    let permits = Arc::new(Semaphore::new(spec.max_concurrency.max(1)));
    let failed = Arc::new(AtomicBool::new(false));
    let mut slots: Vec<Option<CallReport>> = (0..total).map(|_| None).collect();
    // Dropping the set (the client went away) aborts the calls still running.
    let mut tasks = JoinSet::new();
    for (index, call) in spec.calls.into_iter().enumerate() {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break; // The semaphore is never closed; the slot is reported as lost below.
        };
        if spec.fail_fast && failed.load(Ordering::SeqCst) {
            store(&mut slots, CallReport::cancelled(index));
            continue;
        }
        let supervisor = supervisor.clone();
        let failed = failed.clone();
        let progress = progress.clone();
        tasks.spawn(async move {
            let report = run_one(&supervisor, index, call, progress).await;
            if !report.success {
                failed.store(true, Ordering::SeqCst);
            }
            drop(permit); // Only now, so a failure is seen before the next call may start.
            report
        });
    }
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(report) => store(&mut slots, report),
            Err(err) => tracing::error!(error = %err, "a hangar_call task did not finish"),
        }
    }
    let results: Vec<CallReport> =
        slots.into_iter().enumerate().map(|(index, slot)| slot.unwrap_or_else(|| CallReport::lost(index))).collect();
    report(started, results)
}

fn report(started: Instant, results: Vec<CallReport>) -> BatchReport {
    let total = results.len();
    let succeeded = results.iter().filter(|r| r.success).count();
    BatchReport {
        batch_id: random::hex(16),
        success: succeeded == total,
        total,
        succeeded,
        failed: total - succeeded,
        elapsed_ms: millis(started),
        results,
    }
}

impl BatchReport {
    /// The report as JSON. `serde_json::to_value` would deep-copy every upstream result (a cost
    /// proportional to their size), so the results are taken out first and moved back in.
    pub fn into_value(mut self) -> Value {
        let results: Vec<Value> = self.results.iter_mut().map(|r| std::mem::take(&mut r.result)).collect();
        // Cannot fail: every field serializes and every key is a string.
        let mut value = serde_json::to_value(&self).unwrap_or_default();
        if let Some(slots) = value.get_mut("results").and_then(Value::as_array_mut) {
            for (slot, result) in slots.iter_mut().zip(results) {
                slot["result"] = result;
            }
        }
        value
    }
}

fn store(slots: &mut [Option<CallReport>], report: CallReport) {
    if let Some(slot) = slots.get_mut(report.index) {
        *slot = Some(report);
    }
}

async fn run_one(supervisor: &AsCaller, index: usize, call: CallSpec, progress: ProgressSink) -> CallReport {
    let call_id = random::hex(8);
    let started = Instant::now();
    let outcome = match progress {
        None => supervisor.call(&call.mcp_server, &call.tool, call.arguments, Some(call.timeout_ms)).await,
        Some(sink) => {
            let (mut notices, reply) =
                supervisor.call_watched(&call.mcp_server, &call.tool, call.arguments, Some(call.timeout_ms));
            tokio::pin!(reply);
            loop {
                tokio::select! {
                    Some(notice) = notices.recv() => { let _ = sink.send(notice); }
                    outcome = &mut reply => {
                        // Notices that raced the reply still go first.
                        while let Ok(notice) = notices.try_recv() {
                            let _ = sink.send(notice);
                        }
                        break outcome;
                    }
                }
            }
        }
    };
    let elapsed_ms = millis(started);
    match outcome {
        Ok(result) => CallReport { index, call_id, success: true, result, error: None, error_type: None, elapsed_ms },
        Err(err) => CallReport::failed(index, call_id, &err, elapsed_ms),
    }
}

impl CallReport {
    fn failed(index: usize, call_id: String, err: &IpcError, elapsed_ms: u64) -> Self {
        CallReport {
            index,
            call_id,
            success: false,
            result: Value::Null,
            error: Some(err.message.clone()),
            error_type: Some(err.kind.as_str()),
            elapsed_ms,
        }
    }

    fn cancelled(index: usize) -> Self {
        CallReport {
            index,
            call_id: random::hex(8),
            success: false,
            result: Value::Null,
            error: Some("not started: an earlier call in the batch failed and fail_fast is set".into()),
            error_type: Some("cancelled"),
            elapsed_ms: 0,
        }
    }

    /// A call whose task ended without a report (it panicked): never expected, still reported.
    fn lost(index: usize) -> Self {
        let err = IpcError::new(ErrorKind::Internal, "the call ended without a result");
        CallReport::failed(index, random::hex(8), &err, 0)
    }
}

fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
