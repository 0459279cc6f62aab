//! The client's stance on a `tools/call`, read once from its request: which surface and era it
//! called through, what it can be asked, whether it takes tasks, and who may cancel the call.
//! Every call the API sends is a `Request::Call` carrying one (see `hangar_core::call`).

use hangar_core::ipc::{Asks, CallEra, CancelBy, Stance, TakesTasks};
use serde_json::Value;

use super::id::Id;

/// How long a call may take and still be answered as it is; a slower one becomes a task.
pub const SHORTCUT_MS: u64 = 250;

/// A front-door call outside any legacy session (2026-07-28): `params`, the client's params as
/// passed on (what it can be asked is in their `_meta`); `takes_tasks`, whether it declared the
/// tasks extension.
pub fn modern(params: Option<&Value>, takes_tasks: bool) -> Stance {
    Stance { era: CallEra::Modern, asks: Asks::declared_in(params), tasks: tasks(takes_tasks), cancel_by: None }
}

/// A front-door call in the legacy `session`, which its client may cancel by its `id`.
pub fn legacy(params: Option<&Value>, session: &str, id: &Id) -> Stance {
    let cancel_by = CancelBy { session: session.to_owned(), request_id: id.to_value() };
    Stance { era: CallEra::Legacy, asks: Asks::declared_in(params), tasks: None, cancel_by: Some(cancel_by) }
}

/// A `hangar_call` batch the supervisor runs: the hangar's own surface.
pub fn hangar(params: Option<&Value>, takes_tasks: bool) -> Stance {
    Stance { era: CallEra::Hangar, asks: Asks::declared_in(params), tasks: tasks(takes_tasks), cancel_by: None }
}

fn tasks(takes_tasks: bool) -> Option<TakesTasks> {
    takes_tasks.then_some(TakesTasks { shortcut_ms: SHORTCUT_MS })
}
