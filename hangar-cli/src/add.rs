//! `hangar add NAME --config F`: one server from an MCP Registry (or a `server.json` file, with
//! `--from-file`, offline) written into the hangar's config, comments kept.
//!
//! The registry's entry is refused when `deleted`, and added with a warning when `deprecated`.
//! `install.rs` picks what to run and maps its inputs; an `mcpb` bundle is downloaded and its
//! `fileSha256` compared first, a mismatch refused. A required value nobody gave is asked for on
//! a terminal; without one, the command names every missing value and exits 64.

use std::io::{BufRead as _, IsTerminal as _, Read as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use hangar_core::credential::MAX_CREDENTIAL_BYTES;
use hangar_core::terminal::visible;

use crate::install::{self, Answers, Ask, Plan};
use crate::registry::{self, Input, Package, Registry, ServerResponse};
use crate::setup::{self, SetupError};

/// The largest `server.json` read.
const MAX_SERVER_JSON_BYTES: u64 = 1024 * 1024;
/// The longest answer read at a prompt.
const MAX_ANSWER_BYTES: u64 = 64 * 1024;

/// `hangar add`'s flags.
pub struct Add<'a> {
    pub name: Option<&'a str>,
    pub config: &'a Path,
    pub registry: &'a str,
    pub version: &'a str,
    pub set: &'a [String],
    pub secret: &'a [String],
    pub from_file: Option<&'a Path>,
    pub id: Option<&'a str>,
    pub no_start: bool,
}

/// Adds the server; answers its id when it is to be started once now (not `--no-start`).
pub fn run(add: &Add<'_>) -> Result<Option<String>, SetupError> {
    let set = add.set.iter().map(|pair| split(pair, "--set", "NAME=VALUE")).collect::<Result<Vec<_>, _>>()?;
    let mut secrets = Vec::new();
    for pair in add.secret {
        let (name, file) = split(pair, "--secret", "NAME=@FILE")?;
        let Some(file) = file.strip_prefix('@') else {
            return Err(SetupError::Usage(format!(
                "--secret {name}=...: give the file holding it, as {name}=@FILE (never the value itself)"
            )));
        };
        let path = secret_file(&format!("--secret {name}"), file)?;
        secrets.push((name, path));
    }
    let entry = fetch(add)?;
    let detail = &entry.server;
    let what = format!("{} {}", detail.name, detail.version);
    match entry.status() {
        "deleted" => {
            return Err(SetupError::Deleted {
                name: detail.name.clone(),
                version: detail.version.clone(),
                message: entry.status_message().map(str::to_owned),
            });
        }
        "deprecated" => {
            let why = entry.status_message().map(|m| format!(": {m}")).unwrap_or_default();
            eprintln!("hangar: warning: {}", visible(&format!("{what} is deprecated in the registry{why}")));
        }
        _ => {}
    }
    let plan = install::choose(detail, &on_path)
        .map_err(|reasons| SetupError::NothingRunnable { name: detail.name.clone(), reasons })?;
    if let Plan::Bundle(package) = &plan {
        verify_bundle(package)?;
    }
    let id = add.id.map_or_else(|| default_id(&detail.name), str::to_owned);
    let mut terminal = TerminalAsk;
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let ask: Option<&mut dyn Ask> = if interactive { Some(&mut terminal) } else { None };
    let typed_secret = |name: &str, file: &str| secret_file(name, file);
    let mut answers = Answers::new(set, secrets, ask, &typed_secret)?;
    let server = install::entry(&id, detail, &plan, &mut answers)?;
    setup::add_to_config(add.config, &[(id.clone(), server)])?;
    let how = match &plan {
        Plan::Remote(remote) => format!("the remote {}", remote.url.as_deref().unwrap_or_default()),
        Plan::Package { package, runner, version } => {
            format!("the {} package {}@{version} through {runner}", package.registry_type, package.identifier)
        }
        Plan::Bundle(package) => format!("the bundle {}", package.identifier),
    };
    setup::print(&visible(&format!("added {id} ({what}, {how}) to {}", add.config.display())))?;
    for note in &answers.notes {
        setup::print(&visible(&format!("  {note}")))?;
    }
    // Unless --no-start, the caller starts it once, pins its tools and reloads (`first_start.rs`).
    if add.no_start {
        setup::print(
            "  not started: `hangar reload` loads it into a running hangar, `hangar pin --write` pins its tools",
        )?;
        return Ok(None);
    }
    Ok(Some(id))
}

