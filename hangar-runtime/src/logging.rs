//! Every hangar process logs to stderr (stdout is kept for the one line a process announces
//! itself with), human-readable by default or JSON on request.
//!
//! Log fields hold text clients and upstreams chose (tool names, identities, server ids from a
//! request). In the human format every field, the message included, is written through
//! `hangar_core::terminal::visible`, so a name holding escape sequences or a newline can neither
//! drive the terminal of an operator reading the log nor forge a line of it. The JSON format
//! escapes control characters itself.

use std::fmt::Debug;
use std::io::IsTerminal;

use hangar_core::terminal::visible;
use tracing::field::Field;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::MakeExt;
use tracing_subscriber::fmt::format::{Writer, debug_fn};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

impl LogFormat {
    /// The default when no `--log-format` (or `HANGAR_LOG_FORMAT`) says: JSON under Kubernetes
    /// (`KUBERNETES_SERVICE_HOST` set) when stderr is not a terminal, where a log collector reads
    /// it; human otherwise.
    pub fn detected() -> LogFormat {
        LogFormat::for_environment(
            std::env::var_os("KUBERNETES_SERVICE_HOST").is_some(),
            std::io::stderr().is_terminal(),
        )
    }

    fn for_environment(in_kubernetes: bool, at_terminal: bool) -> LogFormat {
        if in_kubernetes && !at_terminal { LogFormat::Json } else { LogFormat::Human }
    }
}

/// The filter comes from `HANGAR_LOG` (e.g. `debug`, `info,hangar_supervisor=debug`), `info` by default.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_env("HANGAR_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour only for a person at a terminal, never into files or journald.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    // Fails only if a subscriber is already set, and then logging still works.
    let _ = match format {
        LogFormat::Human => builder.fmt_fields(debug_fn(visible_field).delimited(" ")).try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// One field as the human format writes it (`name=value`, the message bare), its control
/// characters shown as escapes.
fn visible_field(writer: &mut Writer<'_>, field: &Field, value: &dyn Debug) -> std::fmt::Result {
    let text = format!("{value:?}");
    match field.name() {
        "message" => write!(writer, "{}", visible(&text)),
        name => write!(writer, "{name}={}", visible(&text)),
    }
}

#[cfg(test)]
mod tests {
    use super::LogFormat;

    #[test]
    fn json_by_default_only_under_kubernetes_off_a_terminal() {
        assert_eq!(LogFormat::for_environment(true, false), LogFormat::Json);
        assert_eq!(LogFormat::for_environment(true, true), LogFormat::Human);
        assert_eq!(LogFormat::for_environment(false, false), LogFormat::Human);
    }
}
