//! The bounded per-server log: what an upstream prints lands here and only here.
//!
//! A ring of the last [`CAPACITY`] lines, each cut to [`MAX_LINE_BYTES`] and stamped when it
//! was recorded. Pushing never blocks on readers for longer than a copy, so an upstream that
//! floods stderr never stalls.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::SystemTime;

use hangar_core::record::LogLine;
use hangar_core::time::rfc3339_millis;

pub const CAPACITY: usize = 1000;
pub const MAX_LINE_BYTES: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stderr,
    /// Lines on stdout that are not protocol messages.
    Stdout,
    /// The text of an upstream's JSON-RPC error answers, kept out of every read surface.
    Error,
}

impl Stream {
    fn as_str(self) -> &'static str {
        match self {
            Stream::Stderr => "stderr",
            Stream::Stdout => "stdout",
            Stream::Error => "error",
        }
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
    /// Values never to be shown (the server's configured env values): replaced on the way in.
    secrets: Vec<String>,
}

/// Env values shorter than this are not treated as secrets (`1`, `true`, `info` would blank
/// out ordinary words).
const MIN_SECRET_LEN: usize = 6;
const REDACTED: &str = "[redacted]";

impl LogRing {
    /// A ring that redacts each of `secrets` from every line it records.
    pub fn with_secrets(server_id: &str, secrets: Vec<String>) -> Self {
        let secrets = secrets.into_iter().filter(|s| s.len() >= MIN_SECRET_LEN).collect();
        LogRing { server_id: server_id.into(), entries: Mutex::new(VecDeque::with_capacity(64)), secrets }
    }

    /// Records one line (bytes as printed; invalid UTF-8 is replaced, over-long lines cut).
    pub fn push(&self, stream: Stream, bytes: &[u8]) {
        let mut content = cut(bytes);
        for secret in &self.secrets {
            if content.contains(secret.as_str()) {
                content = content.replace(secret.as_str(), REDACTED);
            }
        }
        let entry = Entry { stream, content, recorded_at: SystemTime::now() };
        let mut entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if entries.len() == CAPACITY {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    /// The last `n` lines, oldest first.
    pub fn tail(&self, n: usize) -> Vec<LogLine> {
        let entries = self.entries.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
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

fn cut(bytes: &[u8]) -> String {
    if bytes.len() <= MAX_LINE_BYTES {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let mut text = String::from_utf8_lossy(&bytes[..MAX_LINE_BYTES]).into_owned();
    text.push_str(&format!(" [cut: {} bytes in all]", bytes.len()));
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