/// The registry's entry, or the `server.json` of `--from-file`.
fn fetch(add: &Add<'_>) -> Result<ServerResponse, SetupError> {
    let Some(path) = add.from_file else {
        let name = add.name.ok_or_else(|| SetupError::Usage("name the server to add (or give --from-file)".into()))?;
        return Registry::new(add.registry)?.server(name, add.version);
    };
    let source = |reason: String| SetupError::Source { path: path.to_owned(), reason };
    let text = hangar_core::small_file::read_regular(path, MAX_SERVER_JSON_BYTES).map_err(|e| source(e.to_string()))?;
    let entry = registry::parse_server_json(&text).map_err(|e| source(format!("not a server.json: {e}")))?;
    if let Some(name) = add.name.filter(|name| *name != entry.server.name) {
        return Err(SetupError::Usage(format!("{name} is not the server {} of --from-file", entry.server.name)));
    }
    Ok(entry)
}

/// `NAME=VALUE` of `flag`.
fn split(pair: &str, flag: &str, form: &str) -> Result<(String, String), SetupError> {
    match pair.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(SetupError::Usage(format!("{flag} {pair}: give {form}"))),
    }
}

/// The absolute path of a secret file, once it reads as one (regular, not empty, bounded); its
/// content is not kept.
fn secret_file(what: &str, file: &str) -> Result<PathBuf, SetupError> {
    let path = std::path::absolute(file).map_err(|e| SetupError::Usage(format!("{what}: {file}: {e}")))?;
    match hangar_core::small_file::read_regular(&path, MAX_CREDENTIAL_BYTES) {
        Ok(text) if text.trim().is_empty() => Err(SetupError::Usage(format!("{what}: {} is empty", path.display()))),
        Ok(_) => Ok(path),
        Err(err) => Err(SetupError::Usage(format!("{what}: cannot read {}: {err}", path.display()))),
    }
}

/// Downloads an `mcpb` bundle and compares its SHA-256 with the registry's `fileSha256`.
fn verify_bundle(package: &Package) -> Result<(), SetupError> {
    let url = &package.identifier;
    let Some(expected) = package.file_sha256.as_deref().map(str::to_ascii_lowercase) else {
        return Err(SetupError::Unmappable {
            server: url.clone(),
            reason: "an mcpb bundle without a fileSha256 cannot be checked: refused".into(),
        });
    };
    let actual = registry::sha256_of(url)?;
    if actual != expected {
        return Err(SetupError::Digest { url: url.clone(), expected, actual });
    }
    Ok(())
}

/// Whether `program` is an executable file in a directory of `PATH`.
fn on_path(program: &str) -> bool {
    let Some(path) = std::env::var_os("PATH") else { return false };
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(program)).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// The id a server gets when `--id` is not given: the last part of its registry name.
pub fn default_id(name: &str) -> String {
    setup::server_id(name.rsplit('/').next().unwrap_or(name))
}

/// Asks on the terminal: the question on stderr, the answer a line of stdin.
struct TerminalAsk;

impl Ask for TerminalAsk {
    fn ask(&mut self, name: &str, input: &Input) -> std::io::Result<Option<String>> {
        let about = input.description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default();
        let question = if input.is_secret {
            format!("{name}{about} is a secret: the path of a file holding it: ")
        } else {
            let choices =
                if input.choices.is_empty() { String::new() } else { format!(" {{{}}}", input.choices.join("|")) };
            let default = input.default.as_deref().map(|d| format!(" [{d}]")).unwrap_or_default();
            format!("{name}{about}{choices}{default}: ")
        };
        let mut err = std::io::stderr().lock();
        write!(err, "{}", visible(&question))?;
        err.flush()?;
        let mut line = String::new();
        std::io::stdin().lock().take(MAX_ANSWER_BYTES).read_line(&mut line)?;
        Ok(Some(line.trim_end_matches(['\n', '\r']).to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_come_from_the_name() {
        assert_eq!(default_id("io.github.modelcontextprotocol/server-filesystem"), "server-filesystem");
        assert_eq!(default_id("com.example/_weird name!"), "weird-name-");
        assert_eq!(default_id("a/"), "server");
    }

    #[test]
    fn a_secret_is_a_readable_file_never_a_value() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "s3cret\n").unwrap();
        assert_eq!(secret_file("--secret T", file.to_str().unwrap()).unwrap(), file);
        std::fs::write(&file, "\n").unwrap();
        assert!(secret_file("--secret T", file.to_str().unwrap()).unwrap_err().to_string().contains("empty"));
        let err = secret_file("--secret T", "/nonexistent/x").unwrap_err();
        assert_eq!(hangar_runtime::exit::Sysexit::exit_code(&err), 64);
        assert!(split("novalue", "--set", "NAME=VALUE").is_err());
        assert_eq!(split("--port=8080", "--set", "NAME=VALUE").unwrap(), ("--port".into(), "8080".into()));
    }
}
