//! `Request::Metrics`: every server's counters the view sees, for `/metrics`.

use hangar_core::ipc::Reply;

use super::{Answered, Apply, Notices};
use crate::hangar::{Decision, Hangar};

/// The handler of the unit variant `Request::Metrics`.
pub(crate) struct Metrics;

impl Apply for Metrics {
    async fn apply(self, hangar: &Hangar, decide: &Decision<'_>, _notices: Notices) -> Answered {
        Ok(Reply::Metrics(Box::new(hangar.metrics(decide.view()))))
    }
}
