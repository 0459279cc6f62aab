//! Text a client or an upstream chose never drives an operator's terminal (issue 29, section 9).
//!
//! An upstream declares a tool whose name holds escape sequences (a window title, a screen
//! clear, BEL, DEL, a C1 CSI, a right-to-left override) and a newline followed by a forged line;
//! a client calls it, and calls an undeclared name built the same way. Then the operator runs the
//! real `hangar` CLI: `start` (which lists the tools), `audit` (table and `--json`), `logs` (the
//! upstream's own stderr names its tools), `status`, and an error quoting the operator's own
//! input. Every byte printed is free of control characters but the line ends, every entry stays
//! one line, and the escapes read as `\x1b`, `\x07`, `\n`. The supervisor's and the API's
//! human-format logs (`tracing` fields holding the client's names) are held to the same rule,
//! and their JSON logs hold no raw control character either, while still reading back the name.

use std::process::Output;
use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, poll};

use super::cli::cli;

/// The tool the upstream declares: YAML's `\e`, `\a`, `\x7f`, `\u009b`, `\u202e` escapes.
const CONFIG: &str = r#"
mcp_servers:
  shady:
    command: ["{fake}", "--tools", "add,evil\e]0;OWNED\a\e[2J\nFAKE ... rm -rf ok\x7f\u009b2J\u202e"]
"#;

/// The same name, as the upstream declares it.
const EVIL: &str = "evil\x1b]0;OWNED\x07\x1b[2J\nFAKE ... rm -rf ok\x7f\u{9b}2J\u{202e}";
/// A client's own name for a tool no one declares, forging an audit row.
const FORGED: &str = "nope\x1b[31m\r\n2026-01-01T00:00:00.000Z  admin  shady  rm -rf / (tools/call)  ok";

/// Whether `c` may reach a terminal: anything but a control character (the line end aside) or a
/// mark that reorders text.
fn harmless(c: char) -> bool {
    c == '\n' || !(c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'))
}

/// Asserts that `what` printed nothing a terminal would act on, and returns its stdout.
fn clean(what: &str, output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    for (stream, text) in [("stdout", &stdout), ("stderr", &stderr)] {
        let raw: Vec<(usize, char)> = text.char_indices().filter(|(_, c)| !harmless(*c)).collect();
        assert!(raw.is_empty(), "`hangar {what}` wrote raw control characters to {stream} at {raw:?}:\n{text:?}");
        for line in text.lines() {
            assert!(!line.starts_with("FAKE") && !line.starts_with("2026-01-01"), "a forged line: {text:?}");
        }
    }
    stdout
}

#[test]
fn names_and_output_from_clients_and_upstreams_reach_the_terminal_as_visible_escapes() {
    let hangar = Hangar::start(CONFIG);
    let url = hangar.base.as_str();

    // The operator starts the server: the answer lists the upstream's tool names.
    let started = clean("start", &cli(url, &["start", "shady"]));
    assert_eq!(started.lines().count(), 1, "{started:?}");
    assert!(started.contains(r"evil\x1b]0;OWNED\x07\x1b[2J\nFAKE ... rm -rf ok\x7f"), "visible: {started:?}");

    // A client calls the declared tool, and an undeclared name of its own.
    let called =
        hangar.tool_ok("hangar_call", json!({"calls": [{"mcp_server": "shady", "tool": EVIL, "arguments": {}}]}));
    assert_eq!(called["results"][0]["success"], true, "{called}");
    let refused =
        hangar.tool_ok("hangar_call", json!({"calls": [{"mcp_server": "shady", "tool": FORGED, "arguments": {}}]}));
    assert_eq!(refused["results"][0]["success"], false, "{refused}");

    // Both calls are in the audit trail: one row each, the header first.
    let table = poll("both calls in `hangar audit`", Duration::from_secs(10), || {
        let output = cli(url, &["audit", "--mcp-server", "shady"]);
        let table = String::from_utf8_lossy(&output.stdout).into_owned();
        (table.contains("evil") && table.contains("nope")).then_some(output)
    });
    let table = clean("audit", &table);
    assert_eq!(table.lines().count(), 4, "a header, the start, and one row per call: {table:?}");
    assert!(table.contains(r"nope\x1b[31m\r\n2026-01-01T00:00:00.000Z"), "visible: {table:?}");
    let json = clean("audit --json", &cli(url, &["audit", "--json", "--mcp-server", "shady"]));
    let entries: Vec<Value> = json.lines().map(|line| hangar_tests::serde_json::from_str(line).unwrap()).collect();
    let tools: Vec<&str> = entries.iter().filter_map(|e| e["tool"].as_str()).collect();
    assert_eq!(entries.len(), 3, "{json}");
    assert_eq!(tools, [EVIL, FORGED], "--json is still the API's JSON, the same values: {json}");

    // The upstream's stderr names its tools as it starts.
    let logs = poll("the fake's tool line in `hangar logs`", Duration::from_secs(10), || {
        let output = cli(url, &["logs", "shady", "-n", "50"]);
        String::from_utf8_lossy(&output.stdout).contains("serving tools").then_some(output)
    });
    let logs = clean("logs", &logs);
    assert!(logs.lines().any(|l| l.contains(r"serving tools add,evil\x1b]0;OWNED")), "{logs:?}");
    clean("logs --json", &cli(url, &["logs", "shady", "--json"]));
    clean("status", &cli(url, &["status"]));

    // An error quoting what the operator typed (a pasted name) is shown the same way.
    let missing = cli(url, &["stop", "gone\x1b]0;OWNED\x07"]);
    assert_eq!(missing.status.code(), Some(1));
    clean("stop", &missing);

    // The hangar's own human-format logs (supervisor and API) name the client's tools too.
    let log = hangar.log();
    assert!(log.contains(r"nope\x1b[31m\r\n2026-01-01"), "the call is logged, its name visible");
    let raw: Vec<char> = log.chars().filter(|c| !harmless(*c)).collect();
    assert!(raw.is_empty(), "the hangar's log holds raw control characters {raw:?}");
    assert!(!log.lines().any(|l| l.starts_with("FAKE") || l.starts_with("2026-01-01")), "a forged log line");
}

#[test]
fn json_logs_carry_the_names_escaped_and_still_parse() {
    let hangar = Hangar::start_with(CONFIG, &["--log-format", "json"]);
    let called =
        hangar.tool_ok("hangar_call", json!({"calls": [{"mcp_server": "shady", "tool": EVIL, "arguments": {}}]}));
    assert_eq!(called["results"][0]["success"], true, "{called}");
    let log = poll("the call in the JSON log", Duration::from_secs(10), || {
        let log = hangar.log();
        log.contains("evil").then_some(log)
    });
    let raw: Vec<char> = log.chars().filter(|c| !harmless(*c)).collect();
    assert!(raw.is_empty(), "the JSON log holds raw control characters {raw:?}");
    let tools: Vec<String> = log
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| hangar_tests::serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .filter_map(|line| line["fields"]["what"].as_str().map(str::to_owned))
        .collect();
    assert!(tools.iter().any(|t| t == EVIL), "the same name, read back: {tools:?}");
}
