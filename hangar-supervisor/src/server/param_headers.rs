//! A tool's SEP-2243 custom headers, read from its declaration as the server last listed it:
//! what a front-door caller's `Mcp-Param-*` headers are checked against, and what a call to
//! the upstream carries.

use hangar_core::custom_headers::{self, Declared, ParamHeaders};
use hangar_core::ipc::{ErrorKind, IpcError};
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
}
