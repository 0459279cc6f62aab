//! `Request::Call`: the call pipeline (`calls/mod.rs`).

use hangar_core::ipc::CallSpec;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for CallSpec {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, notices: Notices) -> Answered {
        hangar.call_spec(decide, self, notices).await
    }
}
