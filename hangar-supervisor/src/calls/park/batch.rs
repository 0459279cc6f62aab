//! `hangar_call` as a task: the supervisor runs the batch itself (`hangar_runtime::batch`, each
//! call one of the caller's made in place, audited and admitted like any), so a
//! batch that outlasts its shortcut is a task like a front-door call's: in the book, run on here
//! whatever happens to the API instance that asked, and cancelled as a whole. A call of the
//! batch that asks for input (`input_required`) parks the task with its questions (keyed
//! `<index>/<key>`); once every answer is in, the parked calls run again with theirs and the
//! report is completed. A streamed batch's calls' notices reach its caller until it is answered
//! (its result, or the `CreateTaskResult`); the task runs on unheard.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hangar_core::access::Caller;
use hangar_core::batch::{BatchSpec, CallReport, CallSpec, with_upstream_blocks};
use hangar_core::ipc::{Asks, CallEra, ErrorKind, IpcError, Relay, Reply, Stance, Target};
use hangar_core::jsonrpc::INTERNAL_ERROR;
use hangar_core::mcp::{INPUT_REQUESTS, INPUT_RESPONSES, REQUEST_STATE};
use hangar_core::trace::TraceContext;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::{
    AbortOnDrop, Hangar, MAX_SHORTCUT, Refusal, RunningCall, relay_channel, within_shortcut, without_tasks_extension,
};
use crate::calls::CallRequest;
use crate::calls::kept::now_ms;

/// A `hangar_call` batch the supervisor runs ([`Called::Batch`]), with what its client sent for
/// every call of it.
pub(crate) struct BatchRequest {
    pub batch: BatchSpec,
    pub trace: Option<TraceContext>,
    /// The client's params for every call's upstream (its `_meta` client capabilities and log
    /// level), and in a retry of a held batch its `requestState` and `inputResponses`.
    pub extra: Option<Value>,
    /// The calls' notices (each call's own).
    pub relay: Relay,
    /// What the client can be asked (a call whose upstream asks then holds, or parks).
    pub asks: Asks,
}

impl Hangar {
    /// A batch of a client that takes tasks: the batch's `tools/call` result if it ends within
    /// the shortcut, else a task, recorded in the book before it is answered.
    pub(crate) async fn task_batch(
        &self,
        caller: &Caller,
        request: BatchRequest,
        shortcut_ms: u64,
        notices: Option<mpsc::UnboundedSender<Value>>,
    ) -> Result<Reply, IpcError> {
        let BatchRequest { batch, trace, extra, relay, asks } = request;
        let me = self.owned()?;
        // The hangar owns the task: the upstreams are not invited to make their own.
        let extra = without_tasks_extension(extra);
        // The calls' notices are heard until the batch is answered, then dropped.
        let (heard_to, heard) = relay_channel(notices.is_some() && !relay.is_off()).unzip();
        let relayed = heard_to.map(|to| (relay, to));
        // Past its quota the caller is refused before any of its calls runs.
        self.calls.tasks.book().admits(&caller.identity, now_ms()).map_err(|refusal| super::refused(&refusal, ""))?;
        // What the batch reaches, for its task's readers' views.
        let reached = batch.calls.iter().map(|call| (call.mcp_server.clone(), call.tool.clone())).collect();
        let mut running = tokio::spawn(me.clone().run_batch(caller.clone(), (batch, asks), trace, extra, relayed));
        // A caller that gives up within the shortcut stops the batch, as it would a plain one.
        let mut unattended = AbortOnDrop(Some(running.abort_handle()));
        let shortcut = Duration::from_millis(shortcut_ms).min(MAX_SHORTCUT);
        // A batch that asks for input within the shortcut is a task at once: only a task can ask.
        let mut parked = None;
        if let Some(answered) = within_shortcut(shortcut, &mut running, heard, notices.as_ref()).await {
            match answered.unwrap_or_else(|_| Err(ended())) {
                Ok(result) if asks_for_input(&result) => parked = Some(result),
                answered => return answered.map(Reply::Called),
            }
        }
        let (id, created) = self.new_task(caller);
        let created = match created {
            Ok(created) => created,
            Err(Refusal::Full | Refusal::Unknown | Refusal::Quota { .. }) if parked.is_some() => return Err(too_many()),
            Err(Refusal::Full | Refusal::Unknown | Refusal::Quota { .. }) => {
                tracing::warn!("the task book is full; the batch runs without a task");
                // Without a task, a batch whose calls ask cannot be answered.
                return match running.await.unwrap_or_else(|_| Err(ended())) {
                    Ok(result) if asks_for_input(&result) => Err(too_many()),
                    answered => answered.map(Reply::Called),
                };
            }
        };
        unattended.0 = None;
        self.calls.tasks.forget_gone();
        self.calls.tasks.reached(&id, reached);
        if let Some(result) = parked {
            self.calls.tasks.book().answered(&id, 0, result, now_ms());
            return Ok(Reply::Task(created));
        }
        self.calls.tasks.runs().insert(id.clone(), running.abort_handle());
        tokio::spawn(me.settle(id, 0, running));
        Ok(Reply::Task(created))
    }

