//! The answer to every control-socket request, one handler per request variant, as
//! mini-redis's commands apply themselves. The caller is admitted and judged once
//! ([`Decision`]); then [`Hangar::handle`] has one line per variant, each a struct with an
//! [`Apply`] in its own file here: a variant with a body applies that body (its struct is in
//! `hangar_core::ipc`), a unit variant applies a unit struct of the same name declared in its
//! file. Calls go on to the pipeline (`crate::calls`); the journal's reads to
//! `crate::hangar::journal_view`. `Subscribe` is the connection's business (`control.rs`) and is
//! only acknowledged here.
//!
//! Architecture invariant: this module is the top of the supervisor's request path; nothing
//! below it (`hangar`, `calls`, `server`) names it.

mod answer_upstream;
mod approvals;
mod audit;
mod auth;
mod await_client_answer;
mod call;
mod call_stats;
mod cancel_client_call;
mod catalog;
mod check;
mod client_answer;
mod client_metadata;
mod clients;
mod cluster;
mod connect_begin;
mod connect_finish;
mod connect_open;
mod credentials;
mod decide;
mod events;
mod forget_credentials;
mod forward;
mod front_door;
mod get;
mod in_flight;
mod list;
mod logs;
mod metrics;
mod ping;
mod rates;
mod reload;
mod resolve;
mod session_end;
mod session_follow;
mod session_open;
mod session_post;
mod session_use;
mod start;
mod stop;
mod subscribe;
mod targets;
mod task_cancel;
mod task_follow;
mod task_get;
mod task_update;
mod tools;
mod verdict;
mod who_am_i;

use std::sync::atomic::Ordering;

use hangar_core::access::Caller;
use hangar_core::ipc::{IpcError, Outcome, Reply, Request};
use hangar_core::sync::UnpoisonedRw;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::calls::Noted;
use crate::hangar::{Decision, Hangar, admit_caller};

/// A request that answers itself, on behalf of the caller `decide` judges for; `notices` carries
/// what it relays to its caller before the reply.
pub(crate) trait Apply {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, notices: Notices) -> Answered;
}

/// Where a request's notices go, while its caller listens.
pub(crate) type Notices = Option<mpsc::UnboundedSender<Value>>;

/// A request's reply, or why it failed.
pub(crate) type Answered = Result<Reply, IpcError>;

impl Hangar {
    /// Answers one request on behalf of `caller`, within its view. `notices` carries an
    /// upstream's notifications about a relayed call back to its caller.
    pub async fn handle(&self, caller: &Caller, request: Request, notices: Notices) -> Outcome {
        // A legacy session's call its client may cancel by its own request id, from any API
        // instance: registered for the whole of it, judgement and record included.
        if let Request::Call(spec) = &request
            && let Some(by) = spec.stance.cancel_by.clone()
        {
            let call = self.judged(caller, request, notices);
            return self.calls.client_relay.cancellable(&caller.identity, &by.session, &by.request_id, call).await;
        }
        self.judged(caller, request, notices).await
    }

    /// The request answered under the caller's [`Decision`], which records it.
    async fn judged(&self, caller: &Caller, request: Request, notices: Notices) -> Outcome {
        let access = self.access.reading().clone();
        let outcome = match admit_caller(&access, caller) {
            Ok(view) => {
                let decide = Decision::by(caller, &view, &self.shared.journal, &access.audit);
                let answer = self.answer(&decide, request, notices).await;
                self.calls.traffic.note(&caller.identity, view.profile(), Noted::Request);
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

    /// One line per request variant.
    async fn answer(&self, decide: &Decision<'_>, request: Request, notices: Notices) -> Answered {
        if self.shared.shutting_down.load(Ordering::SeqCst) && matches!(request, Request::Start(_) | Request::Call(_)) {
            return Err(IpcError::shutting_down());
        }
        match request {
            Request::List => list::List.apply(self, decide, notices).await,
            Request::Get(request) => request.apply(self, decide, notices).await,
            Request::Start(request) => request.apply(self, decide, notices).await,
            Request::Stop(request) => request.apply(self, decide, notices).await,
            Request::Tools(request) => request.apply(self, decide, notices).await,
            Request::Logs(request) => request.apply(self, decide, notices).await,
            Request::Call(request) => request.apply(self, decide, notices).await,
            Request::Subscribe => subscribe::Subscribe.apply(self, decide, notices).await,
            Request::Ping => ping::Ping.apply(self, decide, notices).await,
            Request::Targets => targets::Targets.apply(self, decide, notices).await,
            Request::Check(request) => request.apply(self, decide, notices).await,
            Request::Verdict(request) => request.apply(self, decide, notices).await,
            Request::Metrics => metrics::Metrics.apply(self, decide, notices).await,
            Request::Catalog => catalog::Catalog.apply(self, decide, notices).await,
            Request::FrontDoor => front_door::FrontDoor.apply(self, decide, notices).await,
            Request::Resolve(request) => request.apply(self, decide, notices).await,
            Request::Reload => reload::Reload.apply(self, decide, notices).await,
            Request::Auth => auth::Auth.apply(self, decide, notices).await,
            Request::Audit(request) => request.apply(self, decide, notices).await,
            Request::Events(request) => request.apply(self, decide, notices).await,
            Request::Rates(request) => request.apply(self, decide, notices).await,
            Request::WhoAmI => who_am_i::WhoAmI.apply(self, decide, notices).await,
            Request::Forward(request) => request.apply(self, decide, notices).await,
            Request::SessionOpen(request) => request.apply(self, decide, notices).await,
            Request::SessionUse(request) => request.apply(self, decide, notices).await,
            Request::SessionEnd(request) => request.apply(self, decide, notices).await,
            Request::SessionPost(request) => request.apply(self, decide, notices).await,
            Request::SessionFollow(request) => request.apply(self, decide, notices).await,
            Request::TaskGet(request) => request.apply(self, decide, notices).await,
            Request::TaskUpdate(request) => request.apply(self, decide, notices).await,
            Request::TaskCancel(request) => request.apply(self, decide, notices).await,
            Request::TaskFollow(request) => request.apply(self, decide, notices).await,
            Request::CancelClientCall(request) => request.apply(self, decide, notices).await,
            Request::AwaitClientAnswer(request) => request.apply(self, decide, notices).await,
            Request::ClientAnswer(request) => request.apply(self, decide, notices).await,
            Request::AnswerUpstream(request) => request.apply(self, decide, notices).await,
            Request::Cluster => cluster::Cluster.apply(self, decide, notices).await,
            Request::Credentials => credentials::Credentials.apply(self, decide, notices).await,
            Request::ForgetCredentials(request) => request.apply(self, decide, notices).await,
            Request::ConnectBegin(request) => request.apply(self, decide, notices).await,
            Request::ConnectOpen(request) => request.apply(self, decide, notices).await,
            Request::ConnectFinish(request) => request.apply(self, decide, notices).await,
            Request::ClientMetadata => client_metadata::ClientMetadata.apply(self, decide, notices).await,
            Request::Approvals => approvals::Approvals.apply(self, decide, notices).await,
            Request::Decide(request) => request.apply(self, decide, notices).await,
            Request::InFlight => in_flight::InFlight.apply(self, decide, notices).await,
            Request::CallStats => call_stats::CallStats.apply(self, decide, notices).await,
            Request::Clients => clients::Clients.apply(self, decide, notices).await,
        }
    }
}
