//! `hangar status`: the server list as an aligned table, each cell shown visibly.

use hangar_core::record::ServerList;
use hangar_core::terminal::visible;
use serde::Deserialize;
use serde_json::Value;

use crate::error::CliError;

const HEADER: [&str; 6] = ["SERVER", "STATE", "MODE", "TOOLS", "HEALTH", "DEAD"];

/// The table for a `GET /api/mcp_servers` body.
pub fn table(body: &Value, url: &str) -> Result<String, CliError> {
    let list = ServerList::deserialize(body)
        .map_err(|err| CliError::Protocol { url: url.to_owned(), reason: format!("not a server list: {err}") })?;
    let mut rows = vec![HEADER.map(str::to_owned).to_vec()];
    for entry in list.mcp_servers {
        let dead = entry.dead.as_ref().map_or_else(|| "-".to_owned(), |dead| dead.short());
        let cells = [
            entry.mcp_server_id.as_str(),
            entry.state.as_str(),
            &entry.mode,
            &entry.tools_count.to_string(),
            &entry.health_status,
            &dead,
        ];
        rows.push(cells.iter().map(|cell| visible(cell).into_owned()).collect());
        // An isolated server's instances, under it: name (and owner), state, its dead record.
        for instance in &entry.instances {
            let name = format!("  {} ({})", instance.instance, instance.identity);
            let dead = instance.dead.as_ref().map_or_else(|| "-".to_owned(), |dead| dead.short());
            let cells = [name.as_str(), instance.state.as_str(), "instance", "", "", &dead];
            rows.push(cells.iter().map(|cell| visible(cell).into_owned()).collect());
        }
    }
    Ok(align(&rows))
}

/// Columns padded to their widest cell; the last column is not padded.
pub(crate) fn align(rows: &[Vec<String>]) -> String {
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
    fn an_isolated_servers_instances_are_listed_under_it() {
        let body = json!({"mcp_servers": [
            {"mcp_server_id": "everything", "state": "cold", "mode": "subprocess", "alive": false,
             "tools_count": 13, "health_status": "unknown", "dead": null, "isolation": "per_identity",
             "instances": [{"instance": "everything@0a1b", "identity": "alice", "state": "ready",
                            "alive": true, "pid": 7, "idle_s": 3, "dead": null}]},
        ]});
        let expected = "\
SERVER                     STATE  MODE        TOOLS  HEALTH   DEAD
everything                 cold   subprocess  13     unknown  -
  everything@0a1b (alice)  ready  instance                    -
";
        assert_eq!(table(&body, "u").unwrap(), expected);
    }

    #[test]
    fn the_dead_column_is_the_core_s_short_form_with_its_detail() {
        let body = json!({"mcp_servers": [
            {"mcp_server_id": "c", "state": "dead", "mode": "subprocess", "alive": false, "tools_count": 0,
             "health_status": "unhealthy", "dead": {"reason": "crashed", "since": "t0", "retry_allowed_at": null,
             "revived_by": "call_or_start",
             "detail": "its process closed its stdout, so the hangar killed it (SIGKILL)"}},
        ]});
        let table = table(&body, "u").unwrap();
        assert!(
            table.ends_with("crashed; its process closed its stdout, so the hangar killed it (SIGKILL)\n"),
            "{table}"
        );
    }

    #[test]
    fn an_unknown_dead_reason_is_a_protocol_error() {
        let body = json!({"mcp_servers": [
            {"mcp_server_id": "c", "state": "dead", "mode": "subprocess", "alive": false, "tools_count": 0,
             "health_status": "unhealthy", "dead": {"reason": "eaten", "since": "t0", "retry_allowed_at": null,
             "revived_by": "call_or_start"}},
        ]});
        assert!(matches!(table(&body, "u"), Err(CliError::Protocol { .. })));
    }

    #[test]
    fn a_body_that_is_not_a_list_is_a_protocol_error() {
        assert!(matches!(table(&json!({"nope": 1}), "u"), Err(CliError::Protocol { .. })));
    }
}
