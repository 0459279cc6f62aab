//! The guardian's log lines, in the supervisor's two shapes (`hangar_runtime::logging`), written
//! by hand so that the guardian links no logging framework: human
//! (`2026-12-05T00:34:01.197710Z  WARN hangar_guardian: message key=value`) or one JSON object a
//! line (`{"timestamp":…,"level":…,"fields":{"message":…,…},"target":…}`), to stderr, filtered
//! by `HANGAR_LOG` as the supervisor's are (`info` unless it says; `target=level` directives,
//! the longest matching target winning). Control characters in a value are written as escapes in
//! both shapes, so no field can forge a line or drive a terminal.

use std::io::Write;
use std::sync::OnceLock;
use std::time::SystemTime;

/// The target every guardian line carries.
pub const TARGET: &str = "hangar_guardian";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error = 1,
    Warn,
    Info,
    Debug,
    Trace,
}

impl Level {
    fn name(self) -> &'static str {
        match self {
            Level::Error => "ERROR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
            Level::Trace => "TRACE",
        }
    }

    /// A level as a directive names it; `Some(None)` is `off`.
    fn parse(word: &str) -> Option<Option<Level>> {
        let level = match word.to_ascii_lowercase().as_str() {
            "off" => return Some(None),
            "error" => Level::Error,
            "warn" => Level::Warn,
            "info" => Level::Info,
            "debug" => Level::Debug,
            "trace" => Level::Trace,
            _ => return None,
        };
        Some(Some(level))
    }
}

/// One field's value: a number is a JSON number, anything else a string.
pub enum Value<'a> {
    Number(u64),
    Text(&'a str),
}

impl From<u32> for Value<'_> {
    fn from(number: u32) -> Self {
        Value::Number(number.into())
    }
}

impl From<u64> for Value<'_> {
    fn from(number: u64) -> Self {
        Value::Number(number)
    }
}

impl From<usize> for Value<'_> {
    fn from(number: usize) -> Self {
        Value::Number(u64::try_from(number).unwrap_or(u64::MAX))
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(text: &'a str) -> Self {
        Value::Text(text)
    }
}

struct Logger {
    json: bool,
    /// The most detailed level written; None writes nothing.
    max: Option<Level>,
}

static LOGGER: OnceLock<Logger> = OnceLock::new();

/// Sets the shape and reads the filter, once, before the first line.
pub fn init(json: bool) {
    let filter = std::env::var("HANGAR_LOG").unwrap_or_default();
    let _ = LOGGER.set(Logger { json, max: max_level(&filter, TARGET) });
}

/// The level `filter` (an `EnvFilter` text such as `info,hangar=debug`) lets through for
/// `target`: the directive with the longest target that `target` starts with, a bare level
/// counting as the empty target; `info` when the filter is empty or names no level at all.
fn max_level(filter: &str, target: &str) -> Option<Level> {
    let mut best: Option<(usize, Option<Level>)> = None;
    let mut understood = false;
    for directive in filter.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        // Span filters (`target[span]=level`) select what no guardian line has.
        if directive.contains('[') {
            understood = true;
            continue;
        }
        let (prefix, level) = match directive.split_once('=') {
            Some((prefix, level)) => match Level::parse(level) {
                Some(level) => (prefix, level),
                None => continue,
            },
            None => match Level::parse(directive) {
                Some(level) => ("", level),
                // A target alone lets everything of it through.
                None => (directive, Some(Level::Trace)),
            },
        };
        understood = true;
        if target.starts_with(prefix) && best.is_none_or(|(len, _)| prefix.len() >= len) {
            best = Some((prefix.len(), level));
        }
    }
    match best {
        Some((_, level)) => level,
        None if understood => None,
        None => Some(Level::Info),
    }
}

/// Whether a line at `level` would be written.
pub fn enabled(level: Level) -> bool {
    LOGGER.get().and_then(|logger| logger.max).is_some_and(|max| level <= max)
}

