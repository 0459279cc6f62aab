//! `hangar audit [--since C] [--limit N] [--identity I] [--mcp-server S] [--outcome O] [-f]`:
//! the audit trail as a table (or, with `--json`, one entry a line), and with `-f` what comes next.
//! Identities and tool names are the clients' own: every cell and line is shown visibly.

use std::io::Write;
use std::time::Duration;

use hangar_core::audit_page::RestAuditPage;
use hangar_core::journal::{AuditEntry, CallOutcome};
use hangar_core::terminal::{visible, visible_json};
use serde::Deserialize;
use serde_json::Value;

use crate::client::{Api, segment};
use crate::error::CliError;

/// How often `-f` asks for what is new.
const POLL_EVERY: Duration = Duration::from_secs(1);

/// What to ask `GET /api/audit` for.
#[derive(Debug, Default)]
pub struct Filters<'a> {
    pub since: Option<u64>,
    pub limit: Option<u16>,
    pub identity: Option<&'a str>,
    pub mcp_server: Option<&'a str>,
    pub outcome: Option<&'a str>,
}

/// One page as the API answers it, each entry kept as the JSON it came as.
type Page = RestAuditPage<Value>;

pub fn run(api: &Api, filters: &Filters, follow: bool, json: bool) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    if !json {
        writeln!(out, "{}", row(["TIME", "IDENTITY", "SERVER", "TOOL/METHOD", "OUTCOME", "DURATION"]))?;
    }
    let mut since = filters.since;
    loop {
        let page = fetch(api, filters, since)?;
        print(&mut out, &page.entries, json)?;
        since = Some(page.next);
        if !follow {
            return Ok(());
        }
        std::thread::sleep(POLL_EVERY);
    }
}

fn fetch(api: &Api, filters: &Filters, since: Option<u64>) -> Result<Page, CliError> {
    let mut query = Vec::new();
    if let Some(since) = since {
        query.push(format!("since={since}"));
    }
    if let Some(limit) = filters.limit {
        query.push(format!("limit={limit}"));
    }
    for (key, value) in
        [("identity", filters.identity), ("mcp_server", filters.mcp_server), ("outcome", filters.outcome)]
    {
        if let Some(value) = value {
            query.push(format!("{key}={}", segment(value)));
        }
    }
    let path = if query.is_empty() { "/api/audit".to_owned() } else { format!("/api/audit?{}", query.join("&")) };
    let answer = api.get(&path)?;
    Page::deserialize(&answer.body).map_err(|err| protocol(api, &format!("not an audit page: {err}")))
}

fn protocol(api: &Api, reason: &str) -> CliError {
    CliError::Protocol { url: api.base().to_owned(), reason: reason.to_owned() }
}

/// Each entry as a table row, or with `json` as the JSON the API sent.
fn print(out: &mut impl Write, entries: &[Value], json: bool) -> Result<(), CliError> {
    for entry in entries {
        if json {
            writeln!(out, "{}", visible_json(&entry.to_string()))?;
            continue;
        }
        match AuditEntry::deserialize(entry) {
            Ok(entry) => writeln!(out, "{}", table_row(&entry))?,
            // A newer hangar's entry this client cannot read: shown as it came.
            Err(_) => writeln!(out, "{}", visible_json(&entry.to_string()))?,
        }
    }
    out.flush()?;
    Ok(())
}

fn table_row(entry: &AuditEntry) -> String {
    let what = match &entry.tool {
        Some(tool) => format!("{tool} ({})", entry.method),
        None => entry.method.clone(),
    };
    let outcome = match (entry.outcome, &entry.error_type) {
        (CallOutcome::Ok, _) => "ok".to_owned(),
        (CallOutcome::IsError, _) => "is_error".to_owned(),
        (CallOutcome::Error, Some(kind)) => kind.clone(),
        (CallOutcome::Error, None) => "error".to_owned(),
    };
    let duration = format!("{:.1} ms", entry.duration_ms);
    row([&entry.at, &entry.identity, &entry.mcp_server, &what, &outcome, &duration])
}

fn row(cells: [&str; 6]) -> String {
    let [at, identity, server, what, outcome, duration] = cells.map(visible);
    format!("{at:<24}  {identity:<16}  {server:<16}  {what:<28}  {outcome:<16}  {duration:>10}").trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_entry_reads_as_one_row_with_its_error_type_as_outcome() {
        let entry = json!({"id": 3, "at": "2026-12-01T01:02:03.456Z", "identity": "ci-bot", "profile": "ci",
            "mcp_server": "math", "tool": "add", "method": "tools/call", "outcome": "error",
            "error_type": "forbidden", "duration_ms": 1.25, "bytes_in": 10, "bytes_out": 0});
        let mut out = Vec::new();
        print(&mut out, std::slice::from_ref(&entry), false).unwrap();
        let text = String::from_utf8(out).unwrap();
        for cell in ["2026-12-01T01:02:03.456Z", "ci-bot", "math", "add (tools/call)", "forbidden", "1.2 ms"] {
            assert!(text.contains(cell), "{cell} in {text}");
        }
        let mut out = Vec::new();
        print(&mut out, std::slice::from_ref(&entry), true).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), format!("{entry}\n"), "as the API sent it");
    }
}
