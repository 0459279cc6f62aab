//! Every hangar process logs to stderr (stdout is kept for the one line a process announces
//! itself with), human-readable by default or JSON on request.
//!
//! Log fields hold text clients and upstreams chose (tool names, identities, server ids from a
//! request). In the human format every field, the message included, is written through
//! `hangar_core::terminal::visible`, so a name holding escape sequences or a newline can neither
//! drive the terminal of an operator reading the log nor forge a line of it. The JSON format
//! escapes C0 controls itself; what it leaves raw (DEL, C1 controls, bidirectional marks) is
//! escaped as `\uXXXX` on the way out (`hangar_core::terminal::visible_json`), since a
//! collector's output (`kubectl logs`) meets a terminal too.

use std::fmt::Debug;
use std::io::{IsTerminal, Write};

use hangar_core::terminal::{visible, visible_json};
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
        LogFormat::Json => builder.json().with_writer(|| VisibleJson(std::io::stderr())).try_init(),
    };
}

/// A writer of whole JSON events (the formatter writes each event's line at once), the
/// control characters JSON leaves raw escaped; still the same JSON.
struct VisibleJson<W>(W);

impl<W: Write> Write for VisibleJson<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match std::str::from_utf8(buf) {
            Ok(text) => self.0.write_all(visible_json(text).as_bytes())?,
            Err(_) => self.0.write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
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
    use std::io::Write;

    use super::{LogFormat, VisibleJson};

    #[test]
    fn json_events_leave_with_every_control_character_escaped() {
        let mut out = VisibleJson(Vec::new());
        let event = "{\"tool\":\"a\u{7f}\u{9b}2J\u{202e}\"}\n";
        out.write_all(event.as_bytes()).unwrap();
        assert_eq!(String::from_utf8(out.0).unwrap(), "{\"tool\":\"a\\u007f\\u009b2J\\u202e\"}\n");
    }

    #[test]
    fn json_by_default_only_under_kubernetes_off_a_terminal() {
        assert_eq!(LogFormat::for_environment(true, false), LogFormat::Json);
        assert_eq!(LogFormat::for_environment(true, true), LogFormat::Human);
        assert_eq!(LogFormat::for_environment(false, false), LogFormat::Human);
    }
}
