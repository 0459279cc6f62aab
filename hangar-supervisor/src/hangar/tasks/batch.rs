//! `hangar_call` as a task: the supervisor runs the batch itself (`hangar_runtime::batch`, each
//! call a [`Request::Call`] of the caller's made in place, audited and admitted like any), so a
//! batch that outlasts its shortcut is a task like a front-door call's: in the book, run on here
//! whatever happens to the API instance that asked, and cancelled as a whole.

use std::sync::Arc;
use std::time::Duration;

use hangar_core::access::Caller;
use hangar_core::batch::{BatchSpec, CallSpec, with_upstream_blocks};
use hangar_core::ipc::{ErrorKind, IpcError, Outcome, Relay, Reply, Request, Target};
use hangar_core::trace::TraceContext;
use serde_json::Value;

use super::{AbortOnDrop, Hangar, MAX_SHORTCUT, Refusal, RunningCall, now_ms};

impl Hangar {
    /// [`Request::TaskBatch`]: the batch's `tools/call` result if it ends within the shortcut,
    /// else a task, recorded in the book before it is answered.
    pub(in crate::hangar) async fn task_batch(&self, caller: &Caller, request: Request) -> Result<Reply, IpcError> {
        let Request::TaskBatch { batch, shortcut_ms, trace } = request else {
            return Err(IpcError::new(ErrorKind::Internal, "not a batch task"));
        };
        let Some(me) = self.me.upgrade() else {
            return Err(IpcError::new(ErrorKind::ShuttingDown, "the hangar is shutting down"));
        };
        let mut running = tokio::spawn(me.clone().run_batch(caller.clone(), batch, trace));
        // A caller that gives up within the shortcut stops the batch, as it would a plain one.
        let mut unattended = AbortOnDrop(Some(running.abort_handle()));
        let shortcut = Duration::from_millis(shortcut_ms).min(MAX_SHORTCUT);
        if let Ok(answered) = tokio::time::timeout(shortcut, &mut running).await {
            return answered.unwrap_or_else(|_| Err(ended())).map(Reply::Called);
        }
        let id = self.tasks.ids.next();
        let created = self.tasks.book().create(id.clone(), &caller.identity, now_ms()).map(|task| task.created());
        let created = match created {
            Ok(created) => created,
            Err(Refusal::Full | Refusal::Unknown) => {
                tracing::warn!("the task book is full; the batch runs without a task");
                return running.await.unwrap_or_else(|_| Err(ended())).map(Reply::Called);
            }
        };
        unattended.0 = None;
        self.tasks.forget_gone();
        self.tasks.runs().insert(id.clone(), running.abort_handle());
        tokio::spawn(me.settle(id, 0, running));
        Ok(Reply::Task(created))
    }

    /// Runs every call of `batch` as `caller`: the result carries the report (a failed call is
    /// in it, so the result is no error). Boxed and `Send` by declaration, as `run_call` is.
    fn run_batch(self: Arc<Self>, caller: Caller, batch: BatchSpec, trace: Option<TraceContext>) -> RunningCall {
        Box::pin(async move {
            let report = hangar_runtime::batch::run(batch, |call| {
                let (me, caller, trace) = (self.clone(), caller.clone(), trace.clone());
                async move { me.batch_call(&caller, call, trace).await }
            })
            .await;
            Ok(with_upstream_blocks(report.into_value()))
        })
    }

    /// One call of a batch, as the API would have sent it for a plain `hangar_call`.
    async fn batch_call(
        &self,
        caller: &Caller,
        call: CallSpec,
        trace: Option<TraceContext>,
    ) -> Result<Value, IpcError> {
        let request = Request::Call {
            target: Target::tool(call.mcp_server, call.tool),
            arguments: call.arguments,
            timeout_ms: Some(call.timeout_ms),
            relay: Relay::default(),
            extra: None,
            trace,
            param_headers: None,
        };
        match self.handle(caller, request, None).await {
            Outcome::Ok(Reply::Called(result)) => Ok(result),
            Outcome::Ok(_) => Err(IpcError::new(ErrorKind::Internal, "a call of the batch answered oddly")),
            Outcome::Err(err) => Err(err),
        }
    }
}

fn ended() -> IpcError {
    IpcError::new(ErrorKind::Internal, "the batch's task ended")
}
