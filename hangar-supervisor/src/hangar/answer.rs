//! The answer to every control-socket request: the caller is admitted and judged once
//! ([`Decision`]), then each request variant is one line, to its own handler (a call request's
//! [`Apply`] in `crate::calls::requests`, the others' functions beside `Hangar`). `Subscribe` is
//! the connection's business (`control.rs`) and is only acknowledged here.

use std::sync::atomic::Ordering;

use hangar_core::access::Caller;
use hangar_core::ipc::{IpcError, Outcome, Reply, Request};
use hangar_core::sync::UnpoisonedRw;
use serde_json::Value;
use tokio::sync::mpsc;

use super::audit::Shown;
use super::{Decision, Hangar, admit_caller, journal_view};
use crate::calls::Apply;

impl Hangar {
    /// Answers one request on behalf of `caller`, within its view. `Subscribe` is the
    /// connection's business and is answered there. `notices` carries an upstream's
    /// notifications about a relayed call back to its caller.
    pub async fn handle(
        &self,
        caller: &Caller,
        request: Request,
        notices: Option<mpsc::UnboundedSender<Value>>,
    ) -> Outcome {
        // A legacy session's call its client may cancel by its own request id, from any API
        // instance: registered for the whole of it, judgement and record included.
        if let Request::Call(spec) = &request
            && let Some(by) = spec.stance.cancel_by.clone()
        {
            let call = self.handle_one(caller, request, notices);
            return self.calls.client_relay.cancellable(&caller.identity, &by.session, &by.request_id, call).await;
        }
        self.handle_one(caller, request, notices).await
    }

    async fn handle_one(
        &self,
        caller: &Caller,
        request: Request,
        notices: Option<mpsc::UnboundedSender<Value>>,
    ) -> Outcome {
        let access = self.access.reading().clone();
        let outcome = match admit_caller(&access, caller) {
            Ok(view) => {
                let decide = Decision::by(caller, &view, &self.shared.journal, &access.audit);
                let answer = self.answer(&decide, request, notices).await;
                decide.finish(&answer);
                answer
            }
            Err(refused) => Err(refused),
        };
        match outcome {
            Ok(reply) => Outcome::Ok(reply),
            Err(error) => Outcome::Err(error),
        }
    }

    async fn answer(
        &self,
        decide: &Decision<'_>,
        request: Request,
        notices: Option<mpsc::UnboundedSender<Value>>,
    ) -> Result<Reply, IpcError> {
        let (caller, view) = (decide.caller(), decide.view());
        if self.shared.shutting_down.load(Ordering::SeqCst)
            && matches!(request, Request::Start { .. } | Request::Call(_))
        {
            return Err(IpcError::shutting_down());
        }
        Ok(match request {
            Request::List => Reply::Servers(self.all_visible(view).iter().map(|s| view.summary(s)).collect()),
            Request::Get { mcp_server } => Reply::Server(Box::new(view.details(&*self.visible(view, &mcp_server)?))),
            Request::Tools { mcp_server } => Reply::Tools(view.tools(&*self.visible(view, &mcp_server)?)),
            Request::Audit(query) => journal_view::audit_page(self, caller, view, query).await?,
            Request::Events { since, limit, follow } => {
                journal_view::events(self, (caller, view), (since, limit, follow), notices).await?
            }
            Request::Rates { minutes } => journal_view::rates(self, caller, view, minutes).await?,
            Request::Logs { mcp_server, lines } => self.logs(decide, &mcp_server, lines)?,
            Request::Start { mcp_server } => self.start(decide, &mcp_server).await?,
            Request::Stop { mcp_server } => self.stop(decide, &mcp_server).await?,
            Request::Call(spec) => spec.apply(self, decide, notices).await?,
            Request::Subscribe => Reply::Subscribed,
            Request::Ping => Reply::Pong,
            Request::WhoAmI => self.whoami(decide),
            Request::Targets => self.targets(view)?,
            Request::Check { mcp_server, timeout_ms } => self.check(view, &mcp_server, timeout_ms).await?,
            Request::Verdict(verdict) => self.apply_verdict(view, &verdict)?,
            Request::Auth => self.auth_block(view)?,
            Request::Metrics => self.metrics(view),
            Request::Catalog => Reply::Catalog(self.catalog(view).await),
            Request::FrontDoor => self.front_door_servers(view).await,
            Request::Resolve(request) => request.apply(self, decide, notices).await?,
            Request::Reload => self.reload_for(decide).await?,
            Request::Forward { mcp_server, method, params, timeout_ms } => {
                self.forward(decide, &mcp_server, &method, params, timeout_ms).await?
            }
            Request::SessionOpen { session_id, version, capabilities } => {
                self.session_open(caller, &session_id, &version, capabilities)?
            }
            Request::SessionUse { session_id, change } => self.session_use(caller, &session_id, change)?,
            Request::SessionEnd { session_id } => self.session_end(caller, &session_id)?,
            Request::SessionPost { session_id, message } => self.session_post(caller, &session_id, message)?,
            Request::SessionFollow { session_id } => self.session_follow(caller, &session_id, notices).await?,
            Request::TaskGet(request) => request.apply(self, decide, notices).await?,
            Request::TaskUpdate(request) => request.apply(self, decide, notices).await?,
            Request::TaskCancel(request) => request.apply(self, decide, notices).await?,
            Request::TaskFollow(request) => request.apply(self, decide, notices).await?,
            Request::CancelClientCall(request) => request.apply(self, decide, notices).await?,
            Request::AwaitClientAnswer(request) => request.apply(self, decide, notices).await?,
            Request::ClientAnswer(request) => request.apply(self, decide, notices).await?,
            Request::AnswerUpstream(request) => request.apply(self, decide, notices).await?,
            Request::Cluster => self.cluster(view)?,
        })
    }
}
