//! What the calls keep beyond their requests: tasks, calls and batches held for their clients'
//! answers, legacy clients' cancels and answers, sessions waiting on a URL elicitation, calls
//! waiting for a person's approval, the calls in flight and each identity's traffic. `Hangar` holds one [`Calls`]; the pipeline
//! (`crate::calls`) reads and changes it.
//!
//! Architecture invariant: these are stores, beneath the pipeline. Nothing here names `Hangar`
//! or runs a call, so `Hangar` can hold them without depending on the pipeline that uses it.

mod approvals;
mod client_relay;
mod elicitation_waits;
mod holds;
mod in_flight;
mod task_news;
mod tasks;
mod traffic;

pub(crate) use self::approvals::Approvals;
pub(crate) use self::client_relay::{ClientRelay, client_answer_late};
pub(crate) use self::elicitation_waits::{ElicitationWaits, Wait, Waiter};
pub(crate) use self::holds::{Held, HeldBatch, Holds, Running};
pub(crate) use self::in_flight::InFlight;
pub(crate) use self::tasks::{Followed, ParkedCall, Tasks, now_ms};
pub(crate) use self::traffic::{Noted, Traffic};

/// What the calls keep beyond their requests.
#[derive(Default)]
pub struct Calls {
    /// Gateway-side tasks (SEP-2663), owned here so every API instance sees them.
    pub(crate) tasks: Tasks,
    /// 2026-07-28 clients' calls and batches waiting for their answers.
    pub(crate) held: Holds,
    /// Legacy clients' cancels and answers to server-to-client requests, from any API instance.
    pub(crate) client_relay: ClientRelay,
    /// Legacy sessions waiting to hear that a URL elicitation is complete.
    pub(crate) elicitations: ElicitationWaits,
    /// Calls waiting for a person's approval, and those decided lately.
    pub(crate) approvals: Approvals,
    /// The tool calls running upstream right now.
    pub(crate) in_flight: InFlight,
    /// Each identity's requests and calls since the hangar started.
    pub(crate) traffic: Traffic,
}

impl Calls {
    /// Takes `tasks:` (at start and on every reload).
    pub fn configure(&self, config: &hangar_core::config::TasksConfig) {
        self.tasks.configure(config);
    }
}
