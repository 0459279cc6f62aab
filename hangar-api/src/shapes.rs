//! The JSON bodies REST and MCP share, wrapping hangar-core's records unchanged.
//!
//! Both surfaces serialize these same types, so a record looks alike wherever it appears.

pub use hangar_core::record::{LogList, ServerList};
use hangar_core::record::{ServerSummary, StateCounts, StatusEntry, ToolRecord};
use serde::Serialize;

/// `GET /api/mcp_servers/{id}/tools` and `hangar_tools`.
#[derive(Debug, Serialize)]
pub struct ToolList {
    pub tools: Vec<ToolRecord>,
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
