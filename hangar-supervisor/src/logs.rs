//! The bounded per-server log: what an upstream prints lands here and only here.
//!
//! A ring of the last [`CAPACITY`] lines, each cut to [`MAX_LINE_BYTES`] and stamped when it
//! was recorded. Pushing never blocks on readers for longer than a copy, so an upstream that
//! floods stderr never stalls.
//!
//! The server's configured env values are redacted from the whole line *before* it is cut, so a
//! value that straddles the cut cannot leave its first part behind; overlapping values are
//! redacted as one span, so no part of either survives.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::SystemTime;

use hangar_core::record::LogLine;
use hangar_core::sync::Unpoisoned;
use hangar_core::time::rfc3339_millis;

use crate::redactor::Redactor;

pub const CAPACITY: usize = 1000;
pub const MAX_LINE_BYTES: usize = 4096;

/// The `stream` of a log line: the variant's serde name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    Stderr,
    /// Lines on stdout that are not protocol messages.
    Stdout,
    /// The text of an upstream's JSON-RPC error answers, kept out of every read surface.
    Error,
}

impl Stream {
    fn as_str(self) -> &'static str {
        hangar_core::wire_name::of(&self)
    }
}

struct Entry {
    stream: Stream,
    content: String,
    recorded_at: SystemTime,
}

pub struct LogRing {
    server_id: String,
    entries: Mutex<VecDeque<Entry>>,
    /// The values never to be shown (the server's configured env values), replaced on the way in.
    secrets: Redactor,
}

/// Env values shorter than this are not treated as secrets (`1`, `true`, `info` would blank
/// out ordinary words).
const MIN_SECRET_LEN: usize = 6;

impl LogRing {
    /// A ring that redacts each of `secrets` from every line it records.
    pub fn with_secrets(server_id: &str, secrets: Vec<String>) -> Self {
        let mut secrets: Vec<String> = secrets.into_iter().filter(|s| s.len() >= MIN_SECRET_LEN).collect();
        // A value echoed inside JSON (an answer logged as printed) may be escaped there.
        let escaped: Vec<String> = secrets.iter().filter_map(|s| json_escaped(s).filter(|e| e != s)).collect();
        secrets.extend(escaped);
        let secrets = Redactor::new(server_id, &secrets);
        // Empty until it logs: a thousand configured servers that print nothing cost nothing here.
        LogRing { server_id: server_id.into(), entries: Mutex::new(VecDeque::new()), secrets }
    }

