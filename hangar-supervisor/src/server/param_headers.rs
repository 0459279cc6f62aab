//! A tool's SEP-2243 custom headers, read from its declaration as the server last listed it:
//! what a front-door caller's `Mcp-Param-*` headers are checked against, and what a call to
//! the upstream carries. Also the tool's declared task support (SEP-2663), read the same way.

use hangar_core::custom_headers::{self, Declared, ParamHeaders};
use hangar_core::ipc::{ErrorKind, IpcError};
use hangar_core::mcp::TaskSupport;
use serde_json::Value;

use super::Server;

impl Server {
    /// The parameters `tool` mirrors into headers (none for a tool it does not list, or whose
    /// declarations are invalid). Read per call from the one declaration: a schema walk over
    /// its top-level properties, no copy of the tool list.
    pub fn param_headers(&self, tool: &str) -> Vec<Declared> {
        let inner = self.lock();
        let declaration = inner.tools.raw.iter().find(|t| t.get("name").and_then(Value::as_str) == Some(tool));
        declaration.and_then(|t| t.get("inputSchema")).map(custom_headers::declared).unwrap_or_default()
    }

    /// Refuses a call whose headers (`given`) do not mirror its `arguments` for `tool`.
    pub fn check_param_headers(&self, tool: &str, arguments: &Value, given: &ParamHeaders) -> Result<(), IpcError> {
        custom_headers::check(&self.param_headers(tool), arguments, given)
            .map_err(|mismatch| IpcError::new(ErrorKind::HeaderMismatch, mismatch.message()))
    }

    /// How `tool` declares tasks, as the server last listed it (`None`: it declares nothing, or
    /// is not listed). One lookup, nothing cloned: the front door asks at every call.
    pub fn task_support(&self, tool: &str) -> Option<TaskSupport> {
        let inner = self.lock();
        let declaration = inner.tools.raw.iter().find(|t| t.get("name").and_then(Value::as_str) == Some(tool));
        declaration.and_then(TaskSupport::of)
    }
}
