//! Running `hangar_call`'s batch (`hangar_core::batch`): many calls at once, bounded, reported
//! in order. The API runs a plain `hangar_call` here (each call a request to the supervisor);
//! the supervisor runs a `hangar_call` that became a task here (each call made in place).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use hangar_core::batch::{BatchReport, BatchSpec, CallReport, CallSpec};
use hangar_core::ipc::IpcError;
use serde_json::Value;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::random;

/// Runs every call of `spec` through `call`, at most `max_concurrency` at a time, starting them
/// in index order. With `fail_fast`, calls not yet started when one fails are reported as
/// cancelled. Dropping the future stops every call still running.
pub async fn run<F, Fut>(mut spec: BatchSpec, call: F) -> BatchReport
where
    F: Fn(CallSpec) -> Fut,
    Fut: Future<Output = Result<Value, IpcError>> + Send + 'static,
{
    let started = Instant::now();
    let total = spec.calls.len();
    if total == 1
        && let Some(only) = spec.calls.pop()
    {
        // The common case, one call: run it here rather than in a task of its own (a task hop
        // costs a wake-up and an allocation per call); dropping this future still cancels it.
        return report(started, vec![run_one(0, call(only)).await]);
    }
    let permits = Arc::new(Semaphore::new(spec.max_concurrency.max(1)));
    let failed = Arc::new(AtomicBool::new(false));
    let mut slots: Vec<Option<CallReport>> = (0..total).map(|_| None).collect();
    // Dropping the set (the caller went away) aborts the calls still running.
    let mut tasks = JoinSet::new();
    for (index, one) in spec.calls.into_iter().enumerate() {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break; // The semaphore is never closed; the slot is reported as lost below.
        };
        if spec.fail_fast && failed.load(Ordering::SeqCst) {
            store(&mut slots, CallReport::cancelled(index, random::hex(8)));
            continue;
        }
        let failed = failed.clone();
        let running = call(one);
        tasks.spawn(async move {
            let report = run_one(index, running).await;
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
    let results: Vec<CallReport> = slots
        .into_iter()
        .enumerate()
        .map(|(index, slot)| slot.unwrap_or_else(|| CallReport::lost(index, random::hex(8))))
        .collect();
    report(started, results)
}

fn report(started: Instant, results: Vec<CallReport>) -> BatchReport {
    BatchReport::of(random::hex(16), millis(started), results)
}

fn store(slots: &mut [Option<CallReport>], report: CallReport) {
    if let Some(slot) = slots.get_mut(report.index) {
        *slot = Some(report);
    }
}

async fn run_one(index: usize, running: impl Future<Output = Result<Value, IpcError>>) -> CallReport {
    let call_id = random::hex(8);
    let started = Instant::now();
    let outcome = running.await;
    let elapsed_ms = millis(started);
    match outcome {
        Ok(result) => CallReport::succeeded(index, call_id, result, elapsed_ms),
        Err(err) => CallReport::failed(index, call_id, &err, elapsed_ms),
    }
}

fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}
