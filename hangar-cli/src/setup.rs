//! What `hangar import`, `hangar add` and `hangar search` share: how each fails (and the exit
//! code it means), and writing the new servers into the config file.
//!
//! These commands work on files and on a registry, never on a running hangar's API, so they have
//! an error type of their own. Everything a registry or another client's file says reaches the
//! terminal through `hangar_core::terminal::visible` (in `main.rs`, and in each line printed).

use std::path::{Path, PathBuf};

use hangar_core::config::MAX_CONFIG_BYTES;
use hangar_core::server_edit::{self, ServerEditError, ServerEntry};
use hangar_runtime::exit::{
    EX_CANTCREAT, EX_CONFIG, EX_DATAERR, EX_FAILURE, EX_IOERR, EX_PROTOCOL, EX_UNAVAILABLE, EX_USAGE, Sysexit,
};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SetupError {
    #[error("{0}")]
    Usage(String),
    /// Required values nobody gave, without a terminal to ask on.
    #[error("no value for {}: give each with --set NAME=VALUE (a secret with --secret NAME=@FILE)", .0.join(", "))]
    Missing(Vec<String>),
    /// The file to import, or a `server.json`, cannot be read or is not of the shape expected.
    #[error("{path}: {reason}")]
    Source { path: PathBuf, reason: String },
    /// One server of the file to import, or of `server.json`, cannot be written as a hangar server.
    #[error("{server}: {reason}")]
    Unmappable { server: String, reason: String },
    #[error("{path}: {reason}")]
    ConfigRead { path: PathBuf, reason: String },
    #[error("{path}: {source}")]
    ConfigEdit { path: PathBuf, source: ServerEditError },
    #[error("{path}: cannot write the config: {reason}")]
    ConfigWrite { path: PathBuf, reason: String },
    #[error("cannot reach the registry at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// The registry answered with a failure status.
    #[error("the registry answered HTTP {status} for {url}: {text}")]
    Registry { url: String, status: u16, text: String },
    #[error("unexpected answer from {url}: {reason}")]
    Protocol { url: String, reason: String },
    /// The registry marks the version deleted.
    #[error("{name} {version} is deleted in the registry{}; not added", message_suffix(.message))]
    Deleted { name: String, version: String, message: Option<String> },
    /// No remote or package of the server is one this host can run.
    #[error("nothing of {name} can run here: {}", .reasons.join("; "))]
    NothingRunnable { name: String, reasons: Vec<String> },
    /// A downloaded package is not the file `server.json` names by digest.
    #[error("{url}: its sha256 is {actual}, but the registry says {expected}: refused")]
    Digest { url: String, expected: String, actual: String },
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

fn message_suffix(message: &Option<String>) -> String {
    message.as_deref().map(|m| format!(" ({m})")).unwrap_or_default()
}

/// 64 usage (a value missing), 65 input that cannot be used, 69 a registry or runner that is
/// not there, 73 a config that cannot be written, 76 an answer of the wrong shape, 78 a config
/// that cannot be read or is invalid, 1 the registry refused (no such server, deleted).
impl Sysexit for SetupError {
    fn exit_code(&self) -> u8 {
        match self {
            SetupError::Usage(_) | SetupError::Missing(_) => EX_USAGE,
            SetupError::Source { .. } | SetupError::Unmappable { .. } | SetupError::Digest { .. } => EX_DATAERR,
            SetupError::ConfigRead { .. } | SetupError::ConfigEdit { source: ServerEditError::Invalid { .. }, .. } => {
                EX_CONFIG
            }
            SetupError::ConfigEdit { .. } => EX_DATAERR,
            SetupError::ConfigWrite { .. } => EX_CANTCREAT,
            SetupError::Unreachable { .. } | SetupError::NothingRunnable { .. } => EX_UNAVAILABLE,
            SetupError::Registry { status, .. } if *status >= 500 => EX_UNAVAILABLE,
            SetupError::Registry { .. } | SetupError::Deleted { .. } => EX_FAILURE,
            SetupError::Protocol { .. } => EX_PROTOCOL,
            SetupError::Output(_) => EX_IOERR,
        }
    }
}

/// `text` as a server id: each character an id cannot hold written as `-`, what does not start
/// with a letter or digit dropped, at most 64 characters (`server` if nothing is left).
pub fn server_id(text: &str) -> String {
    let id: String = text
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') { c } else { '-' })
        .skip_while(|c| !c.is_ascii_alphanumeric())
        .take(64)
        .collect();
    if id.is_empty() { "server".into() } else { id }
}

/// Prints a line whose outside text is already shown visibly.
pub fn print(text: &str) -> Result<(), SetupError> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()?;
    Ok(())
}

