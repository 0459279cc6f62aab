//! What the supervisor keeps of the calls and batches held for their clients' answers
//! (`calls/hold/` holds and resumes them): each held call's running call and the upstream's
//! question it waits on, each held batch's questions and answers so far. A store only.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use hangar_core::ipc::{Asks, Outcome};
use hangar_core::sync::Unpoisoned;
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::calls::running::Ids;

/// Every held call and batch.
#[derive(Default)]
pub struct Holds {
    pub(crate) calls: Mutex<HashMap<String, Held>>,
    /// Unguessable, like task ids.
    pub(crate) ids: Ids,
    /// `hangar_call` batches whose calls' questions wait for their client's answers.
    pub(crate) batches: HeldBatches,
}

impl Holds {
    pub(crate) fn calls(&self) -> MutexGuard<'_, HashMap<String, Held>> {
        self.calls.locked()
    }
}

/// A front-door call running on its own, and the upstream's requests about it (with its
/// progress and log notices, if it relays them).
pub struct Running {
    pub call: JoinHandle<Outcome>,
    pub asks: mpsc::UnboundedReceiver<Value>,
    /// What the client may be asked (its stance).
    pub may_ask: Asks,
}

/// A call waiting for its client's answer to the upstream's request `ask_id`.
pub(crate) struct Held {
    pub(crate) identity: String,
    pub(crate) server: String,
    pub(crate) ask_id: String,
    pub(crate) running: Running,
}

/// A batch waiting for its client's answers.
pub(crate) struct HeldBatch {
    pub(crate) identity: String,
    /// The open questions, by `<index>/<key>`.
    pub(crate) questions: Map<String, Value>,
    /// The answers given so far (a retry may answer some of the questions).
    pub(crate) answers: Map<String, Value>,
    /// The batch's state, as the runner left it in its result's `requestState`.
    pub(crate) state: Value,
}

#[derive(Default)]
pub struct HeldBatches {
    pub(crate) held: Mutex<HashMap<String, HeldBatch>>,
}

impl HeldBatches {
    pub(crate) fn held(&self) -> MutexGuard<'_, HashMap<String, HeldBatch>> {
        self.held.locked()
    }

    /// Forgets held batch `token`; the batch's state (which names its held calls).
    pub(crate) fn take_state(&self, token: &str) -> Option<Value> {
        self.held().remove(token).map(|held| held.state)
    }
}
