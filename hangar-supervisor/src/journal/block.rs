//! Blocks: how entries are stored. The writer packs each batch's entries, in id order, into
//! blocks of at most [`MAX_ENTRIES`] entries (or about [`MAX_BYTES`] of text): one row of
//! `blocks` each, whose `body` holds the entries as JSON lines, each exactly as `/api/events`
//! streams it. One row insert per entry cost more than the entry's own JSON (docs/bench-log/2026.md); one
//! per block costs next to nothing per entry. Readers split a block into its lines and read each
//! line's id from its start, decoding only the lines they want.
//!
//! A body is stored lz4-compressed ([`Packer`]: a BLOB, the text's length first as four
//! little-endian bytes, then an lz4 block). Lines of the same calls repeat most of their bytes,
//! so a block shrinks about tenfold, and the disk gets about a fifth of the bytes per call,
//! for less of the writer's CPU than the SQLite work it saves (docs/bench-log/2026.md, "Compressed
//! blocks").
//! Blocks written before schema 4 are TEXT and are read as they are ([`Body`]).

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ValueRef};

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

/// The most text a stored block may unpack to: a block closes past [`MAX_BYTES`], and its last
/// entry is bounded by what a request may carry; a larger claim is a corrupt block, refused
/// before anything is allocated for it.
const MAX_UNPACKED: usize = 64 << 20;

/// Compresses blocks as they are stored, its buffers reused block after block.
#[derive(Default)]
pub struct Packer {
    table: lz4_flex::block::CompressTable,
    packed: Vec<u8>,
}

impl Packer {
    /// A block's text as it is stored: its length (u32, little-endian), then the lz4 block (the
    /// layout of lz4_flex's `compress_prepend_size` and of Python's `lz4.block.compress`).
    /// The buffer is sized for lz4's worst case, so this fails only if lz4 breaks its word; the
    /// batch then fails as any write does (its entries counted as dropped), never stored empty.
    pub fn pack(&mut self, body: &[u8]) -> Result<&[u8], lz4_flex::block::CompressError> {
        let out = &mut self.packed;
        out.clear();
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.resize(4 + lz4_flex::block::get_maximum_output_size(body.len()), 0);
        let written = lz4_flex::block::compress_into_with_table(body, &mut out[4..], &mut self.table)?;
        out.truncate(4 + written);
        Ok(out)
    }
}

/// A stored block's text: as it was written (TEXT, before schema 4) or unpacked (BLOB).
#[derive(Debug)]
pub struct Body(pub String);

impl FromSql for Body {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        match value {
            ValueRef::Text(_) => String::column_result(value).map(Body),
            ValueRef::Blob(packed) => unpack(packed).map(Body).map_err(FromSqlError::Other),
            _ => Err(FromSqlError::InvalidType),
        }
    }
}

fn unpack(packed: &[u8]) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let (length, block) = packed.split_first_chunk::<4>().ok_or("a compressed block shorter than its header")?;
    let length = u32::from_le_bytes(*length) as usize;
    if length > MAX_UNPACKED {
        return Err(format!("a compressed block claims {length} bytes, more than a block can hold").into());
    }
    let text = lz4_flex::block::decompress(block, length)?;
    if text.len() != length {
        return Err(format!("a compressed block unpacked to {} bytes, not the {length} it claims", text.len()).into());
    }
    Ok(String::from_utf8(text)?)
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
            rule: None,
            redacted: Vec::new(),
            approval: None,
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
            Recorded { id: 42, at_ms: 1_764_458_423_001, what: Happened::Gap { dropped: 3, reason: None } },
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
            block.push(&Recorded { id, at_ms: 0, what: Happened::Gap { dropped: 1, reason: None } }, &mut times);
        }
        assert!(!block.is_full());
        block.push(&Recorded { id: 5000, at_ms: 0, what: Happened::Gap { dropped: 1, reason: None } }, &mut times);
        assert!(block.is_full());
        let mut big = Block::default();
        let large = json!({"text": "x".repeat(MAX_BYTES)});
        big.push(&Recorded { id: 1, at_ms: 0, what: audit("echo", Some(large)) }, &mut times);
        assert!(big.is_full(), "one large entry fills a block");
    }

    /// What a `body` column holds, read back as a reader reads it.
    fn read_back(value: rusqlite::types::Value) -> Result<String, String> {
        let connection = rusqlite::Connection::open_in_memory().unwrap();
        connection
            .query_row("SELECT ?1", [value], |row| row.get::<_, Body>(0))
            .map(|body| body.0)
            .map_err(|err| err.to_string())
    }

    #[test]
    fn a_compressed_block_reads_back_as_its_text_and_a_text_block_as_it_was_written() {
        let (mut block, mut times) = (Block::default(), Times::default());
        for id in 1..=300 {
            block.push(&Recorded { id, at_ms: 1_764_458_422_990 + id as i64, what: audit("echo", None) }, &mut times);
        }
        let mut packer = Packer::default();
        packer.pack(b"an earlier block, its buffer reused").unwrap();
        let packed = packer.pack(&block.body).unwrap().to_vec();
        assert!(packed.len() * 5 < block.body.len(), "{} bytes packed to {}", block.body.len(), packed.len());
        assert_eq!(lz4_flex::block::decompress_size_prepended(&packed).unwrap(), block.body, "lz4_flex's own layout");
        let text = String::from_utf8(block.body.clone()).unwrap();
        assert_eq!(read_back(rusqlite::types::Value::Blob(packed.clone())).unwrap(), text);
        assert_eq!(read_back(rusqlite::types::Value::Text(text.clone())).unwrap(), text, "schema 3's TEXT blocks");
        assert_eq!(read_back(rusqlite::types::Value::Blob(packer.pack(b"").unwrap().to_vec())).unwrap(), "");
    }

    #[test]
    fn a_corrupt_compressed_block_is_an_error_never_a_panic_nor_a_huge_allocation() {
        let (mut block, mut times) = (Block::default(), Times::default());
        for id in 1..=50 {
            block.push(&Recorded { id, at_ms: 0, what: audit("echo", None) }, &mut times);
        }
        let mut packer = Packer::default();
        let packed = packer.pack(&block.body).unwrap().to_vec();
        let claims = |n: u32, rest: &[u8]| [n.to_le_bytes().as_slice(), rest].concat();
        for (what, bad) in [
            ("no header", vec![1, 2]),
            ("cut short", packed[..packed.len() / 2].to_vec()),
            ("claims 4 GiB", claims(u32::MAX, &packed[4..])),
            ("claims more than it holds", claims(block.body.len() as u32 + 1, &packed[4..])),
            ("claims less than it holds", claims(block.body.len() as u32 - 1, &packed[4..])),
            ("not UTF-8", packer.pack(&[0xff, 0xfe]).unwrap().to_vec()),
            ("noise", claims(1000, &[0xf0; 64])),
        ] {
            assert!(read_back(rusqlite::types::Value::Blob(bad)).is_err(), "{what}");
        }
        assert!(read_back(rusqlite::types::Value::Integer(7)).is_err(), "neither text nor a blob");
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
