//! `hangar logs NAME [-n N] [-f]`: what a server printed, and with `-f` what it prints next.
//! Each line is the upstream's own output: shown visibly, one printed line per logged line.

use std::io::Write;
use std::time::Duration;

use hangar_core::record::{LogLine, LogList};
use hangar_core::terminal::{visible, visible_json};
use serde::Deserialize;
use serde_json::Value;

use crate::client::{Api, segment};
use crate::error::CliError;

const POLL_EVERY: Duration = Duration::from_millis(500);
/// While following, ask for as much as the API keeps, so nothing between two polls is missed.
const FOLLOW_LINES: u16 = 1000;

pub fn run(api: &Api, name: &str, lines: u16, follow: bool, json: bool) -> Result<(), CliError> {
    let path = |n: u16| format!("/api/mcp_servers/{}/logs?lines={n}", segment(name));
    let answer = api.get(&path(lines))?;
    let mut out = std::io::stdout().lock();
    let first = parse(&answer.body, api.base())?;
    if json && !follow {
        writeln!(out, "{}", visible_json(&answer.text))?;
        out.flush()?;
        return Ok(());
    }
    print(&mut out, &first, json)?;
    if !follow {
        return Ok(());
    }
    let mut last = first.last().cloned();
    loop {
        std::thread::sleep(POLL_EVERY);
        let fetched = parse(&api.get(&path(FOLLOW_LINES))?.body, api.base())?;
        let fresh = newer(&fetched, last.as_ref());
        print(&mut out, fresh, json)?;
        if let Some(line) = fresh.last() {
            last = Some(line.clone());
        }
    }
}

/// The lines of a logs body.
fn parse(body: &Value, url: &str) -> Result<Vec<LogLine>, CliError> {
    LogList::deserialize(body)
        .map(|list| list.logs)
        .map_err(|err| CliError::Protocol { url: url.to_owned(), reason: format!("not a log list: {err}") })
}

/// Each line as text, or with `json` as JSON: the record the API sent, as a JSON value again.
fn print(out: &mut impl Write, lines: &[LogLine], json: bool) -> Result<(), CliError> {
    for line in lines {
        if json {
            // A record of strings always serializes.
            let line = serde_json::to_value(line).unwrap_or_default().to_string();
            writeln!(out, "{}", visible_json(&line))?;
        } else {
            let [at, stream, content] = [&line.recorded_at, &line.stream, &line.content].map(|cell| visible(cell));
            writeln!(out, "{at} {stream} {content}")?;
        }
    }
    out.flush()?;
    Ok(())
}

/// The lines after the last one printed: after its latest occurrence in `fetched`, or, when it
/// has scrolled out of the server's log, every line recorded later than it.
fn newer<'a>(fetched: &'a [LogLine], last: Option<&LogLine>) -> &'a [LogLine] {
    let Some(last) = last else { return fetched };
    if let Some(at) = fetched.iter().rposition(|line| line == last) {
        return &fetched[at + 1..];
    }
    let start = fetched.iter().position(|line| line.recorded_at > last.recorded_at).unwrap_or(fetched.len());
    &fetched[start..]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn lines(items: &[(&str, &str)]) -> Vec<LogLine> {
        items
            .iter()
            .map(|(at, content)| LogLine {
                mcp_server_id: "m".into(),
                stream: "stderr".into(),
                content: (*content).into(),
                recorded_at: (*at).into(),
            })
            .collect()
    }

    fn contents(lines: &[LogLine]) -> Vec<&str> {
        lines.iter().map(|l| l.content.as_str()).collect()
    }

    #[test]
    fn only_lines_after_the_last_printed_are_new() {
        let fetched = lines(&[("t1", "a"), ("t2", "b"), ("t2", "c"), ("t3", "d")]);
        let last = fetched[1].clone();
        assert_eq!(contents(newer(&fetched, Some(&last))), ["c", "d"]);
        let last = fetched[3].clone();
        assert!(newer(&fetched, Some(&last)).is_empty());
        assert_eq!(contents(newer(&fetched, None)), ["a", "b", "c", "d"]);
    }

    #[test]
    fn a_repeated_line_counts_from_its_latest_occurrence() {
        let fetched = lines(&[("t1", "a"), ("t1", "a"), ("t2", "b")]);
        let last = fetched[0].clone();
        assert_eq!(contents(newer(&fetched, Some(&last))), ["b"]);
    }

    #[test]
    fn when_the_last_line_scrolled_out_later_lines_are_new() {
        let fetched = lines(&[("t5", "x"), ("t6", "y")]);
        let last = lines(&[("t4", "gone")])[0].clone();
        assert_eq!(contents(newer(&fetched, Some(&last))), ["x", "y"]);
        let last = lines(&[("t9", "future")])[0].clone();
        assert!(newer(&fetched, Some(&last)).is_empty());
    }

    #[test]
    fn a_logs_body_is_parsed() {
        let body = json!({"logs": [{"mcp_server_id": "m", "stream": "stderr", "content": "hi", "recorded_at": "t"}],
                          "mcp_server_id": "m", "count": 1});
        let parsed = parse(&body, "u").unwrap();
        assert_eq!(contents(&parsed), ["hi"]);
        let mut out = Vec::new();
        print(&mut out, &parsed, true).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), format!("{}\n", body["logs"][0]), "as the API sent it");
        assert!(parse(&json!({"logs": 3}), "u").is_err());
    }
}
