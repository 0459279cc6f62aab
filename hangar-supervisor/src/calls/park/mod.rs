//! The pipeline's "park": a call of a client that takes tasks ([`Stance::tasks`]) that outlasts
//! its shortcut becomes a task the supervisor owns
//! (state, result, TTL in [`crate::task_book::Book`]), so any API instance answers `tasks/get` and
//! an API instance's death loses nothing: the call runs on here. The rules are in
//! `crate::task_book`; this file runs the calls and answers the task requests.
//!
//! A task is its owner's only while the owner's view still reaches what its call reached: every
//! read (`tasks/get`, `tasks/update`, `tasks/cancel`, following) checks the caller's current view
//! against the servers and tools the call went to ([`Reach`]), so a caller whose profile changed
//! or lost a server meets its task there as an unknown one.

use std::sync::Arc;
use std::time::Duration;

use hangar_core::access::Caller;
use hangar_core::ipc::{CallEra, ErrorKind, IpcError, Reply, Target};
use hangar_core::jsonrpc::INTERNAL_ERROR;
use hangar_core::mcp::{EXTENSION_TASKS, META_CLIENT_CAPABILITIES, TaskSupport};
use hangar_core::policy::View;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio::task::{JoinError, JoinHandle};

use super::CallRequest;
use super::kept::{Followed, ParkedCall, Tasks, now_ms};
use super::running::AbortOnDrop;
use crate::hangar::Hangar;
use crate::server::Server;
use crate::task_book::{Refusal, Update};

mod batch;
mod news;

pub(crate) use batch::BatchRequest;

type RunningCall = std::pin::Pin<Box<dyn Future<Output = Result<Value, IpcError>> + Send + 'static>>;

/// The most a shortcut may wait before the call becomes a task.
const MAX_SHORTCUT: Duration = Duration::from_secs(10);

/// Refuses a call of a tool that runs only as a task (`taskSupport: required`) from a client that
/// does not take tasks; a client that does costs no lookup.
pub(crate) fn check_task_support(server: &Server, tool: &str, takes_tasks: bool) -> Result<(), IpcError> {
    if !takes_tasks && server.task_support(tool) == Some(TaskSupport::Required) {
        return Err(needs_tasks());
    }
    Ok(())
}

/// The refusal of a tool that needs tasks, for a client that does not take them.
fn needs_tasks() -> IpcError {
    IpcError::new(
        ErrorKind::MissingCapability,
        format!("this tool runs only as a task: declare the {EXTENSION_TASKS} extension"),
    )
    .with_details(json!({"requiredCapabilities": {"extensions": {EXTENSION_TASKS: {}}}}))
}

/// The client's params for the upstream without the tasks extension: the hangar owns the task,
/// so the upstream is not invited to make one of its own.
fn without_tasks_extension(mut extra: Option<Value>) -> Option<Value> {
    if let Some(extensions) = extra
        .as_mut()
        .and_then(|e| e.get_mut("_meta"))
        .and_then(|m| m.get_mut(META_CLIENT_CAPABILITIES))
        .and_then(|c| c.get_mut("extensions"))
        .and_then(Value::as_object_mut)
    {
        extensions.remove(EXTENSION_TASKS);
    }
    extra
}