    /// Runs every call of `batch` as `caller`: the result carries the report (a failed call is
    /// in it, so the result is no error), or asks the calls' questions (see [`settled`]). With
    /// `relayed`, every call's notices (as far as its relay asks) go to its sender. Boxed and
    /// `Send` by declaration, as `run_call` is.
    pub(crate) fn run_batch(
        self: Arc<Self>,
        caller: Caller,
        (batch, asks): (BatchSpec, Asks),
        trace: Option<TraceContext>,
        extra: Option<Value>,
        relayed: Option<(Relay, mpsc::UnboundedSender<Value>)>,
    ) -> RunningCall {
        Box::pin(async move {
            let calls: Vec<(usize, CallSpec)> = batch.calls.iter().cloned().enumerate().collect();
            let report = hangar_runtime::batch::run(batch, |call| {
                let (me, caller, trace, extra) = (self.clone(), caller.clone(), trace.clone(), extra.clone());
                let relayed = relayed.clone();
                async move { me.batch_call(&caller, (call, asks), trace, extra, relayed).await }
            })
            .await;
            Ok(settled(report.into_value(), calls, extra, asks))
        })
    }

    /// Resumes task `task_id`, a batch parked for its calls' questions, when `request_state`
    /// says it is one (else false): its parked calls run again with their answers.
    pub(crate) fn resume_batch(
        &self,
        caller: &Caller,
        task_id: &str,
        responses: &Value,
        request_state: Option<&Value>,
        run: u64,
    ) -> bool {
        let Some(request_state) = request_state.filter(|s| s.get(PARKED).is_some()) else { return false };
        let Some(me) = self.me.upgrade() else { return true };
        let running = match me.clone().resume_parked(caller.clone(), request_state, responses, None) {
            Ok(running) => tokio::spawn(running),
            Err(lost) => {
                let lost = json!({"code": INTERNAL_ERROR, "message": lost.message});
                self.calls.tasks.book().failed(task_id, run, lost, now_ms());
                return true;
            }
        };
        self.calls.tasks.runs().insert(task_id.to_owned(), running.abort_handle());
        tokio::spawn(me.settle(task_id.to_owned(), run, running));
        true
    }

    /// The run that resumes a parked batch (`request_state`: the state [`settled`] gave it)
    /// with the client's answers (`responses`, keyed `<index>/<key>`); `relayed` as
    /// [`Hangar::run_batch`]'s. An error if the state does not read back.
    pub(crate) fn resume_parked(
        self: Arc<Self>,
        caller: Caller,
        request_state: &Value,
        responses: &Value,
        relayed: Option<(Relay, mpsc::UnboundedSender<Value>)>,
    ) -> Result<RunningCall, IpcError> {
        let parked = request_state.get(PARKED).cloned().unwrap_or_default();
        let parked = serde_json::from_value::<Parked>(parked).map_err(|err| {
            tracing::error!(%err, "a parked batch's state did not read back");
            IpcError::new(ErrorKind::Internal, "the batch's state was lost")
        })?;
        Ok(self.run_parked(caller, parked, answers_by_call(responses), relayed))
    }

    /// Runs a parked batch's calls again, each with its answers and its upstream's
    /// `requestState` (or the hangar's, for a held call), and puts their outcomes in the report.
    fn run_parked(
        self: Arc<Self>,
        caller: Caller,
        parked: Parked,
        mut answers: HashMap<usize, Map<String, Value>>,
        relayed: Option<(Relay, mpsc::UnboundedSender<Value>)>,
    ) -> RunningCall {
        Box::pin(async move {
            let Parked { mut report, calls, extra: client_extra, asks } = parked;
            let again: Vec<(usize, CallSpec)> = calls.iter().map(|p| (p.index, p.call.clone())).collect();
            // Dropping the set (the task was cancelled) stops every call.
            let mut running = JoinSet::new();
            for ParkedCall { index, call, request_state } in calls {
                let answers = Value::Object(answers.remove(&index).unwrap_or_default());
                let mut extra = match client_extra.clone() {
                    Some(Value::Object(params)) => params,
                    _ => Map::new(),
                };
                extra.insert(INPUT_RESPONSES.to_owned(), answers);
                if let Some(state) = request_state {
                    extra.insert(REQUEST_STATE.into(), state);
                }
                let (me, caller, relayed) = (self.clone(), caller.clone(), relayed.clone());
                running.spawn(async move {
                    let started = Instant::now();
                    let outcome = me.batch_call(&caller, (call, asks), None, Some(Value::Object(extra)), relayed).await;
                    (index, started, outcome)
                });
            }
            while let Some(joined) = running.join_next().await {
                let Ok((index, started, outcome)) = joined else { continue };
                let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                replace_call(&mut report, index, outcome, elapsed_ms);
            }
            Ok(settled(report, again, client_extra, asks))
        })
    }