    /// Records one line (bytes as printed): secrets redacted first, then invalid UTF-8 replaced
    /// and an over-long line cut on a character boundary.
    pub fn push(&self, stream: Stream, bytes: &[u8]) {
        let content = cut(self.secrets.redact(bytes), bytes.len());
        let entry = Entry { stream, content, recorded_at: SystemTime::now() };
        let mut entries = self.entries.locked();
        if entries.len() == CAPACITY {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    /// The server whose lines these are.
    pub fn server_id(&self) -> &str {
        &self.server_id
    }

    /// The last `n` lines, oldest first.
    pub fn tail(&self, n: usize) -> Vec<LogLine> {
        let entries = self.entries.locked();
        let skip = entries.len().saturating_sub(n);
        entries
            .iter()
            .skip(skip)
            .map(|e| LogLine {
                mcp_server_id: self.server_id.clone(),
                stream: e.stream.as_str().into(),
                content: e.content.clone(),
                recorded_at: rfc3339_millis(e.recorded_at),
            })
            .collect()
    }
}

/// `value` as it reads inside a JSON string (quotes, backslashes and control characters escaped).
fn json_escaped(value: &str) -> Option<String> {
    let quoted = serde_json::to_string(value).ok()?;
    Some(quoted.get(1..quoted.len() - 1)?.to_owned())
}

/// `text` cut to at most [`MAX_LINE_BYTES`] on a character boundary, saying how long the line
/// was as printed (`printed` bytes).
fn cut(mut text: String, printed: usize) -> String {
    if text.len() <= MAX_LINE_BYTES {
        return text;
    }
    let mut end = MAX_LINE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!(" [cut: {printed} bytes in all]"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_lines_in_order() {
        let ring = LogRing::with_secrets("math", Vec::new());
        for i in 0..(CAPACITY + 5) {
            ring.push(Stream::Stderr, format!("line {i}").as_bytes());
        }
        let tail = ring.tail(3);
        let contents: Vec<_> = tail.iter().map(|l| l.content.as_str()).collect();
        assert_eq!(
            contents,
            [format!("line {}", CAPACITY + 2), format!("line {}", CAPACITY + 3), format!("line {}", CAPACITY + 4)]
        );
        assert_eq!(ring.tail(usize::MAX).len(), CAPACITY);
        assert_eq!(tail[0].mcp_server_id, "math");
        assert_eq!(tail[0].stream, "stderr");
    }

    #[test]
    fn configured_secrets_never_reach_the_log() {
        let ring = LogRing::with_secrets("m", vec!["sk-live-12345".into(), "info".into()]);
        ring.push(Stream::Stderr, b"using key sk-live-12345 at level info");
        assert_eq!(ring.tail(1)[0].content, "using key [redacted] at level info", "short values are not secrets");
    }

    /// Every 8-byte window of `secret` that appears in `text`.
    fn fragments<'a>(secret: &'a str, text: &str) -> Vec<&'a str> {
        (0..=secret.len() - 8).map(|i| &secret[i..i + 8]).filter(|w| text.contains(w)).collect()
    }

    #[test]
    fn a_secret_straddling_the_cut_or_ending_the_line_leaves_nothing() {
        let secret = "sk-live-0f1e2d3c4b5a69788796a5b4c3d2e1f0";
        let ring = LogRing::with_secrets("m", vec![secret.into()]);
        let lines = [
            format!("{}{secret} and more", "p".repeat(MAX_LINE_BYTES - 10)),
            format!("{}{secret}", "p".repeat(MAX_LINE_BYTES - secret.len())),
            format!("{}{secret}", "p".repeat(MAX_LINE_BYTES - secret.len() + 1)),
            format!("{}{secret}", "p".repeat(MAX_LINE_BYTES * 2)),
            format!("é{}{secret}", "p".repeat(MAX_LINE_BYTES - 12)),
        ];
        for line in &lines {
            ring.push(Stream::Stdout, line.as_bytes());
        }
        for (line, logged) in lines.iter().zip(ring.tail(lines.len())) {
            assert!(fragments(secret, &logged.content).is_empty(), "{line:.20}... logged as {:?}", logged.content);
            assert!(logged.content.len() <= MAX_LINE_BYTES + 64);
        }
        let straddled = &ring.tail(lines.len())[0].content;
        assert!(straddled.ends_with(&format!("[redacted] [cut: {} bytes in all]", lines[0].len())), "{straddled}");
    }

    #[test]
    fn overlapping_secrets_are_redacted_as_one_span() {
        let (a, b) = ("abcdef-123456", "123456-uvwxyz");
        let ring = LogRing::with_secrets("m", vec![a.into(), b.into(), "aaaaaaa".into()]);
        ring.push(Stream::Stderr, b"x abcdef-123456-uvwxyz y aaaaaaaaaa z");
        assert_eq!(ring.tail(1)[0].content, "x [redacted] y [redacted] z");
    }

    #[test]
    fn a_value_escaped_inside_json_is_redacted_too() {
        let ring = LogRing::with_secrets("m", vec![r#"pa"ss\word"#.into()]);
        ring.push(Stream::Stdout, br#"{"id":99,"result":{"echo":"pa\"ss\\word"}} and pa"ss\word"#);
        assert_eq!(ring.tail(1)[0].content, r#"{"id":99,"result":{"echo":"[redacted]"}} and [redacted]"#);
    }

    #[test]
    fn empty_and_short_values_redact_nothing() {
        let ring = LogRing::with_secrets("m", vec![String::new(), "1".into(), "true".into()]);
        ring.push(Stream::Stderr, b"level 1 is true");
        assert_eq!(ring.tail(1)[0].content, "level 1 is true");
    }

    #[test]
    fn cuts_long_lines_and_survives_bad_utf8() {
        let ring = LogRing::with_secrets("m", Vec::new());
        ring.push(Stream::Stdout, &vec![b'a'; MAX_LINE_BYTES * 3]);
        ring.push(Stream::Stdout, &[0xff, 0xfe, b'o', b'k']);
        let tail = ring.tail(2);
        assert!(tail[0].content.len() < MAX_LINE_BYTES + 64);
        assert!(tail[0].content.ends_with(&format!("[cut: {} bytes in all]", MAX_LINE_BYTES * 3)));
        assert!(tail[1].content.ends_with("ok"));
    }
}
