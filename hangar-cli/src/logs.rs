//! `hangar logs NAME [-n N] [-f]`: what a server printed, and with `-f` what it prints next.

use std::io::Write;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::client::{Api, segment};
use crate::error::CliError;

const POLL_EVERY: Duration = Duration::from_millis(500);
/// While following, ask for as much as the API keeps, so nothing between two polls is missed.
const FOLLOW_LINES: u16 = 1000;

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Line {
    #[serde(default)]
    pub recorded_at: String,
    #[serde(default)]
    pub stream: String,
    #[serde(default)]
    pub content: String,
}

#[derive(Debug, Deserialize)]
struct Logs {
    logs: Vec<Value>,
}

pub fn run(api: &Api, name: &str, lines: u16, follow: bool, json: bool) -> Result<(), CliError> {
    let path = |n: u16| format!("/api/mcp_servers/{}/logs?lines={n}", segment(name));
    let answer = api.get(&path(lines))?;
    let mut out = std::io::stdout().lock();
    let first = parse(&answer.body, api.base())?;
    if json && !follow {
        writeln!(out, "{}", answer.text)?;
        out.flush()?;
        return Ok(());
    }
    print(&mut out, &first, json)?;
    if !follow {
        return Ok(());
    }
    let mut last = first.last().map(|(line, _)| line.clone());
    loop {
        std::thread::sleep(POLL_EVERY);
        let fetched = parse(&api.get(&path(FOLLOW_LINES))?.body, api.base())?;
        let fresh = newer(&fetched, last.as_ref());
        print(&mut out, fresh, json)?;
        if let Some((line, _)) = fresh.last() {
            last = Some(line.clone());
        }
    }
}

/// Each line of a logs body, parsed and as the API sent it.
fn parse(body: &Value, url: &str) -> Result<Vec<(Line, Value)>, CliError> {
    let protocol =
        |err: serde_json::Error| CliError::Protocol { url: url.to_owned(), reason: format!("not a log list: {err}") };
    let logs = Logs::deserialize(body).map_err(protocol)?;
    logs.logs.into_iter().map(|raw| Ok((Line::deserialize(&raw).map_err(protocol)?, raw))).collect()
}

fn print(out: &mut impl Write, lines: &[(Line, Value)], json: bool) -> Result<(), CliError> {
    for (line, raw) in lines {
        if json {
            writeln!(out, "{raw}")?;
        } else {
            writeln!(out, "{} {} {}", line.recorded_at, line.stream, line.content)?;
        }
    }
    out.flush()?;
    Ok(())
}

/// The lines after the last one printed: after its latest occurrence in `fetched`, or, when it
/// has scrolled out of the server's log, every line recorded later than it.
fn newer<'a>(fetched: &'a [(Line, Value)], last: Option<&Line>) -> &'a [(Line, Value)] {
    let Some(last) = last else { return fetched };
    if let Some(at) = fetched.iter().rposition(|(line, _)| line == last) {
        return &fetched[at + 1..];
    }
    let start = fetched.iter().position(|(line, _)| line.recorded_at > last.recorded_at).unwrap_or(fetched.len());
    &fetched[start..]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn lines(items: &[(&str, &str)]) -> Vec<(Line, Value)> {
        items
            .iter()
            .map(|(at, content)| {
                let raw = json!({"mcp_server_id": "m", "stream": "stderr", "content": content, "recorded_at": at});
                (Line::deserialize(&raw).unwrap(), raw)
            })
            .collect()
    }

    fn contents(lines: &[(Line, Value)]) -> Vec<&str> {
        lines.iter().map(|(l, _)| l.content.as_str()).collect()
    }

    #[test]
    fn only_lines_after_the_last_printed_are_new() {
        let fetched = lines(&[("t1", "a"), ("t2", "b"), ("t2", "c"), ("t3", "d")]);
        let last = fetched[1].0.clone();
        assert_eq!(contents(newer(&fetched, Some(&last))), ["c", "d"]);
        let last = fetched[3].0.clone();
        assert!(newer(&fetched, Some(&last)).is_empty());
        assert_eq!(contents(newer(&fetched, None)), ["a", "b", "c", "d"]);
    }

    #[test]
    fn a_repeated_line_counts_from_its_latest_occurrence() {
        let fetched = lines(&[("t1", "a"), ("t1", "a"), ("t2", "b")]);
        let last = fetched[0].0.clone();
        assert_eq!(contents(newer(&fetched, Some(&last))), ["b"]);
    }

    #[test]
    fn when_the_last_line_scrolled_out_later_lines_are_new() {
        let fetched = lines(&[("t5", "x"), ("t6", "y")]);
        let last = lines(&[("t4", "gone")])[0].0.clone();
        assert_eq!(contents(newer(&fetched, Some(&last))), ["x", "y"]);
        let last = lines(&[("t9", "future")])[0].0.clone();
        assert!(newer(&fetched, Some(&last)).is_empty());
    }

    #[test]
    fn a_logs_body_is_parsed() {
        let body = json!({"logs": [{"mcp_server_id": "m", "stream": "stderr", "content": "hi", "recorded_at": "t"}],
                          "mcp_server_id": "m", "count": 1});
        let parsed = parse(&body, "u").unwrap();
        assert_eq!(parsed[0].0, Line { recorded_at: "t".into(), stream: "stderr".into(), content: "hi".into() });
        assert!(parse(&json!({"logs": 3}), "u").is_err());
    }
}
