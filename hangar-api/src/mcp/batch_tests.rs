#![allow(clippy::unwrap_used)]

use std::sync::atomic::Ordering;

use serde_json::json;

use super::*;
use crate::testing::FakeSupervisor;

fn call(tool: &str, delay_ms: u64) -> CallSpec {
    CallSpec {
        mcp_server: "math".into(),
        tool: tool.into(),
        arguments: json!({"delay_ms": delay_ms}),
        timeout_ms: 60_000,
    }
}

fn spec(calls: Vec<CallSpec>, max_concurrency: usize, fail_fast: bool) -> BatchSpec {
    BatchSpec { calls, max_concurrency, fail_fast }
}

fn parsed(args: Value) -> Result<BatchSpec, ToolFailure> {
    parse(Arguments::new(Some(args)).unwrap())
}

#[tokio::test]
async fn results_come_back_in_index_order_whatever_finishes_first() {
    let fake = FakeSupervisor::new();
    let calls = vec![call("slow", 60), call("fast", 0), call("fail", 20), call("mid", 30)];
    let report = run(crate::testing::as_anonymous(&fake), spec(calls, 8, false)).await;
    let indexes: Vec<usize> = report.results.iter().map(|r| r.index).collect();
    assert_eq!(indexes, [0, 1, 2, 3]);
    assert_eq!((report.total, report.succeeded, report.failed, report.success), (4, 3, 1, false));
    assert_eq!(report.results[0].result["echo"]["delay_ms"], 60, "the upstream result is passed through verbatim");
    let failed = &report.results[2];
    assert_eq!((failed.result.clone(), failed.error_type), (Value::Null, Some("upstream_error")));
    assert_eq!(failed.error.as_deref(), Some("the upstream answered with an error"));
    assert_eq!(fake.peak_in_flight.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn concurrency_is_capped_and_calls_start_in_order() {
    let fake = FakeSupervisor::new();
    let calls: Vec<CallSpec> = (0..9).map(|i| call(&format!("t{i}"), 15)).collect();
    let report = run(crate::testing::as_anonymous(&fake), spec(calls, 3, false)).await;
    assert!(report.success);
    assert_eq!(fake.peak_in_flight.load(Ordering::SeqCst), 3);
    let started = fake.started_calls.lock().unwrap().clone();
    assert_eq!(started, (0..9).map(|i| format!("math/t{i}")).collect::<Vec<_>>());
}

#[tokio::test]
async fn fail_fast_cancels_the_calls_not_yet_started() {
    let fake = FakeSupervisor::new();
    let calls = vec![call("fail", 0), call("a", 0), call("b", 0), call("c", 0)];
    let report = run(crate::testing::as_anonymous(&fake), spec(calls, 1, true)).await;
    let types: Vec<Option<&str>> = report.results.iter().map(|r| r.error_type).collect();
    assert_eq!(types, [Some("upstream_error"), Some("cancelled"), Some("cancelled"), Some("cancelled")]);
    assert_eq!((report.succeeded, report.failed), (0, 4));
    assert_eq!(fake.started_calls.lock().unwrap().len(), 1, "nothing after the failure started");
    let ids: std::collections::HashSet<&str> = report.results.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(ids.len(), 4, "every call has its own id");
}

#[tokio::test]
async fn without_fail_fast_every_call_runs() {
    let fake = FakeSupervisor::new();
    let report = run(crate::testing::as_anonymous(&fake), spec(vec![call("fail", 0), call("a", 0)], 1, false)).await;
    assert_eq!((report.succeeded, report.failed), (1, 1));
    assert_eq!(fake.started_calls.lock().unwrap().len(), 2);
}

#[test]
fn parse_applies_defaults_caps_and_per_call_timeouts() {
    let spec = parsed(json!({
        "calls": [{"mcp_server": "m", "tool": "t"}, {"mcp_server": "m", "tool": "u", "arguments": {"x": 1}, "timeout": 2.5}],
        "timeout": 10,
        "max_concurrency": 500,
    }))
    .unwrap();
    assert_eq!(spec.max_concurrency, MAX_CONCURRENCY);
    assert!(!spec.fail_fast);
    assert_eq!((spec.calls[0].timeout_ms, spec.calls[1].timeout_ms), (10_000, 2_500));
    assert_eq!((spec.calls[0].arguments.clone(), spec.calls[1].arguments.clone()), (json!({}), json!({"x": 1})));
    let spec = parsed(json!({"calls": [{"mcp_server": "m", "tool": "t"}]})).unwrap();
    assert_eq!((spec.max_concurrency, spec.calls[0].timeout_ms), (DEFAULT_CONCURRENCY, 60_000));
}

#[test]
fn parse_refuses_bad_shapes_as_rpc_errors_naming_the_argument() {
    for (args, named) in [
        (json!({}), "calls"),
        (json!({"calls": "x"}), "calls"),
        (json!({"calls": [{"tool": "t"}]}), "calls[0].mcp_server"),
        (json!({"calls": [{"mcp_server": "m", "tool": "t"}, {"mcp_server": "m"}]}), "calls[1].tool"),
        (json!({"calls": [{"mcp_server": "m", "tool": "t", "arguments": [1]}]}), "calls[0].arguments"),
        (json!({"calls": [{"mcp_server": "m", "tool": "t"}], "max_concurrency": 0}), "max_concurrency"),
        (json!({"calls": [{"mcp_server": "m", "tool": "t"}], "timeout": "soon"}), "timeout"),
        (json!({"calls": [{"mcp_server": "m", "tool": "t"}], "fail_fast": "yes"}), "fail_fast"),
    ] {
        match parsed(args.clone()) {
            Err(ToolFailure::Rpc(err)) => {
                assert_eq!(err.code, -32602);
                assert!(err.message.contains(&format!("`{named}`")), "{} should name {named}", err.message);
            }
            other => panic!("{args}: {other:?}"),
        }
    }
}

#[test]
fn too_many_calls_is_the_tools_invalid_argument() {
    let calls: Vec<Value> = (0..=MAX_CALLS).map(|_| json!({"mcp_server": "m", "tool": "t"})).collect();
    match parsed(json!({"calls": calls})) {
        Err(ToolFailure::Tool(err)) => assert_eq!(err.kind, ErrorKind::InvalidArgument),
        other => panic!("{other:?}"),
    }
    assert!(matches!(parsed(json!({"calls": []})), Err(ToolFailure::Tool(_))));
}

#[tokio::test]
async fn into_value_is_to_value_without_the_copies() {
    let fake = FakeSupervisor::new();
    for calls in [vec![call("a", 0)], vec![call("fail", 0), call("b", 0)]] {
        let report = run(crate::testing::as_anonymous(&fake), spec(calls, 1, true)).await;
        let derived = serde_json::to_value(&report).unwrap();
        assert_eq!(report.into_value(), derived);
    }
}