/// Writes one line, if the filter lets it through.
pub fn line(level: Level, message: &str, fields: &[(&str, Value<'_>)]) {
    let Some(logger) = LOGGER.get() else { return };
    if !enabled(level) {
        return;
    }
    // RFC 3339 in UTC with microseconds, as the supervisor's lines carry it.
    let time = humantime::format_rfc3339_micros(SystemTime::now()).to_string();
    let text = format_line(logger.json, &time, level, message, fields);
    // One write per line: lines of the supervisor and of both guardians share the stream.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

pub fn error(message: &str, fields: &[(&str, Value<'_>)]) {
    line(Level::Error, message, fields);
}

pub fn warn(message: &str, fields: &[(&str, Value<'_>)]) {
    line(Level::Warn, message, fields);
}

pub fn info(message: &str, fields: &[(&str, Value<'_>)]) {
    line(Level::Info, message, fields);
}

pub fn debug(message: &str, fields: &[(&str, Value<'_>)]) {
    line(Level::Debug, message, fields);
}

fn format_line(json: bool, time: &str, level: Level, message: &str, fields: &[(&str, Value<'_>)]) -> String {
    let mut out = if json {
        let mut out = format!("{{\"timestamp\":\"{time}\",\"level\":\"{}\",\"fields\":{{\"message\":", level.name());
        json_string(&mut out, message);
        out
    } else {
        let mut out = format!("{time} {:>5} {TARGET}: ", level.name());
        visible(&mut out, message);
        out
    };
    // Each text as the shape writes it: a JSON string, or shown with its controls escaped.
    let text = if json { json_string } else { visible };
    for (name, value) in fields {
        out.push(if json { ',' } else { ' ' });
        text(&mut out, name);
        out.push(if json { ':' } else { '=' });
        match value {
            Value::Number(number) => out.push_str(&number.to_string()),
            Value::Text(value) => text(&mut out, value),
        }
    }
    if json {
        out.push_str(&format!("}},\"target\":\"{TARGET}\"}}"));
    }
    out.push('\n');
    out
}

/// Characters no log line may carry raw: controls (C0, DEL, C1) and the bidirectional marks
/// that reorder what a terminal shows.
fn hidden(c: char) -> bool {
    c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` for the human shape, each hidden character as its Rust escape (`\n`, `\u{1b}`).
fn visible(out: &mut String, text: &str) {
    for c in text.chars() {
        if hidden(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
}

/// `text` as a JSON string, each hidden character (and `"` and `\`) escaped.
fn json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if hidden(c) => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_take_both_shapes_with_controls_escaped() {
        let fields = [("pid", Value::from(7u32)), ("cgroup", Value::from("/a\nb\"c"))];
        let human = format_line(false, "T", Level::Info, "killed \u{1b}[2J", &fields);
        assert_eq!(human, "T  INFO hangar_guardian: killed \\u{1b}[2J pid=7 cgroup=/a\\nb\"c\n");
        let json = format_line(true, "T", Level::Debug, "m", &fields);
        assert_eq!(
            json,
            "{\"timestamp\":\"T\",\"level\":\"DEBUG\",\"fields\":{\"message\":\"m\",\"pid\":7,\"cgroup\":\"/a\\u000ab\\\"c\"},\"target\":\"hangar_guardian\"}\n"
        );
    }

    #[test]
    fn the_filter_is_read_as_the_supervisors_is() {
        assert_eq!(max_level("", TARGET), Some(Level::Info));
        assert_eq!(max_level("warn", TARGET), Some(Level::Warn));
        assert_eq!(max_level("info,hangar=debug", TARGET), Some(Level::Debug));
        assert_eq!(max_level("debug,hangar_guardian=error", TARGET), Some(Level::Error));
        assert_eq!(max_level("hangar_supervisor=debug", TARGET), None, "no directive for it: nothing");
        assert_eq!(max_level("hangar_guardian", TARGET), Some(Level::Trace));
        assert_eq!(max_level("off", TARGET), None);
        assert_eq!(max_level("nonsense=loud", TARGET), Some(Level::Info), "not understood: the default");
    }
}
