//! Blocks: how entries are stored. The writer packs each batch's entries, in id order, into
//! blocks of at most [`MAX_ENTRIES`] entries (or about [`MAX_BYTES`] of text): one row of
//! `blocks` each, whose `body` holds the entries as JSON lines, each exactly as `/api/events`
//! streams it. One row insert per entry cost more than the entry's own JSON (BENCHMARKS.md); one
//! per block costs next to nothing per entry. Readers split a block into its lines and read each
//! line's id from its start, decoding only the lines they want.

use super::{Recorded, Times, line};

/// The most entries one block holds: a reader decodes at most this many lines to find one.
pub const MAX_ENTRIES: usize = 1024;
/// A block is closed once its text passes this (an entry is never split).
pub const MAX_BYTES: usize = 1 << 20;

/// A block as it is written: its bounds and its lines.
#[derive(Default)]
pub struct Block {
    pub first_id: u64,
    pub last_id: u64,
    pub first_at_ms: i64,
    pub last_at_ms: i64,
    pub entries: usize,
    /// The entries' JSON, one per line (`\n` between them; JSON text never holds a raw newline).
    pub body: Vec<u8>,
}

impl Block {
    /// Adds an entry (ids rise: the writer gets them in order).
    pub fn push(&mut self, entry: &Recorded, times: &mut Times) {
        if self.entries == 0 {
            self.first_id = entry.id;
            self.first_at_ms = entry.at_ms;
        } else {
            self.body.push(b'\n');
        }
        line::write(&mut self.body, entry.id, times.of(entry.at_ms), &entry.what);
        self.last_id = entry.id;
        self.last_at_ms = entry.at_ms;
        self.entries += 1;
    }

    pub fn is_full(&self) -> bool {
        self.entries >= MAX_ENTRIES || self.body.len() >= MAX_BYTES
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Empties it for the next block, keeping its buffer.
    pub fn clear(&mut self) {
        self.entries = 0;
        self.body.clear();
    }
}

/// A block's lines with their ids, oldest first.
pub fn lines(body: &str) -> impl DoubleEndedIterator<Item = (Option<u64>, &str)> {
    body.split('\n').map(|line| (line_id(line), line))
}

/// The id of an entry's line: read from its start (`{"id":N,`: `EventParts` writes the id
/// first), else, for a line written otherwise (an older release's row, moved into a block by a
/// migration), from its JSON; `None` for a line with no id at all.
pub fn line_id(line: &str) -> Option<u64> {
    if let Some(digits) = line.strip_prefix("{\"id\":") {
        let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
        if let Ok(id) = digits[..end].parse() {
            return Some(id);
        }
    }
    #[derive(serde::Deserialize)]
    struct Id {
        id: u64,
    }
    serde_json::from_str::<Id>(line).ok().map(|entry| entry.id)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use hangar_core::journal::{AuditEntry, CallOutcome, Happened, JournalEvent};
    use serde_json::json;

    use super::*;

    fn audit(tool: &str, arguments: Option<serde_json::Value>) -> Happened {
        Happened::Audit(AuditEntry {
            id: 0,
            at: String::new(),
            identity: "ci \"quoted\"\nline".into(),
            profile: Some("dev".into()),
            mcp_server: "math".into(),
            tool: Some(tool.into()),
            method: "tools/call".into(),
            outcome: CallOutcome::IsError,
            error_type: None,
            duration_ms: 1.25,
            bytes_in: 10,
            bytes_out: 20,
            arguments,
            trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736".into()),
        })
    }

    #[test]
    fn a_blocks_lines_read_back_as_the_entries_it_was_given() {
        let recorded = [
            Recorded {
                id: 41,
                at_ms: 1_764_458_422_990,
                what: audit("add", Some(json!({"text": "a\nb", "n": [1, 2]}))),
            },
            Recorded { id: 42, at_ms: 1_764_458_423_001, what: Happened::Gap { dropped: 3 } },
            Recorded { id: 1000, at_ms: 1_764_458_423_002, what: audit("sub", None) },
        ];
        let (mut block, mut times) = (Block::default(), Times::default());
        for entry in &recorded {
            block.push(entry, &mut times);
        }
        assert_eq!((block.first_id, block.last_id, block.entries), (41, 1000, 3));
        assert_eq!((block.first_at_ms, block.last_at_ms), (1_764_458_422_990, 1_764_458_423_002));
        let body = std::str::from_utf8(&block.body).unwrap();
        let read: Vec<(Option<u64>, JournalEvent)> =
            lines(body).map(|(id, line)| (id, serde_json::from_str(line).unwrap())).collect();
        // As every reader sees an entry: an audit entry's `id` and `at` are read back from the event's.
        let as_read = |e: &Recorded| serde_json::from_str(&serde_json::to_string(&e.event()).unwrap()).unwrap();
        let expected: Vec<(Option<u64>, JournalEvent)> = recorded.iter().map(|e| (Some(e.id), as_read(e))).collect();
        assert_eq!(read, expected, "every entry, in order, each line's id read from its start");
        let Happened::Audit(first) = &read[0].1.what else { panic!("{read:?}") };
        assert_eq!((first.id, first.identity.as_str()), (41, "ci \"quoted\"\nline"));
        assert_eq!(lines(body).rev().map(|(id, _)| id.unwrap()).collect::<Vec<_>>(), [1000, 42, 41]);

        block.clear();
        assert!(block.is_empty() && block.body.is_empty());
        block.push(&recorded[1], &mut times);
        assert_eq!((block.first_id, block.last_id), (42, 42), "a cleared block starts afresh");
    }

    #[test]
    fn a_block_is_full_at_its_entry_count_or_its_size() {
        let (mut block, mut times) = (Block::default(), Times::default());
        for id in 1..MAX_ENTRIES as u64 {
            block.push(&Recorded { id, at_ms: 0, what: Happened::Gap { dropped: 1 } }, &mut times);
        }
        assert!(!block.is_full());
        block.push(&Recorded { id: 5000, at_ms: 0, what: Happened::Gap { dropped: 1 } }, &mut times);
        assert!(block.is_full());
        let mut big = Block::default();
        let large = json!({"text": "x".repeat(MAX_BYTES)});
        big.push(&Recorded { id: 1, at_ms: 0, what: audit("echo", Some(large)) }, &mut times);
        assert!(big.is_full(), "one large entry fills a block");
    }

    #[test]
    fn a_line_id_is_read_only_from_a_line_that_starts_with_one() {
        assert_eq!(line_id(r#"{"id":12,"at":"x"}"#), Some(12));
        assert_eq!(line_id(r#"{"id":7}"#), Some(7));
        assert_eq!(line_id(r#"{"at":"x","id":12}"#), Some(12), "an id written elsewhere in the line");
        assert_eq!(line_id(r#"{"id":"12"}"#), None);
        assert_eq!(line_id(r#"{"at":"x"}"#), None);
        assert_eq!(line_id(""), None);
    }
}
