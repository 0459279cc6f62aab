//! `hangar status`: the server list as an aligned table.

use serde::Deserialize;
use serde_json::Value;

use crate::error::CliError;

#[derive(Debug, Deserialize)]
struct List {
    mcp_servers: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
struct Entry {
    mcp_server_id: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    mode: String,
    #[serde(default)]
    tools_count: Option<u64>,
    #[serde(default)]
    health_status: Option<String>,
    #[serde(default)]
    dead: Option<Dead>,
}

#[derive(Debug, Deserialize)]
struct Dead {
    reason: String,
    #[serde(default)]
    retry_allowed_at: Option<String>,
    #[serde(default)]
    revived_by: Option<String>,
    /// How its process ended, in the hangar's words, when known.
    #[serde(default)]
    detail: Option<String>,
}

const HEADER: [&str; 6] = ["SERVER", "STATE", "MODE", "TOOLS", "HEALTH", "DEAD"];

/// The table for a `GET /api/mcp_servers` body.
pub fn table(body: &Value, url: &str) -> Result<String, CliError> {
    let list = List::deserialize(body)
        .map_err(|err| CliError::Protocol { url: url.to_owned(), reason: format!("not a server list: {err}") })?;
    let mut rows = vec![HEADER.map(str::to_owned).to_vec()];
    for entry in list.mcp_servers {
        rows.push(vec![
            entry.mcp_server_id,
            entry.state,
            entry.mode,
            entry.tools_count.map_or_else(|| "-".to_owned(), |n| n.to_string()),
            entry.health_status.unwrap_or_else(|| "-".to_owned()),
            entry.dead.as_ref().map_or_else(|| "-".to_owned(), dead_column),
        ]);
    }
    Ok(align(&rows))
}

/// `reason`, how the server is revived (`retry after <time>` or `start to revive`), and how its
/// process ended when the record says (`; <detail>`).
fn dead_column(dead: &Dead) -> String {
    let column = match (dead.revived_by.as_deref(), &dead.retry_allowed_at) {
        (Some("start"), _) => format!("{}, start to revive", dead.reason),
        (_, Some(at)) => format!("{}, retry after {at}", dead.reason),
        (_, None) => dead.reason.clone(),
    };
    match &dead.detail {
        Some(detail) => format!("{column}; {detail}"),
        None => column,
    }
}

/// Columns padded to their widest cell; the last column is not padded.
fn align(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| rows.iter().filter_map(|r| r.get(i)).map(|c| c.chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_table_is_aligned_and_says_why_a_server_is_dead() {
        let body = json!({"mcp_servers": [
            {"mcp_server_id": "math", "state": "ready", "mode": "subprocess", "alive": true,
             "tools_count": 2, "health_status": "healthy", "dead": null},
            {"mcp_server_id": "w", "state": "dead", "mode": "http", "alive": false, "tools_count": 0,
             "health_status": "unhealthy", "dead": {"reason": "given_up", "since": "t0",
             "retry_allowed_at": "2026-11-29T23:20:27.822Z", "revived_by": "call_or_start"}},
            {"mcp_server_id": "blocked", "state": "dead", "mode": "subprocess", "alive": false,
             "tools_count": 1, "health_status": "unknown", "dead": {"reason": "capability_blocked",
             "since": "t0", "retry_allowed_at": null, "revived_by": "start"}},
        ]});
        let table = table(&body, "u").unwrap();
        let expected = "\
SERVER   STATE  MODE        TOOLS  HEALTH     DEAD
math     ready  subprocess  2      healthy    -
w        dead   http        0      unhealthy  given_up, retry after 2026-11-29T23:20:27.822Z
blocked  dead   subprocess  1      unknown    capability_blocked, start to revive
";
        assert_eq!(table, expected);
    }

    #[test]
    fn a_dead_server_without_backoff_shows_its_reason() {
        let dead = Dead {
            reason: "crashed".into(),
            retry_allowed_at: None,
            revived_by: Some("call_or_start".into()),
            detail: None,
        };
        assert_eq!(dead_column(&dead), "crashed");
        let killed =
            Dead { detail: Some("its process closed its stdout, so the hangar killed it (SIGKILL)".into()), ..dead };
        assert_eq!(dead_column(&killed), "crashed; its process closed its stdout, so the hangar killed it (SIGKILL)");
    }

    #[test]
    fn a_body_that_is_not_a_list_is_a_protocol_error() {
        assert!(matches!(table(&json!({"nope": 1}), "u"), Err(CliError::Protocol { .. })));
    }
}
