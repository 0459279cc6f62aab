//! Authorization decisions, made and recorded in one place: each call or admin action a caller
//! asks for is judged against its view and logged as a structured `tracing` event (target
//! `hangar::audit`: identity, profile, server, tool or method, outcome, error type). Arguments,
//! keys and tokens are never part of it. The persistent journal comes later (issue 14).
//!
//! Also what a view shows of one server ([`Shown`]): its tools as far as the view allows them.

use std::sync::Arc;

use hangar_core::access::{ANONYMOUS, Caller, HANGAR};
use hangar_core::echo::bounded;
use hangar_core::ipc::IpcError;
use hangar_core::policy::View;
use hangar_core::record::{ServerDetails, ServerSummary, ToolRecord};
use serde_json::Value;

use crate::server::Server;

pub const TARGET: &str = "hangar::audit";

/// Judges and records the requests of one caller.
pub struct Decision<'a> {
    caller: &'a Caller,
    view: &'a View,
}

impl<'a> Decision<'a> {
    pub fn by(caller: &'a Caller, view: &'a View) -> Self {
        Decision { caller, view }
    }

    /// An admin action (`start`, `stop`, `logs`, `reload`) on `found`: a server the view does
    /// not see is not found (as an unknown one), one it sees needs `admin: true`.
    pub fn admin<T>(&self, action: &str, mcp_server: &str, found: Result<T, IpcError>) -> Result<T, IpcError> {
        let outcome = found.and_then(|found| {
            if self.view.is_admin() {
                Ok(found)
            } else {
                Err(IpcError::forbidden(format!("`{action}` needs a profile with `admin: true`")))
            }
        });
        self.record(mcp_server, action, &outcome);
        outcome
    }

    /// A tool call to what `found` names: the tool must be allowed by the view.
    pub fn call(
        &self,
        mcp_server: &str,
        tool: &str,
        found: Result<(Arc<Server>, String), IpcError>,
    ) -> Result<(Arc<Server>, String), IpcError> {
        let outcome = found.and_then(|(server, tool)| {
            if self.view.allows_tool(&tool) { Ok((server, tool)) } else { Err(tool_forbidden(server.id(), &tool)) }
        });
        match &outcome {
            Ok((server, tool)) => self.record(server.id(), tool, &Ok(())),
            Err(err) => self.record(mcp_server, tool, &Err::<(), _>(err.clone())),
        }
        outcome
    }

    /// Any other MCP request to one server (`prompts/get`, `resources/read`, ...). A
    /// `tools/call` passed this way is judged as a call. Lists are not recorded.
    pub fn forward(
        &self,
        mcp_server: &str,
        method: &str,
        params: &Value,
        found: Result<Arc<Server>, IpcError>,
    ) -> Result<Arc<Server>, IpcError> {
        let tool = (method == "tools/call").then(|| params.get("name").and_then(Value::as_str).unwrap_or_default());
        let outcome = found.and_then(|server| match tool {
            Some(tool) if !self.view.allows_tool(tool) => Err(tool_forbidden(server.id(), tool)),
            _ => Ok(server),
        });
        if !method.ends_with("/list") {
            self.record(mcp_server, tool.unwrap_or(method), &outcome);
        }
        outcome
    }

    fn record<T>(&self, mcp_server: &str, what: &str, outcome: &Result<T, IpcError>) {
        let identity = self.caller.identity.as_str();
        let profile = self.view.profile().unwrap_or("");
        let (outcome, error_type) = match outcome {
            Ok(_) => ("authorized", ""),
            Err(err) => ("refused", err.kind.as_str()),
        };
        let (mcp_server, what) = (bounded(mcp_server), bounded(what));
        // The hangar's own clients and the anonymous caller of an unauthenticated hangar are
        // everyday traffic; every named caller's decisions are recorded at info.
        if identity == HANGAR || identity == ANONYMOUS {
            tracing::debug!(target: TARGET, identity, profile, %mcp_server, %what, outcome, error_type, "access");
        } else {
            tracing::info!(target: TARGET, identity, profile, %mcp_server, %what, outcome, error_type, "access");
        }
    }
}

/// A tool the caller's view denies on a server it sees.
pub fn tool_forbidden(mcp_server: &str, tool: &str) -> IpcError {
    IpcError::forbidden(format!(
        "the tool `{}` of `{}` is outside this caller's profile",
        bounded(tool),
        bounded(mcp_server)
    ))
}

/// What a view shows of one server: only the tools it allows.
pub trait Shown {
    fn summary(&self, server: &Server) -> ServerSummary;
    fn details(&self, server: &Server) -> ServerDetails;
    fn tools(&self, server: &Server) -> Vec<ToolRecord>;
    fn declared_tools(&self, server: &Server) -> Vec<Value>;
}

impl Shown for View {
    fn summary(&self, server: &Server) -> ServerSummary {
        let mut summary = server.summary();
        if let View::Profile { .. } = self {
            summary.tools_count = server.tool_names().iter().filter(|t| self.allows_tool(t)).count();
        }
        summary
    }

    fn details(&self, server: &Server) -> ServerDetails {
        let mut details = server.details();
        details.tools.retain(|t| self.allows_tool(&t.name));
        details
    }

    fn tools(&self, server: &Server) -> Vec<ToolRecord> {
        let mut tools = server.tools();
        tools.retain(|t| self.allows_tool(&t.tool.name));
        tools
    }

    fn declared_tools(&self, server: &Server) -> Vec<Value> {
        let mut tools = server.declared_tools();
        tools.retain(|t| t.get("name").and_then(Value::as_str).is_some_and(|name| self.allows_tool(name)));
        tools
    }
}
