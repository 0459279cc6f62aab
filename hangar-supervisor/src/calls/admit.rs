//! Stage 3 of the call pipeline: what a judged call must satisfy before it may run: arguments
//! that are an object, `Mcp-Param-*` headers that mirror them (SEP-2243), a tool that runs only
//! as a task called by a client that takes tasks, and room under the hangar's and the server's
//! limits. Per-identity quotas belong here.

use hangar_core::ipc::{CallEra, ErrorKind, IpcError};

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
}