    /// One call of a batch, as the API would have sent it for a plain `hangar_call` (`extra`:
    /// the client's params, and the answers of a resumed call; `relayed`: its relay, and where
    /// its notices go). It may be held, so a legacy upstream's own request asks a client that
    /// can be asked (`input_required`), as a front-door call's does; it is answered as the
    /// hangar's own surface (no upstream words).
    async fn batch_call(
        &self,
        caller: &Caller,
        (call, asks): (CallSpec, Asks),
        trace: Option<TraceContext>,
        extra: Option<Value>,
        relayed: Option<(Relay, mpsc::UnboundedSender<Value>)>,
    ) -> Result<Value, IpcError> {
        let (relay, notices) = relayed.unzip();
        let call = CallRequest {
            target: Target::tool(call.mcp_server, call.tool),
            arguments: call.arguments,
            timeout_ms: Some(call.timeout_ms),
            relay: relay.unwrap_or_default(),
            extra,
            trace,
            param_headers: None,
            // A batch's call names its tool; it is no front-door call.
            stance: Stance { era: CallEra::Hangar, asks, tasks: None, cancel_by: None },
            hold: true,
            notices,
        };
        self.call_as(caller, call).await
    }
}

fn too_many() -> IpcError {
    IpcError::new(ErrorKind::ConcurrencyLimited, "too many tasks: a batch whose calls ask for input needs one")
}

fn ended() -> IpcError {
    IpcError::new(ErrorKind::Internal, "the batch's task ended")
}

/// Where a parked batch keeps its state: in the `requestState` the book keeps for the task
/// (never shown to the client).
const PARKED: &str = "hangar/parked_batch";

/// A batch waiting for answers: its report so far, and the calls that asked.
#[derive(Serialize, Deserialize)]
struct Parked {
    report: Value,
    calls: Vec<ParkedCall>,
    /// The client's params for the calls' upstreams.
    extra: Option<Value>,
    /// What the client can be asked.
    #[serde(default)]
    asks: Asks,
}

#[derive(Serialize, Deserialize)]
struct ParkedCall {
    index: usize,
    call: CallSpec,
    request_state: Option<Value>,
}

/// Whether a batch's result asks for input (it parks the task).
fn asks_for_input(result: &Value) -> bool {
    result.get("resultType").and_then(Value::as_str) == Some("input_required")
}

/// The batch's result once its calls have run: `hangar_call`'s result carrying `report`, or,
/// when some of `calls` (by index) asked for input, an `input_required` result with their
/// questions (keyed `<index>/<key>`) whose `requestState` keeps the report and those calls.
fn settled(report: Value, calls: Vec<(usize, CallSpec)>, extra: Option<Value>, asks: Asks) -> Value {
    let mut questions = Map::new();
    let mut parked = Vec::new();
    for (index, call) in calls {
        let Some(result) = report.pointer(&format!("/results/{index}/result")).filter(|r| asks_for_input(r)) else {
            continue;
        };
        for (key, question) in result.get(INPUT_REQUESTS).and_then(Value::as_object).into_iter().flatten() {
            questions.insert(format!("{index}/{key}"), question.clone());
        }
        parked.push(ParkedCall { index, call, request_state: result.get(REQUEST_STATE).cloned() });
    }
    if questions.is_empty() {
        return with_upstream_blocks(report);
    }
    let state = serde_json::to_value(Parked { report, calls: parked, extra, asks }).unwrap_or_default();
    json!({"resultType": "input_required", INPUT_REQUESTS: questions, REQUEST_STATE: {PARKED: state}})
}

/// The client's answers (`<index>/<key>`), by call index and the upstream's own keys.
fn answers_by_call(responses: &Value) -> HashMap<usize, Map<String, Value>> {
    let mut by_call: HashMap<usize, Map<String, Value>> = HashMap::new();
    for (key, answer) in responses.as_object().into_iter().flatten() {
        if let Some((index, key)) = key.split_once('/')
            && let Ok(index) = index.parse::<usize>()
        {
            by_call.entry(index).or_default().insert(key.to_owned(), answer.clone());
        }
    }
    by_call
}

