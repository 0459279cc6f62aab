//! How a `tools/call` is answered, read once from its request: what it names (an upstream's tool
//! by its front-door name, `hangar_call`, another hangar tool), the client's stance as far as
//! the shape of the answer depends on it (a legacy session, tasks, questions), and whether the
//! client takes an event stream and asked to hear about the call. The dispatcher then makes one
//! request and shapes one answer, by [`Way`].

use axum::http::HeaderMap;
use hangar_core::batch::BatchSpec;
use serde_json::Value;

use super::front_door::{self, Route};
use super::id::Id;
use super::params::{ToolCall, Wanted};
use super::{stream, tasks, tools};

/// The one way a `tools/call` goes.
pub enum Way {
    /// A legacy session's call of an upstream's tool: relayed on the session's stream, its
    /// upstream's questions asked there (`relay.rs`).
    LegacyCall(Option<Wanted>),
    /// A legacy session's `hangar_call` whose arguments read: each call relayed the same way
    /// (`relay_batch.rs`).
    LegacyBatch(BatchSpec, Option<Wanted>),
    /// A call of an upstream's tool answered as an event stream (`stream.rs`).
    StreamedCall(Wanted),
    /// A `hangar_call` answered as an event stream (`stream.rs`), run as `BatchRun` says.
    StreamedBatch(BatchSpec, Wanted, stream::BatchRun),
    /// A call of an upstream's tool answered as JSON (`tasks.rs`).
    FrontDoor,
    /// `hangar_call` of a client that takes tasks, run by the supervisor (`tools.rs`).
    BatchTask,
    /// `hangar_call` of a 2026-07-28 client that can be asked something, run by the
    /// supervisor (`tools.rs`).
    BatchHeld,
    /// Any other hangar tool, or a `hangar_call` the API runs or refuses (`tools.rs`).
    Hangar,
}

/// A `tools/call` as the dispatcher reads it.
pub struct Incoming {
    pub call: ToolCall,
    /// The client declared the tasks extension.
    pub opted_in: bool,
    pub way: Way,
}

impl Incoming {
    /// Reads the call and picks its way. `session`: the legacy session it came in (none at
    /// 2026-07-28); `progress_token`: as the client wrote it.
    pub fn read(
        headers: &HeaderMap,
        params: Option<Value>,
        session: Option<&str>,
        progress_token: Option<Id>,
    ) -> Result<Incoming, hangar_core::jsonrpc::RpcError> {
        // Streamed when the client takes an event stream and asked to hear about the call.
        let wanted = stream::accepts_event_stream(headers)
            .then(|| Wanted::from_params(params.as_ref(), progress_token))
            .flatten();
        let opted_in = tasks::opted_in(params.as_ref());
        let call = ToolCall::from_params(params)?;
        let way = way(&call, session.is_some(), opted_in, wanted);
        Ok(Incoming { call, opted_in, way })
    }
}

fn way(call: &ToolCall, in_session: bool, opted_in: bool, wanted: Option<Wanted>) -> Way {
    let upstream = front_door::route(&call.name) == Route::Exposed;
    let hangar_call = call.name == "hangar_call";
    // Read only where a batch is answered otherwise than the plain way; arguments that do not
    // read are refused by the plain answer, as JSON.
    let spec = || hangar_call.then(|| tools::hangar_call_spec(call.arguments.clone())).flatten();
    if in_session && upstream {
        return Way::LegacyCall(wanted);
    }
    if in_session && let Some(spec) = spec() {
        return Way::LegacyBatch(spec, wanted);
    }
    // A legacy session's client cannot poll: its calls become no tasks.
    let takes_tasks = opted_in && !in_session;
    if let Some(wanted) = wanted {
        if upstream {
            return Way::StreamedCall(wanted);
        }
        if let Some(spec) = spec() {
            let runs = if takes_tasks {
                stream::BatchRun::Task
            } else if !in_session && tools::takes_questions(&call.extra) {
                stream::BatchRun::Held
            } else {
                stream::BatchRun::Here
            };
            return Way::StreamedBatch(spec, wanted, runs);
        }
    }
    if upstream {
        return Way::FrontDoor;
    }
    if hangar_call && takes_tasks {
        return Way::BatchTask;
    }
    if hangar_call && !in_session && tools::takes_questions(&call.extra) {
        return Way::BatchHeld;
    }
    Way::Hangar
}
