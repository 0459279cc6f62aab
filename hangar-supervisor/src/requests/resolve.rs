//! `Request::Resolve`: where a front-door name leads, with the checks a call there would make.

use hangar_core::ipc::Resolve;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

impl Apply for Resolve {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        hangar.resolve_name(decide.view(), &self.name, self.param_check, self.stance).await
    }
}
