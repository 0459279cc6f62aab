//! The JSON bodies REST and MCP share, wrapping hangar-core's records unchanged.
//!
//! Both surfaces serialize these same types, so a record looks alike wherever it appears.

use hangar_core::echo::bounded;
use hangar_core::lifecycle::State;
pub use hangar_core::record::{LogList, ServerList};
use hangar_core::record::{ServerDetails, ServerSummary, StateCounts, StatusEntry, ToolRecord, ToolsSource};
use serde::Serialize;

/// `GET /api/mcp_servers/{id}/tools` and `hangar_tools`: the tools, and where the list comes
/// from, so an empty list of a server that never ran is not taken for the truth.
#[derive(Debug, Serialize)]
pub struct ToolList {
    pub tools: Vec<ToolRecord>,
    pub tools_source: ToolsSource,
    pub state: State,
    /// What a list that is not live means, in the hangar's words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl ToolList {
    pub fn of(tools: Vec<ToolRecord>, server: &ServerDetails) -> ToolList {
        let id = bounded(&server.mcp_server_id);
        let note = match server.tools_source {
            ToolsSource::Live => None,
            ToolsSource::Remembered => Some(format!(
                "`{id}` has not run since the hangar started: these are the tools it declared when it last ran"
            )),
            ToolsSource::Unknown => Some(format!(
                "`{id}` has not run since the hangar started and no tool list is remembered: its tools are unknown until it starts"
            )),
        };
        ToolList { tools, tools_source: server.tools_source, state: server.state, note }
    }
}

/// `hangar_status`: entries and notes come from hangar-core, never built here.
#[derive(Debug, Serialize)]
pub struct StatusReport {
    pub mcp_servers: Vec<StatusEntry>,
    pub summary: StateCounts,
}

impl StatusReport {
    pub fn of(servers: &[ServerSummary]) -> Self {
        StatusReport { mcp_servers: servers.iter().map(StatusEntry::from).collect(), summary: StateCounts::of(servers) }
    }
}

/// `hangar_health`.
#[derive(Debug, Serialize)]
pub struct HealthReport {
    pub status: &'static str,
    pub supervisor: &'static str,
    pub counts: StateCounts,
}

impl HealthReport {
    /// Healthy while no server is degraded or dead; unhealthy when every server is dead.
    pub fn of(servers: &[ServerSummary]) -> Self {
        let counts = StateCounts::of(servers);
        let status = if counts.total > 0 && counts.dead == counts.total {
            "unhealthy"
        } else if counts.degraded > 0 || counts.dead > 0 {
            "degraded"
        } else {
            "healthy"
        };
        HealthReport { status, supervisor: "connected", counts }
    }

    /// The supervisor cannot be asked: nothing is known about the servers.
    pub fn unreachable() -> Self {
        HealthReport { status: "unhealthy", supervisor: "unreachable", counts: StateCounts::default() }
    }
}