/// Call `index` of `report` ran again: its outcome replaces the one that asked, and the
/// counts follow.
fn replace_call(report: &mut Value, index: usize, outcome: Result<Value, IpcError>, elapsed_ms: u64) {
    let Some(slot) = report.pointer_mut(&format!("/results/{index}")) else { return };
    let call_id = slot.get("call_id").and_then(Value::as_str).unwrap_or_default().to_owned();
    let spent = slot.get("elapsed_ms").and_then(Value::as_u64).unwrap_or(0).saturating_add(elapsed_ms);
    let replaced = match outcome {
        Ok(result) => CallReport::succeeded(index, call_id, result, spent),
        Err(err) => CallReport::failed(index, call_id, &err, spent),
    };
    *slot = serde_json::to_value(&replaced).unwrap_or_default();
    let results = report.get("results").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let total = results.len();
    let succeeded = results.iter().filter(|c| c["success"] == true).count();
    report["succeeded"] = json!(succeeded);
    report["failed"] = json!(total - succeeded);
    report["success"] = json!(succeeded == total);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn call(tool: &str) -> CallSpec {
        CallSpec { mcp_server: "m".into(), tool: tool.into(), arguments: json!({}), timeout_ms: 1000 }
    }

    fn report(results: Vec<Value>) -> Value {
        json!({"total": results.len(), "succeeded": results.len(), "failed": 0, "success": true, "results": results})
    }

    fn slot(index: usize, result: Value) -> Value {
        json!({"index": index, "call_id": format!("c{index}"), "success": true, "result": result, "elapsed_ms": 5})
    }

    #[test]
    fn a_batch_with_no_questions_is_hangar_calls_result() {
        let report = report(vec![slot(0, json!({"content": [{"type": "text", "text": "hi"}]}))]);
        let result = settled(report.clone(), vec![(0, call("a"))], None, Asks::default());
        assert_eq!((result["isError"].clone(), result["structuredContent"].clone()), (json!(false), report));
    }

    #[test]
    fn questions_are_keyed_by_call_and_the_state_reads_back() {
        let asking = json!({"resultType": "input_required", "inputRequests": {"name": {"method": "elicitation/create"}}, "requestState": "s1"});
        let report = report(vec![slot(0, json!({"content": []})), slot(1, asking)]);
        let extra = Some(json!({"_meta": {"k": 1}}));
        let result = settled(report, vec![(0, call("a")), (1, call("b"))], extra.clone(), Asks::default());
        assert!(asks_for_input(&result));
        assert_eq!(result[INPUT_REQUESTS].as_object().unwrap().keys().collect::<Vec<_>>(), ["1/name"]);
        let parked: Parked = serde_json::from_value(result[REQUEST_STATE][PARKED].clone()).unwrap();
        assert_eq!(parked.calls.len(), 1);
        assert_eq!((parked.calls[0].index, parked.calls[0].request_state.clone()), (1, Some(json!("s1"))));
        assert_eq!((parked.calls[0].call.tool.as_str(), parked.extra), ("b", extra));
    }

    #[test]
    fn answers_go_to_their_calls_and_odd_keys_are_dropped() {
        let by_call = answers_by_call(&json!({"1/name": "Ada", "1/a/b": 2, "0/x": true, "name": 1, "z/y": 0}));
        assert_eq!(by_call.len(), 2);
        assert_eq!(by_call[&1], Map::from_iter([("name".into(), json!("Ada")), ("a/b".into(), json!(2))]));
        assert_eq!(by_call[&0], Map::from_iter([("x".into(), json!(true))]));
    }

    #[test]
    fn a_resumed_call_replaces_its_slot_and_the_counts_follow() {
        let mut report = report(vec![slot(0, json!({})), slot(1, json!({"resultType": "input_required"}))]);
        let err = IpcError::new(ErrorKind::UpstreamError, "no");
        replace_call(&mut report, 1, Err(err), 7);
        assert_eq!((report["succeeded"].clone(), report["failed"].clone()), (json!(1), json!(1)));
        assert_eq!(report["success"], false);
        let slot = &report["results"][1];
        assert_eq!((slot["call_id"].clone(), slot["elapsed_ms"].clone()), (json!("c1"), json!(12)));
        assert_eq!(slot["error_type"], "upstream_error");
        replace_call(&mut report, 9, Ok(json!({})), 1); // no such call: nothing changes
        assert_eq!(report["results"].as_array().unwrap().len(), 2);
    }
}