impl Hangar {
    /// A call of a client that takes tasks ([`hangar_core::ipc::Stance::tasks`]): answered as it
    /// is within the shortcut, else a task. The name is resolved once, here; every run of the
    /// call goes to the tool it led to.
    pub(crate) async fn task_call(
        &self,
        caller: &Caller,
        view: &View,
        call: CallRequest,
        shortcut_ms: u64,
    ) -> Result<Reply, IpcError> {
        let CallRequest { target, arguments, relay, extra, trace, param_headers, mut stance, notices, .. } = call;
        // Its runs are the supervisor's: no client cancels them by a request id.
        stance.cancel_by = None;
        let resolved = match &target {
            Target::Tool { mcp_server, tool } => self.visible(view, mcp_server).ok().map(|s| (s, tool.clone())),
            Target::Exposed { name } => self.resolve(view, name).await.ok(),
        };
        let support = resolved.as_ref().and_then(|(server, tool)| server.task_support(tool));
        // An upstream that declares task support may make a task of its own, which ours then
        // follows; any other is not invited to.
        let knows_tasks = matches!(support, Some(TaskSupport::Optional | TaskSupport::Required));
        let extra = if knows_tasks { extra } else { without_tasks_extension(extra) };
        // A name that leads nowhere stays a name: the call then says why.
        let (server, target) = match resolved {
            Some((server, tool)) => {
                let target = Target::Tool { mcp_server: server.id().to_owned(), tool };
                (Some(server), target)
            }
            None => (None, target),
        };
        let mut call = ParkedCall {
            caller: caller.clone(),
            target,
            arguments,
            extra,
            trace,
            param_headers,
            timeout_ms: None,
            server,
            relay,
            stance,
        };
        let me = self.owned()?;
        if support == Some(TaskSupport::Forbidden) {
            return me.run_call(call, None, notices).await.map(Reply::Called);
        }
        // Past its quota the caller is refused before anything runs for it: the identity is told
        // why, and nobody else's room is spent.
        self.calls.tasks.book().admits(&caller.identity, now_ms()).map_err(|refusal| refused(&refusal, ""))?;
        call.timeout_ms = Some(crate::task_book::TTL_MS);
        // A streamed call's notices reach its caller until it is answered; the task runs on
        // unheard (its client polls `tasks/get`).
        let (heard_to, heard) = relay_channel(!relay.is_off()).unzip();
        let running = {
            let (me, call) = (me.clone(), call.clone());
            tokio::spawn(me.run_call(call, None, heard_to))
        };
        // A caller that gives up within the shortcut stops the call, as it would a plain one.
        let mut unattended = AbortOnDrop(Some(running.abort_handle()));
        let shortcut = Duration::from_millis(shortcut_ms).min(MAX_SHORTCUT);
        let mut running = running;
        let mut inline_task = None;
        if let Some(answered) = within_shortcut(shortcut, &mut running, heard, notices.as_ref()).await {
            match answered.unwrap_or_else(|_| Err(IpcError::new(ErrorKind::Internal, "the call's task ended"))) {
                Ok(result) if is_task(&result) && call.server.is_some() => inline_task = Some(result),
                answered => return answered.map(Reply::Called),
            }
        }
        // Slower than the shortcut: a task, durably in the book before it is answered.
        let (id, created) = self.new_task(caller);
        let created = match created {
            Ok(created) => created,
            // Full, or (a race with the caller's other calls since `admits`) past its quota: the
            // call, already running, finishes without a task.
            Err(Refusal::Full | Refusal::Unknown | Refusal::Quota { .. }) => {
                tracing::warn!("the task book is full; the call runs without a task");
                return running
                    .await
                    .unwrap_or_else(|_| Err(IpcError::new(ErrorKind::Internal, "the call's task ended")))
                    .map(Reply::Called);
            }
        };
        unattended.0 = None;
        self.calls.tasks.forget_gone();
        if let Target::Tool { mcp_server, tool } = &call.target {
            self.calls.tasks.reached(&id, vec![(mcp_server.clone(), tool.clone())]);
        }
        self.calls.tasks.calls().insert(id.clone(), call);
        if let Some(upstream_task) = inline_task {
            me.clone().follow(&id, call_server(&self.calls.tasks, &id), &upstream_task);
            return Ok(Reply::Task(created));
        }
        let abort = running.abort_handle();
        self.calls.tasks.runs().insert(id.clone(), abort);
        tokio::spawn(me.clone().settle(id, 0, running));
        Ok(Reply::Task(created))
    }

    /// A new task of `caller`'s in the book: its id, and its `CreateTaskResult` (unless the
    /// book refuses it).
    fn new_task(&self, caller: &Caller) -> (String, Result<Value, Refusal>) {
        let id = self.owned_id(self.calls.tasks.ids.next());
        let created = self.calls.tasks.book().create(id.clone(), &caller.identity, now_ms()).map(|task| task.created());
        (id, created)
    }

