//! Stage 3 of the call pipeline: what a judged call must satisfy before it may run: arguments
//! that are an object, `Mcp-Param-*` headers that mirror them (SEP-2243), a tool that runs only
//! as a task called by a client that takes tasks, room under the caller's own quotas (its
//! profile's `limits`, `crate::quotas`), and room under the hangar's and the server's limits.

use std::time::{Instant, SystemTime};

use hangar_core::ipc::{CallEra, ErrorKind, IpcError};
use hangar_core::policy::View;

use super::CallRequest;
use super::park::check_task_support;
use crate::hangar::Hangar;
use crate::limits::Permit;
use crate::server::Server;

impl Hangar {
    /// Stage 3: the call's permit to run (held until it ends), or its refusal.
    pub(super) fn admit_call(&self, server: &Server, tool: &str, call: &CallRequest) -> Result<Permit, IpcError> {
        let arguments = &call.arguments;
        if !arguments.is_object() && !arguments.is_null() {
            return Err(IpcError::new(ErrorKind::InvalidArgument, "arguments must be a JSON object"));
        }
        if let Some(given) = &call.param_headers {
            server.check_param_headers(tool, arguments, given)?;
        }
        // Checked at the call's one resolve: no lookup of its own.
        if call.stance.era == CallEra::Modern {
            check_task_support(server, tool, call.stance.tasks.is_some())?;
        }
        self.admit(server)
    }

    /// The caller's own quotas (its profile's `limits`) for a call of `tool` of `server`: its
    /// day's count read from the journal first if need be (off the event loop), then one call
    /// taken from each of its buckets, or the call refused naming the quota it hit.
    pub(super) async fn admit_quotas(
        &self,
        view: &View,
        identity: &str,
        server: &Server,
        tool: &str,
    ) -> Result<(), IpcError> {
        let Some(quotas) = view.quotas() else { return Ok(()) };
        let now = SystemTime::now();
        let (day, minute) = crate::quotas::today(now);
        if quotas.daily_calls.is_some() && self.quotas.needs_count(quotas, identity, day) {
            let (journal, reader) = (self.shared.journal.clone(), self.journal_reader.clone());
            let who = identity.to_owned();
            let counted = tokio::task::spawn_blocking(move || {
                let minutes = reader.rates(&journal, minute + 1, now, |_, identity| identity == who);
                minutes.map(|minutes| minutes.iter().map(|m| m.calls).sum::<u64>())
            })
            .await;
            match counted {
                Ok(Ok(calls)) => self.quotas.counted(quotas, identity, day, calls),
                // The quota cannot be told: refused, not passed (a quota fails closed).
                _ => {
                    return Err(IpcError::new(
                        ErrorKind::Internal,
                        "the day's calls could not be read from the journal to check the daily quota",
                    ));
                }
            }
        }
        let qualified = format!("{}{}{tool}", server.prefix(), hangar_core::front_door::SEPARATOR);
        self.quotas.admit(quotas, identity, (&qualified, tool), (Instant::now(), day))
    }
}
