//! `hangar approvals [approve|deny ID]`: the calls waiting for a person's approval and those
//! decided lately (`GET /api/approvals`), as a table; and a decision on one
//! (`POST /api/approvals/{id}/approve|deny`). The hangar judges who may decide.

use hangar_core::terminal::visible;
use serde_json::Value;

use crate::client::{Answer, Api, segment};
use crate::error::CliError;
use crate::status::align;

const HEADER: [&str; 7] = ["ID", "STATE", "CALLER", "CALL", "ARGUMENTS", "RULE", "UNTIL / BY"];
/// The most of the arguments a row shows (`--json` shows them whole).
const ARGUMENTS_SHOWN: usize = 60;

/// The table for a `GET /api/approvals` body: pending ones first, as the API lists them.
pub fn table(body: &Value, url: &str) -> Result<String, CliError> {
    let Some(approvals) = body["approvals"].as_array() else {
        return Err(CliError::Protocol { url: url.to_owned(), reason: "not a list of approvals".into() });
    };
    if approvals.is_empty() {
        return Ok("No calls wait for approval, and none was decided lately.".into());
    }
    let mut rows = vec![HEADER.map(str::to_owned).to_vec()];
    for approval in approvals {
        let text = |key: &str| approval[key].as_str().unwrap_or("-").to_owned();
        let call = format!("{}/{}", text("mcp_server"), text("tool"));
        let arguments = match &approval["arguments"] {
            Value::Null => "-".to_owned(),
            arguments => shortened(&arguments.to_string()),
        };
        let state = match approval["outcome"].as_str() {
            Some(outcome) => format!("{} ({outcome})", text("state")),
            None => text("state"),
        };
        let until_or_by = match approval["decided_by"].as_str() {
            Some(by) => by.to_owned(),
            None => text("expires_at"),
        };
        let cells = [text("id"), state, text("identity"), call, arguments, text("rule"), until_or_by];
        rows.push(cells.iter().map(|cell| visible(cell).into_owned()).collect());
    }
    Ok(align(&rows))
}

fn shortened(text: &str) -> String {
    match text.char_indices().nth(ARGUMENTS_SHOWN) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Approves or denies approval `id`.
pub fn decide(api: &Api, id: &str, approve: bool) -> Result<Answer, CliError> {
    let verb = if approve { "approve" } else { "deny" };
    api.post(&format!("/api/approvals/{}/{verb}", segment(id)))
}

/// The one line a decision prints.
pub fn decided(body: &Value) -> String {
    let text = |key: &str| body[key].as_str().unwrap_or("?");
    format!("{} {}: {}'s call of {}/{}", text("id"), text("state"), text("identity"), text("mcp_server"), text("tool"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::testing::answer_once;

    #[test]
    fn pending_and_decided_approvals_are_a_table() {
        let body = json!({"approvals": [
            {"id": "apr_1", "state": "pending", "identity": "alice", "mcp_server": "files",
             "tool": "delete_file", "arguments": {"path": "/data/a"}, "rule": "profiles.dev.rules[0]",
             "expires_at": "2026-12-04T22:10:00.000Z"},
            {"id": "apr_0", "state": "approved", "identity": "alice", "mcp_server": "files",
             "tool": "delete_file", "rule": "profiles.dev.rules[0]", "decided_by": "bob", "outcome": "ok"},
        ]});
        let shown = table(&body, "u").unwrap();
        let lines: Vec<&str> = shown.lines().collect();
        assert!(lines[0].starts_with("ID     STATE"), "{shown}");
        assert!(lines[1].contains(r#"files/delete_file  {"path":"/data/a"}"#), "{shown}");
        assert!(lines[2].contains("approved (ok)") && lines[2].ends_with("bob"), "{shown}");
        assert_eq!(table(&json!({"approvals": []}), "u").unwrap().lines().count(), 1);
        assert!(shortened(&"x".repeat(100)).ends_with('…'));
    }

    #[test]
    fn a_decision_is_posted_to_the_approvals_path() {
        let (url, path) =
            answer_once("200 OK", r#"{"id":"apr_1","state":"denied","identity":"alice","mcp_server":"f","tool":"t"}"#);
        let answer = decide(&Api::new(&url, None), "apr_1", false).unwrap();
        assert_eq!(decided(&answer.body), "apr_1 denied: alice's call of f/t");
        assert!(path.join().unwrap().starts_with("POST /api/approvals/apr_1/deny "));
    }
}