    /// Makes the call (audited and admitted like any call, held for its client's answer like
    /// any 2026-07-28 front-door call) as the task's creator. Boxed and `Send` by declaration: a
    /// task's call is a call of its own ([`Hangar::call_as`]).
    fn run_call(
        self: Arc<Self>,
        call: ParkedCall,
        resume: Option<Map<String, Value>>,
        notices: Option<mpsc::UnboundedSender<Value>>,
    ) -> RunningCall {
        Box::pin(async move {
            let mut extra = call.extra.clone();
            if let Some(resume) = resume {
                let mut params = match extra.take() {
                    Some(Value::Object(params)) => params,
                    _ => Map::new(),
                };
                params.extend(resume);
                extra = Some(Value::Object(params));
            }
            let hold = call.stance.era == CallEra::Modern;
            let request = CallRequest {
                target: call.target.clone(),
                arguments: call.arguments.clone(),
                timeout_ms: call.timeout_ms,
                relay: call.relay,
                extra,
                trace: call.trace.clone(),
                param_headers: call.param_headers.clone(),
                stance: call.stance.clone(),
                hold,
                notices,
            };
            self.call_as(&call.caller, request).await
        })
    }

    /// Waits for run `run` of task `id` and writes its outcome into the book.
    async fn settle(self: Arc<Self>, id: String, run: u64, running: tokio::task::JoinHandle<Result<Value, IpcError>>) {
        let outcome = running.await;
        let now = now_ms();
        match outcome {
            Ok(Ok(result)) if is_task(&result) => {
                let server = call_server(&self.calls.tasks, &id);
                self.clone().follow(&id, server, &result);
            }
            Ok(Ok(result)) => self.calls.tasks.book().answered(&id, run, result, now),
            Ok(Err(err)) => self.calls.tasks.book().failed(&id, run, failure(&err), now),
            // Aborted: cancelled, and the book says so already.
            Err(_) => {}
        }
        if !self.calls.tasks.book().is_open(&id) {
            self.calls.tasks.calls().remove(&id);
        }
        let mut runs = self.calls.tasks.runs();
        if runs.get(&id).is_some_and(|h| h.is_finished()) {
            runs.remove(&id);
        }
    }

    /// Task `id` follows the upstream's own task that `created` announced: asked about every
    /// poll interval until it finishes (here or there).
    fn follow(self: Arc<Self>, id: &str, server: Option<(Arc<Server>, String)>, created: &Value) {
        let (Some((server, identity)), Some(upstream_id)) = (server, created.get("taskId").and_then(Value::as_str))
        else {
            return;
        };
        let followed = Followed { server, task_id: upstream_id.to_owned(), identity };
        self.calls.tasks.followed().insert(id.to_owned(), followed.clone());
        self.calls.tasks.book().mirrored(id, created, now_ms());
        let every = created.get("pollIntervalMs").and_then(Value::as_u64).unwrap_or(crate::task_book::POLL_INTERVAL_MS);
        let every = Duration::from_millis(every.clamp(FOLLOW_EVERY.0, FOLLOW_EVERY.1));
        let id = id.to_owned();
        tokio::spawn(async move {
            while self.calls.tasks.book().is_open(&id) {
                tokio::time::sleep(every).await;
                self.look(&id, &followed).await;
            }
            self.calls.tasks.followed().remove(&id);
        });
    }

    /// Asks the upstream about the task `id` follows and takes its answer over.
    async fn look(&self, id: &str, followed: &Followed) {
        let answer = followed
            .server
            .forward(&followed.identity, "tasks/get", upstream_params(&followed.task_id, None), FOLLOW_TIMEOUT)
            .await;
        let upstream = match answer {
            Ok(upstream) => upstream,
            Err(err) => json!({"status": "failed", "error": failure(&err)}),
        };
        self.calls.tasks.book().mirrored(id, &upstream, now_ms());
    }

    /// Refuses a task `view` no longer sees as an unknown one (so another profile's tasks are
    /// never confirmed either).
    fn in_view(&self, view: &View, task_id: &str) -> Result<(), IpcError> {
        if self.calls.tasks.seen_by(task_id, view) { Ok(()) } else { Err(refused(&Refusal::Unknown, task_id)) }
    }

