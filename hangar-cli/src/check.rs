//! `hangar check --config F [--start] [--json]`: a config linted as the supervisor would load it.
//!
//! Without `--start`, `hangar-supervisor --check` reads it (the schema, every key's bounds,
//! profiles, rules, credential files, each sandbox against this kernel, grants, managed servers'
//! ports) and prints every problem with its key path; the exit code is 0 or 78. With `--start`,
//! a config without problems is then started in a hangar of its own (as `hangar run` does), each
//! server once: ready or dead (with the reason), its tools (a pin or a capability list that does
//! not match refuses it, as a start would), and how long its start took; exit 69 if any is not
//! ready. `--json` prints one object for machines.

use std::path::Path;
use std::process::Command;

use hangar_core::terminal::visible;
use hangar_runtime::exit::{EX_CONFIG, EX_OK, EX_UNAVAILABLE};
use serde_json::{Value, json};

use crate::ephemeral::{Ephemeral, Started, sibling};
use crate::error::CliError;
use crate::status::align;

/// The outcome: the text (or JSON) to print, and the exit code.
pub struct Checked {
    pub text: String,
    pub code: u8,
}

pub fn run(config: &Path, start: bool, json: bool) -> Result<Checked, CliError> {
    let mut command = Command::new(sibling("hangar-supervisor"));
    command.arg("--check").arg("--config").arg(config).arg("--json");
    let output = command.output().map_err(|err| CliError::Local(format!("cannot run hangar-supervisor: {err}")))?;
    let report: Value = serde_json::from_slice(&output.stdout).map_err(|_| {
        let said = String::from_utf8_lossy(&output.stderr).into_owned();
        CliError::Local(format!("hangar-supervisor --check gave no report: {}", visible(said.trim())))
    })?;
    let problems = report["problems"].as_array().cloned().unwrap_or_default();
    if !problems.is_empty() || !start {
        let code = if problems.is_empty() { EX_OK } else { EX_CONFIG };
        let text = if json { report.to_string() } else { human_problems(config, &problems) };
        return Ok(Checked { text, code });
    }
    let auth = hangar_core::config::Config::load(config).map(|c| c.auth.is_configured()).unwrap_or(false);
    let hangar = Ephemeral::start(config, auth)?;
    let started = hangar.start_servers(&hangar.servers()?);
    drop(hangar);
    let code = if started.iter().all(|s| s.ready) { EX_OK } else { EX_UNAVAILABLE };
    let text = if json {
        let servers: Vec<Value> = started.iter().map(server_json).collect();
        json!({"config": report["config"], "ok": code == EX_OK, "problems": [], "servers": servers}).to_string()
    } else {
        table(&started)
    };
    Ok(Checked { text, code })
}

fn human_problems(config: &Path, problems: &[Value]) -> String {
    let file = config.display();
    if problems.is_empty() {
        return format!("{file}: no problems");
    }
    let mut lines: Vec<String> = problems
        .iter()
        .map(|p| {
            let key = p["key"].as_str().unwrap_or_default();
            let message = p["message"].as_str().unwrap_or_default();
            format!("{file}: {}: {}", visible(key), visible(message))
        })
        .collect();
    lines.push(format!("{} problem{}", problems.len(), if problems.len() == 1 { "" } else { "s" }));
    lines.join("\n")
}

fn server_json(server: &Started) -> Value {
    json!({
        "mcp_server": server.id,
        "ready": server.ready,
        "dead": server.dead,
        "tools": server.tools,
        "start_ms": server.took.as_millis() as u64,
    })
}

/// SERVER, STATE (with the reason it is dead), TOOLS, START.
fn table(started: &[Started]) -> String {
    let mut rows = vec![["SERVER", "STATE", "TOOLS", "START"].map(str::to_owned).to_vec()];
    for server in started {
        let state = match (&server.dead, server.ready) {
            (_, true) => "ready".to_owned(),
            (Some(why), false) => format!("dead ({why})"),
            (None, false) => "dead".to_owned(),
        };
        let cells =
            [server.id.clone(), state, server.tools.len().to_string(), format!("{} ms", server.took.as_millis())];
        rows.push(cells.iter().map(|cell| visible(cell).into_owned()).collect());
    }
    align(&rows).trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn problems_and_servers_are_shown_for_people() {
        let problems = [json!({"key": "mcp_servers.a.endpoint", "message": "needs one"})];
        let text = human_problems(Path::new("h.yaml"), &problems);
        assert_eq!(text, "h.yaml: mcp_servers.a.endpoint: needs one\n1 problem");
        let started = [Started {
            id: "math".into(),
            ready: false,
            dead: Some("start_failed".into()),
            tools: Vec::new(),
            took: Duration::from_millis(5),
        }];
        assert!(table(&started).lines().nth(1).is_some_and(|row| row.contains("dead (start_failed)")));
    }
}
