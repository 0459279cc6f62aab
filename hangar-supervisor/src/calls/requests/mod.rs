//! The call requests of the control protocol, each answered by its own handler, as
//! mini-redis's commands apply themselves: `Hangar::answer` has one line per request, and
//! each request here is a struct (in `hangar_core::ipc`) with an [`Apply`] in its own file.

mod answer_upstream;
mod await_client_answer;
mod call;
mod cancel_client_call;
mod client_answer;
mod resolve;
mod task_cancel;
mod task_follow;
mod task_get;
mod task_update;

use hangar_core::ipc::{IpcError, Reply};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::hangar::{Decision, Hangar};

/// A request that answers itself, on behalf of the caller `decide` judges for; `notices` carries
/// what it relays to its caller before the reply.
pub(crate) trait Apply {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, notices: Notices) -> Answered;
}

/// Where a request's notices go, while its caller listens.
pub(crate) type Notices = Option<mpsc::UnboundedSender<Value>>;

/// A request's reply, or why it failed.
pub(crate) type Answered = Result<Reply, IpcError>;