    /// [`Request::TaskGet`](hangar_core::ipc::Request::TaskGet).
    pub(crate) fn task_get(&self, caller: &Caller, view: &View, task_id: &str) -> Result<Reply, IpcError> {
        self.in_view(view, task_id)?;
        let mut book = self.calls.tasks.book();
        let task = book.get(&caller.identity, task_id, now_ms()).map_err(|r| refused(&r, task_id))?;
        Ok(Reply::Task(task.detailed()))
    }

    /// [`Request::TaskCancel`](hangar_core::ipc::Request::TaskCancel): the book first, then the run (dropping it tells the upstream).
    pub(crate) fn task_cancel(&self, caller: &Caller, view: &View, task_id: &str) -> Result<Reply, IpcError> {
        self.in_view(view, task_id)?;
        let parked_on = self.calls.tasks.book().request_state(&caller.identity, task_id, now_ms());
        let stop =
            self.calls.tasks.book().cancel(&caller.identity, task_id, now_ms()).map_err(|r| refused(&r, task_id))?;
        // A call held for its client's answer (a legacy upstream's own request) is named in the
        // parked task's state: it ends now, and its upstream hears the cancel, not at the hold's end.
        if stop && let Some(state) = parked_on {
            self.end_held_in(&state);
        }
        if stop && let Some(run) = self.calls.tasks.runs().remove(task_id) {
            run.abort();
        }
        self.calls.tasks.calls().remove(task_id);
        if let Some(followed) = self.calls.tasks.followed().remove(task_id) {
            tokio::spawn(async move {
                let _ = followed
                    .server
                    .forward(
                        &followed.identity,
                        "tasks/cancel",
                        upstream_params(&followed.task_id, None),
                        FOLLOW_TIMEOUT,
                    )
                    .await;
            });
        }
        Ok(Reply::Task(json!({})))
    }

    /// [`Request::TaskUpdate`](hangar_core::ipc::Request::TaskUpdate): once every question is answered, the call runs again with the
    /// answers (`inputResponses`) and the upstream's `requestState`.
    pub(crate) async fn task_update(
        &self,
        caller: &Caller,
        view: &View,
        task_id: &str,
        responses: &Value,
    ) -> Result<Reply, IpcError> {
        self.in_view(view, task_id)?;
        let Some(responses) = responses.as_object() else {
            return Err(IpcError::new(ErrorKind::InvalidArgument, "inputResponses must be an object"));
        };
        self.calls.tasks.book().get(&caller.identity, task_id, now_ms()).map_err(|r| refused(&r, task_id))?;
        let followed = self.calls.tasks.followed().get(task_id).cloned();
        if let Some(followed) = followed {
            // The upstream's task takes the answers itself; ours looks again at once.
            let params = upstream_params(&followed.task_id, Some(Value::Object(responses.clone())));
            followed.server.forward(&followed.identity, "tasks/update", params, FOLLOW_TIMEOUT).await?;
            self.look(task_id, &followed).await;
            return Ok(Reply::Task(json!({})));
        }
        let update = self
            .calls
            .tasks
            .book()
            .update(&caller.identity, task_id, responses, now_ms())
            .map_err(|r| refused(&r, task_id))?;
        if let Update::Resume { input_responses, request_state, run } = update {
            // A `hangar_call` batch parked for its calls' questions resumes its own way.
            if self.resume_batch(caller, task_id, &input_responses, request_state.as_ref(), run) {
                return Ok(Reply::Task(json!({})));
            }
            let call = self.calls.tasks.calls().get(task_id).cloned();
            let me = self.me.upgrade();
            if let (Some(call), Some(me)) = (call, me) {
                let mut resume = Map::from_iter([("inputResponses".to_owned(), input_responses)]);
                if let Some(state) = request_state {
                    resume.insert("requestState".into(), state);
                }
                let running = {
                    let me = me.clone();
                    tokio::spawn(me.run_call(call, Some(resume), None))
                };
                self.calls.tasks.runs().insert(task_id.to_owned(), running.abort_handle());
                tokio::spawn(me.settle(task_id.to_owned(), run, running));
            }
        }
        Ok(Reply::Task(json!({})))
    }
}