/// Adds `servers` to the config at `path` (created when missing), comments kept; the file is
/// left alone when any of them cannot be added.
pub fn add_to_config(path: &Path, servers: &[(String, ServerEntry)]) -> Result<(), SetupError> {
    let text = if path.exists() || path.is_symlink() {
        hangar_core::small_file::read_regular(path, MAX_CONFIG_BYTES)
            .map_err(|err| SetupError::ConfigRead { path: path.to_owned(), reason: err.to_string() })?
    } else {
        String::new()
    };
    let edited = server_edit::with_servers(&text, servers)
        .map_err(|source| SetupError::ConfigEdit { path: path.to_owned(), source })?;
    replace_file(path, &edited)
        .map_err(|err| SetupError::ConfigWrite { path: path.to_owned(), reason: err.to_string() })
}

/// Writes `text` to `path` atomically (a temporary file beside it, then a rename), keeping its
/// permissions; a symlink is followed and its target rewritten; a missing file is created.
pub fn replace_file(path: &Path, text: &str) -> std::io::Result<()> {
    let (target, permissions) = match std::fs::canonicalize(path) {
        Ok(target) => {
            let permissions = std::fs::metadata(&target)?.permissions();
            (target, Some(permissions))
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound && !path.is_symlink() => (path.to_owned(), None),
        Err(err) => return Err(err),
    };
    let file_name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let temporary = target.with_file_name(format!(".{file_name}.edit-{}", std::process::id()));
    let written = std::fs::write(&temporary, text.as_bytes())
        .and_then(|()| match permissions {
            Some(permissions) => std::fs::set_permissions(&temporary, permissions),
            None => Ok(()),
        })
        .and_then(|()| std::fs::rename(&temporary, &target));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

#[cfg(test)]
mod tests {
    use hangar_core::server_edit::Reach;

    use super::*;

    fn entry() -> ServerEntry {
        ServerEntry {
            description: None,
            reach: Reach::Subprocess { command: vec!["x".into()] },
            env: Default::default(),
            headers: Default::default(),
        }
    }

    #[test]
    fn a_missing_config_is_created_an_existing_one_kept_and_a_taken_id_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hangar.yaml");
        add_to_config(&path, &[("a".into(), entry())]).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "mcp_servers:\n  a:\n    command: [\"x\"]\n");
        let err = add_to_config(&path, &[("a".into(), entry())]).unwrap_err();
        assert_eq!(err.exit_code(), 65, "{err}");
        std::fs::write(&path, "mcp_servers: [\n").unwrap();
        assert_eq!(add_to_config(&path, &[("b".into(), entry())]).unwrap_err().exit_code(), 78);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "mcp_servers: [\n", "untouched");
    }

    #[test]
    fn exit_codes() {
        assert_eq!(SetupError::Missing(vec!["A".into()]).exit_code(), 64);
        let registry = |status| SetupError::Registry { url: "u".into(), status, text: String::new() };
        assert_eq!(registry(404).exit_code(), 1);
        assert_eq!(registry(502).exit_code(), 69);
        let deleted = SetupError::Deleted { name: "n".into(), version: "1".into(), message: Some("gone".into()) };
        assert_eq!(deleted.to_string(), "n 1 is deleted in the registry (gone); not added");
    }
}
