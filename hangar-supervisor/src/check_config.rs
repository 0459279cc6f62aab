//! `hangar-supervisor --check`: the config checked as a start would check it, every problem
//! reported with its key path (`hangar_core::config_check`), then what only this host can tell:
//! each sandbox against this kernel (the same preparation a spawn makes, its program found in
//! `PATH`), grants over the control socket's and state directory's places, and each managed
//! HTTP server's port free (the preflight). Prints every problem (or one JSON object with
//! `--json`) and answers the exit code: 0 with none, 78 with any. Nothing is started.

use std::path::Path;

use hangar_core::config::{Config, KeyError, Mode};
use hangar_core::config_check;
use hangar_core::credential::Sources;
use serde_json::json;

use crate::args::Args;
use crate::sandbox;

/// The problems of the config `args` name, printed to stdout; whether there were none.
pub fn run(args: &Args) -> bool {
    let path = &args.config;
    let problems = match hangar_core::config::read_config_text(path) {
        Ok(text) => problems(args, &text),
        Err(err) => vec![KeyError { key: "(file)".into(), message: err.to_string() }],
    };
    let text = if args.json {
        let listed: Vec<_> = problems.iter().map(|p| json!({"key": p.key, "message": p.message})).collect();
        json!({"config": path.display().to_string(), "ok": problems.is_empty(), "problems": listed}).to_string()
    } else {
        human(path, &problems)
    };
    println!("{text}");
    problems.is_empty()
}

fn human(path: &Path, problems: &[KeyError]) -> String {
    let file = path.display();
    if problems.is_empty() {
        return format!("{file}: no problems");
    }
    let mut out: Vec<String> = problems.iter().map(|p| format!("{file}: {}: {}", p.key, p.message)).collect();
    let count = problems.len();
    out.push(format!("{count} problem{}", if count == 1 { "" } else { "s" }));
    out.join("\n")
}

fn problems(args: &Args, text: &str) -> Vec<KeyError> {
    let checked = config_check::check(text, &Sources::of_process());
    let mut problems = checked.problems;
    if let Some(config) = checked.config {
        problems.extend(on_this_host(args, &config));
    }
    problems
}

/// What only this host can tell of a config that loads.
fn on_this_host(args: &Args, config: &Config) -> Vec<KeyError> {
    let mut problems = Vec::new();
    let socket = args.socket.clone().unwrap_or_else(hangar_core::paths::default_socket_path);
    let state_dir = args.state_dir.clone().or_else(|| config.state_dir.clone());
    let state_dir =
        state_dir.unwrap_or_else(|| hangar_core::journal::default_state_dir(|name| std::env::var(name).ok()));
    sandbox::protect(&socket, &state_dir, config.credentials.key_file.as_deref());
    if let Err(err) = sandbox::check_grants(config) {
        problems.push(err);
    }
    for (id, server) in &config.mcp_servers {
        if server.mode == Mode::Remote {
            continue;
        }
        let path = server.env_values().find(|(name, _)| *name == "PATH").map(|(_, value)| value);
        if let Some(sandboxed) = server.sandbox() {
            if let Err(why) = sandbox::prepare(id, sandboxed, &server.command, path) {
                problems.push(KeyError { key: format!("mcp_servers.{id}.sandbox"), message: why });
            }
        } else if let Some(program) = server.command.first() {
            let path_var = path.map(str::to_owned).or_else(|| std::env::var("PATH").ok()).unwrap_or_default();
            if sandbox::resolve(program, &path_var).is_none() {
                let message = format!("`{program}` was not found in PATH (or is not executable)");
                problems.push(KeyError { key: format!("mcp_servers.{id}.command"), message });
            }
        }
        if server.mode == Mode::Http
            && let Some(endpoint) = &server.endpoint
            && let Err(err) = hangar_core::preflight::check_free(endpoint)
        {
            problems.push(KeyError { key: format!("mcp_servers.{id}.endpoint"), message: err.to_string() });
        }
    }
    sandbox::remove_private_dirs();
    problems
}