/// How long a forwarded `tasks/*` request to an upstream may take.
const FOLLOW_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a followed upstream task is asked about, at most and at least.
const FOLLOW_EVERY: (u64, u64) = (100, 5000);

/// Where a streamed call's notices go while its caller hears them (`on`), and where they are
/// heard: see [`within_shortcut`].
fn relay_channel(on: bool) -> Option<(mpsc::UnboundedSender<Value>, mpsc::UnboundedReceiver<Value>)> {
    on.then(mpsc::unbounded_channel)
}

/// Waits up to `shortcut` for `running`, passing what it relays (`heard`) on to `notices`;
/// `None` once the shortcut is over. What it relays after that is dropped, unheard.
async fn within_shortcut(
    shortcut: Duration,
    running: &mut JoinHandle<Result<Value, IpcError>>,
    mut heard: Option<mpsc::UnboundedReceiver<Value>>,
    notices: Option<&mpsc::UnboundedSender<Value>>,
) -> Option<Result<Result<Value, IpcError>, JoinError>> {
    let pass_on = |notice| {
        if let Some(notices) = notices {
            let _ = notices.send(notice);
        }
    };
    let deadline = tokio::time::sleep(shortcut);
    tokio::pin!(deadline);
    loop {
        let next = async {
            match heard.as_mut() {
                Some(heard) => heard.recv().await,
                None => std::future::pending().await,
            }
        };
        let notice = tokio::select! {
            answered = &mut *running => Err(answered),
            Some(notice) = next => Ok(notice),
            () = &mut deadline => return None,
        };
        match notice {
            Ok(notice) => pass_on(notice),
            Err(answered) => {
                // Notices that raced the answer still go first.
                while let Some(notice) = heard.as_mut().and_then(|heard| heard.try_recv().ok()) {
                    pass_on(notice);
                }
                return Some(answered);
            }
        }
    }
}

/// Whether a call's result is an upstream's own `CreateTaskResult`.
fn is_task(result: &Value) -> bool {
    result.get("resultType").and_then(Value::as_str) == Some("task")
        && result.get("taskId").is_some_and(Value::is_string)
}

/// The params of a `tasks/*` request to an upstream about its task `task_id`, declaring the
/// extension (an upstream gates these methods on it).
fn upstream_params(task_id: &str, input_responses: Option<Value>) -> Value {
    let mut params = json!({
        "taskId": task_id,
        "_meta": {META_CLIENT_CAPABILITIES: {"extensions": {EXTENSION_TASKS: {}}}},
    });
    if let Some(responses) = input_responses {
        params["inputResponses"] = responses;
    }
    params
}

fn call_server(tasks: &Tasks, id: &str) -> Option<(Arc<Server>, String)> {
    tasks.calls().get(id).and_then(|c| Some((c.server.clone()?, c.caller.identity.clone())))
}

/// A task's `error`: the upstream's JSON-RPC code where it answered one, in the hangar's words.
fn failure(err: &IpcError) -> Value {
    let code =
        err.details.as_ref().and_then(|d| d.get("jsonrpc_code")).and_then(Value::as_i64).unwrap_or(INTERNAL_ERROR);
    json!({"code": code, "message": err.message, "data": {"error_type": err.kind.as_str()}})
}

fn refused(refusal: &Refusal, task_id: &str) -> IpcError {
    let task_id = hangar_core::echo::bounded(task_id);
    match refusal {
        Refusal::Unknown => IpcError::new(ErrorKind::NotFound, format!("no task {task_id} (unknown or expired)")),
        Refusal::Full => IpcError::new(ErrorKind::ConcurrencyLimited, "too many tasks"),
        Refusal::Quota { held, max } => IpcError::new(
            ErrorKind::ConcurrencyLimited,
            format!(
                "too many tasks: this identity holds {held} unfinished, the most `tasks.max_per_identity` allows; \
                 wait for one to finish or cancel one (tasks/cancel)"
            ),
        )
        .with_details(json!({"limit": "tasks.max_per_identity", "max": max})),
    }
}
