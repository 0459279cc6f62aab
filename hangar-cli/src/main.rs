//! hangar: the operators' command-line client of the hangar's REST API.
//!
//! Exit codes (sysexits): 0 done, 1 the API (or a registry) refused the operation, 64 usage,
//! 65 a config `pin --write`, `import` or `add` cannot edit safely (or input they cannot use),
//! 69 the API or registry is unreachable (or answered 503, or the server to pin is not running,
//! or nothing of a server to add can run here), 73 the config could not be written, 74 the
//! output could not be written, 76 an answer of the wrong shape, 78 a config that cannot be read
//! or is invalid. `import`, `add` and `search` work on files and a registry, not the API.
//!
//! Everything it prints passes through `hangar_core::terminal`: text a client or an upstream
//! chose (tool names, identities, upstream output, error messages quoting them) shows its
//! control characters as visible escapes, so no answer can drive the operator's terminal or
//! forge a line. Text goes through `visible` (per table cell, or per one-line outcome), JSON
//! through `visible_json` (still JSON of the same value).
#![forbid(unsafe_code)]

mod actions;
mod add;
mod approvals;
mod args;
mod audit;
mod check;
mod client;
mod connect;
#[cfg(test)]
mod docs_page;
mod ephemeral;
mod error;
mod first_start;
mod import;
mod install;
mod logs;
mod pin;
mod registry;
mod run;
mod search;
mod setup;
mod status;
#[cfg(test)]
mod testing;

use std::io::Write;
use std::process::ExitCode;

use hangar_core::terminal::{visible, visible_json};
use hangar_runtime::exit::{EX_UNAVAILABLE, EX_USAGE, Exit, Sysexit, run_main};
use serde_json::Value;

use crate::args::{Cli, Command, Decide};
use crate::client::{Answer, Api};
use crate::error::CliError;

fn main() -> ExitCode {
    run_main("hangar", || {
        let cli: Cli = hangar_runtime::args::parse()?;
        // These two talk to a hangar of their own, not to --url.
        match &cli.command {
            Command::Run { config, servers, keep, junit, command } => {
                let (keep, junit) = (keep.as_deref().map(run::absolute), junit.as_deref().map(run::absolute));
                let asked = run::Run { config, servers, keep: keep.as_deref(), junit: junit.as_deref(), command };
                return match run::run(&asked) {
                    Ok(0) => Ok(()),
                    Ok(code) => Err(Exit::quiet(code)),
                    Err(err) => Err(Exit::new(err.exit_code(), format!("run: {}", err))),
                };
            }
            Command::Check { config, start } => {
                let checked = check::run(config, *start, cli.json)
                    .map_err(|err| Exit::new(err.exit_code(), visible(&err.to_string())))?;
                println!("{}", checked.text);
                return if checked.code == 0 { Ok(()) } else { Err(Exit::quiet(checked.code)) };
            }
            _ => {}
        }
        // Files and a registry, not the API: --url is not theirs to check.
        if !matches!(cli.command, Command::Import { .. } | Command::Add { .. } | Command::Search { .. }) {
            check_url(&cli.url).map_err(|message| Exit::new(EX_USAGE, format!("--url {}: {message}", cli.url)))?;
        }
        // The API's messages quote what a client sent: shown visibly, as all output is.
        run(&cli).map_err(|err| match err {
            // Composed of parts each shown visibly already, on lines of its own.
            CliError::NotReady(report) => Exit::new(EX_UNAVAILABLE, report),
            other => Exit::new(other.exit_code(), visible(&other.to_string())),
        })
    })
}

/// Plain `http://host[:port]` (TLS is not built in).
fn check_url(url: &str) -> Result<(), &'static str> {
    let Some(rest) = url.strip_prefix("http://") else { return Err("must start with http://") };
    if rest.trim_end_matches('/').is_empty() {
        return Err("names no host");
    }
    Ok(())
}

fn run(cli: &Cli) -> Result<(), CliError> {
    let api = Api::new(&cli.url, cli.api_key.clone());
    let json = cli.json;
    match &cli.command {
        Command::Status => {
            let answer = api.get("/api/mcp_servers")?;
            if json { emit_json(&answer.text) } else { emit(status::table(&answer.body, api.base())?.trim_end()) }
        }
        Command::Logs { name, lines, follow } => logs::run(&api, name, *lines, *follow, json),
        Command::Start { name } => outcome(json, &actions::start(&api, name)?, |b| actions::started(name, b)),
        Command::Stop { name } => outcome(json, &actions::stop(&api, name)?, |b| actions::stopped(name, b)),
        Command::Restart { name } => {
            outcome(json, &actions::stop(&api, name)?, |b| actions::stopped(name, b))?;
            outcome(json, &actions::start(&api, name)?, |b| actions::started(name, b))
        }
        Command::Connect { name } => {
            let answer = connect::begin(&api, name)?;
            if json { emit_json(&answer.text) } else { emit(&connect::instructions(name, &answer.body)) }
        }
        Command::Reload => outcome(json, &actions::reload(&api)?, actions::reloaded),
        Command::Run { .. } | Command::Check { .. } => Ok(()),
        Command::Approvals { decide: None } => {
            let answer = api.get("/api/approvals")?;
            if json { emit_json(&answer.text) } else { emit(approvals::table(&answer.body, api.base())?.trim_end()) }
        }
        Command::Approvals { decide: Some(Decide::Approve { id }) } => {
            outcome(json, &approvals::decide(&api, id, true)?, approvals::decided)
        }
        Command::Approvals { decide: Some(Decide::Deny { id }) } => {
            outcome(json, &approvals::decide(&api, id, false)?, approvals::decided)
        }
        Command::Pin { name, config, .. } => pin::run(&api, name, config.as_deref(), json),
        Command::Audit { since, limit, identity, mcp_server, outcome, follow } => {
            let filters = audit::Filters {
                since: *since,
                limit: *limit,
                identity: identity.as_deref(),
                mcp_server: mcp_server.as_deref(),
                outcome: outcome.as_deref(),
            };
            audit::run(&api, &filters, *follow, json)
        }
        // Files and a registry, not the API.
        Command::Import { from, config, servers } => Ok(import::run(from, config, servers)?),
        Command::Add { name, config, registry, version, set, secret, from_file, id, no_start } => {
            let add = add::Add {
                name: name.as_deref(),
                config,
                registry,
                version,
                set,
                secret,
                from_file: from_file.as_deref(),
                id: id.as_deref(),
                no_start: *no_start,
            };
            match add::run(&add)? {
                Some(id) => first_start::run(config, &id, &api),
                None => Ok(()),
            }
        }
        Command::Search { text, registry } => Ok(search::run(registry, text, json)?),
    }
}

/// The API's JSON with `--json`, else the one-line outcome, each shown visibly.
fn outcome(json: bool, answer: &Answer, text: impl FnOnce(&Value) -> String) -> Result<(), CliError> {
    if json { emit_json(&answer.text) } else { emit(&visible(&text(&answer.body))) }
}

/// A JSON answer as the API sent it, its control characters escaped (`visible_json`).
pub(crate) fn emit_json(text: &str) -> Result<(), CliError> {
    emit(&visible_json(text))
}

/// Text whose client and upstream parts are already shown visibly.
pub(crate) fn emit(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()?;
    Ok(())
}
