//! Every way a command fails, and the exit code (sysexits) each one means.

use std::path::PathBuf;

use hangar_core::pin_edit::PinEditError;
use hangar_runtime::exit::{
    EX_CANTCREAT, EX_CONFIG, EX_DATAERR, EX_FAILURE, EX_IOERR, EX_OSERR, EX_PROTOCOL, EX_UNAVAILABLE, EX_USAGE, Sysexit,
};
use thiserror::Error;

/// An operation the API refused (not a sysexits code: the command worked, the answer was no).
const EX_REFUSED: u8 = EX_FAILURE;

#[derive(Debug, Error)]
pub enum CliError {
    #[error("cannot reach the hangar at {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// The API's error envelope.
    #[error("{message} ({code})")]
    Api { status: u16, code: String, message: String },
    /// A failure status without the envelope.
    #[error("the hangar answered HTTP {status}: {text}")]
    Status { status: u16, text: String },
    #[error("unexpected answer from {url}: {reason}")]
    Protocol { url: String, reason: String },
    #[error("this hangar does not support reload")]
    ReloadUnsupported,
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
    /// `hangar pin` needs the server's current tools, so it must be serving.
    #[error("`{name}` is {state}: start it first, so its current tools are known")]
    NotServing { name: String, state: String },
    #[error("{path}: {reason}")]
    ConfigRead { path: PathBuf, reason: String },
    #[error("{path}: {source}")]
    ConfigEdit { path: PathBuf, source: PinEditError },
    #[error("{path}: cannot write the config: {reason}")]
    ConfigWrite { path: PathBuf, reason: String },
    /// `hangar import`, `add` and `search`.
    #[error(transparent)]
    Setup(#[from] crate::setup::SetupError),
    /// `hangar run`/`check --start` could not set up its own hangar (a port, a directory, a
    /// binary missing).
    #[error("{0}")]
    Local(String),
    /// Its own hangar stopped before serving: its config was refused (78), or it failed.
    #[error("the hangar stopped before it served ({}); its log:\n{log}", exit_status(*.status))]
    HangarExited { status: Option<i32>, log: String },
    /// A server did not become ready: the command was not run.
    #[error("{0}")]
    NotReady(String),
    #[error("{0}")]
    Usage(String),
}

fn exit_status(status: Option<i32>) -> String {
    status.map_or_else(|| "killed by a signal".to_owned(), |code| format!("exit {code}"))
}

/// 69 when the API is unreachable or cannot serve (503), 76 for an answer of the wrong shape.
impl Sysexit for CliError {
    fn exit_code(&self) -> u8 {
        match self {
            CliError::Unreachable { .. } => EX_UNAVAILABLE,
            CliError::Api { status: 503, .. } | CliError::Status { status: 503, .. } => EX_UNAVAILABLE,
            CliError::Api { .. } | CliError::Status { .. } | CliError::ReloadUnsupported => EX_REFUSED,
            CliError::Protocol { .. } => EX_PROTOCOL,
            // E.g. stdout closed under `hangar logs -f | head`.
            CliError::Output(_) => EX_IOERR,
            CliError::NotServing { .. } => EX_UNAVAILABLE,
            CliError::ConfigRead { .. } => EX_CONFIG,
            CliError::ConfigEdit { source: PinEditError::Unsafe(_), .. } => EX_DATAERR,
            CliError::ConfigEdit { .. } => EX_CONFIG,
            CliError::ConfigWrite { .. } => EX_CANTCREAT,
            CliError::Setup(err) => err.exit_code(),
            CliError::Local(_) => EX_OSERR,
            CliError::HangarExited { status: Some(78), .. } => EX_CONFIG,
            CliError::HangarExited { .. } | CliError::NotReady(_) => EX_UNAVAILABLE,
            CliError::Usage(_) => EX_USAGE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_is_rendered_message_then_code() {
        let err = CliError::Api { status: 404, code: "McpServerNotFound".into(), message: "no server nope".into() };
        assert_eq!(err.to_string(), "no server nope (McpServerNotFound)");
        assert_eq!(err.exit_code(), 1);
    }

    #[test]
    fn unavailable_is_69() {
        let err = CliError::Unreachable { url: "http://x".into(), reason: "refused".into() };
        assert_eq!(err.exit_code(), 69);
        let err = CliError::Api { status: 503, code: "SupervisorUnavailable".into(), message: "down".into() };
        assert_eq!(err.exit_code(), 69);
    }
}
