//! Entries recorded and not yet taken by the writer: packed into blocks (`block.rs`) as they are
//! recorded, on the recording thread, with the chart's counts per minute. The writer takes the
//! whole of it at once, once per commit interval (`writer.rs`), so no entry crosses to the
//! writer's thread on its own: a call's path pays for its line and nothing else, and only
//! finished text reaches the other core. Handing each entry over (a queue send, its memory
//! shared with and freed by the writer) cost a loaded hangar more than writing it did
//! (docs/bench-log/2026.md, "Entries written where they are recorded").

use std::hash::{Hash, Hasher};

use hangar_core::journal::{CallOutcome, Happened};
use indexmap::{Equivalent, IndexMap};

use super::block::Block;
use super::{Recorded, Times};

/// The most entries that may wait for the writer; past it new ones are dropped (and counted):
/// a writer stuck on a full or slow disk must not take the supervisor's memory with it.
pub const MAX_ENTRIES: usize = 65_536;

/// How many emptied blocks' buffers are kept for reuse (a busy hangar seals a block every few
/// batches; each buffer is up to `block::MAX_BYTES`).
const SPARE_BLOCKS: usize = 2;

/// What waits for the writer.
#[derive(Default)]
pub struct Unwritten {
    /// Full blocks, oldest first.
    pub sealed: Vec<Block>,
    /// The block being filled.
    pub open: Block,
    pub minutes: Minutes,
    /// How many entries all the blocks hold.
    pub entries: usize,
    times: Times,
    /// Emptied blocks whose buffers the next full ones reuse: a block's text never has to grow
    /// from nothing again, nor be freed on another thread.
    spare: Vec<Block>,
}

impl Unwritten {
    /// Adds an entry (ids rise: it is called under the journal's tail lock); `false` if it is
    /// full and the entry is not kept.
    pub fn push(&mut self, entry: &Recorded) -> bool {
        if self.entries >= MAX_ENTRIES {
            return false;
        }
        self.minutes.count(entry);
        self.open.push(entry, &mut self.times);
        self.entries += 1;
        if self.open.is_full() {
            let next = self.spare.pop().unwrap_or_default();
            self.sealed.push(std::mem::replace(&mut self.open, next));
        }
        true
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The blocks, oldest first.
    pub fn blocks(&self) -> impl Iterator<Item = &Block> {
        self.sealed.iter().chain(Some(&self.open).filter(|open| !open.is_empty()))
    }

    /// Empties it, keeping the blocks' buffers for the next batches.
    pub fn clear(&mut self) {
        for mut block in self.sealed.drain(..) {
            // A few, not a burst's worth: a backlog's buffers are freed once it is written.
            if self.spare.len() < SPARE_BLOCKS {
                block.clear();
                self.spare.push(block);
            }
        }
        self.open.clear();
        self.minutes.counts.clear();
        self.entries = 0;
    }
}

/// Audited calls and failures by minute, server and identity (the chart's counts), added to
/// the `minutes` table with the batch's blocks.
#[derive(Default)]
pub struct Minutes {
    pub counts: IndexMap<MinuteKey, Count>,
}

#[derive(Default, Debug, PartialEq, Eq, Clone, Copy)]
pub struct Count {
    pub calls: i64,
    pub errors: i64,
}

/// A minute (since the epoch), a server and an identity.
#[derive(PartialEq, Eq, Debug)]
pub struct MinuteKey {
    pub minute: i64,
    pub mcp_server: String,
    pub identity: String,
}

/// A [`MinuteKey`] borrowed from an entry: looked up without copying its strings (they are
/// copied only for a key the batch has not seen yet).
struct MinuteOf<'a> {
    minute: i64,
    mcp_server: &'a str,
    identity: &'a str,
}

// Both hash as (i64, str, str), so a borrowed key finds an owned one.
impl Hash for MinuteKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.minute, self.mcp_server.as_str(), self.identity.as_str()).hash(state);
    }
}

impl Hash for MinuteOf<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self.minute, self.mcp_server, self.identity).hash(state);
    }
}

impl Equivalent<MinuteKey> for MinuteOf<'_> {
    fn equivalent(&self, key: &MinuteKey) -> bool {
        self.minute == key.minute && self.mcp_server == key.mcp_server && self.identity == key.identity
    }
}

impl Minutes {
    /// Counts a tool call (an admin action, such as a start, or a forwarded request is no call).
    fn count(&mut self, entry: &Recorded) {
        let Happened::Audit(call) = &entry.what else { return };
        if !counts_as_call(call) {
            return;
        }
        let of = MinuteOf { minute: entry.at_ms / 60_000, mcp_server: &call.mcp_server, identity: &call.identity };
        // Calls come in runs of the same minute, server and caller: the last key first, unhashed.
        let at_last = self.counts.last().is_some_and(|(key, _)| of.equivalent(key));
        let found = if at_last { self.counts.last_mut().map(|(_, count)| count) } else { self.counts.get_mut(&of) };
        let count = match found {
            Some(count) => count,
            None => {
                let key = MinuteKey {
                    minute: of.minute,
                    mcp_server: call.mcp_server.clone(),
                    identity: call.identity.clone(),
                };
                self.counts.entry(key).or_default()
            }
        };
        count.calls += 1;
        count.errors += i64::from(call.outcome != CallOutcome::Ok);
    }
}

/// Whether an audit entry is a tool call, which the status page's chart counts.
pub(super) fn counts_as_call(entry: &hangar_core::journal::AuditEntry) -> bool {
    entry.method == "tools/call"
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use hangar_core::journal::AuditEntry;

    use super::*;

    fn call(at_ms: i64, server: &str, identity: &str, outcome: CallOutcome) -> Recorded {
        Recorded {
            id: 0,
            at_ms,
            what: Happened::Audit(AuditEntry {
                id: 0,
                at: String::new(),
                identity: identity.into(),
                profile: None,
                mcp_server: server.into(),
                tool: Some("echo".into()),
                method: "tools/call".into(),
                outcome,
                error_type: None,
                duration_ms: 0.1,
                bytes_in: 1,
                bytes_out: 2,
                arguments: None,
                trace_id: None,
                rule: None,
                redacted: Vec::new(),
                approval: None,
            }),
        }
    }

    #[test]
    fn calls_and_failures_are_counted_by_minute_server_and_identity() {
        let mut unwritten = Unwritten::default();
        let minute = 29_407_640_i64 * 60_000;
        for (n, (at, server, who, outcome)) in [
            (minute, "a", "ci", CallOutcome::Ok),
            (minute + 59_999, "a", "ci", CallOutcome::IsError),
            (minute + 60_000, "a", "ci", CallOutcome::Error),
            (minute + 1, "b", "ci", CallOutcome::Ok),
            (minute + 2, "a", "ops", CallOutcome::Ok),
        ]
        .into_iter()
        .enumerate()
        {
            let mut entry = call(at, server, who, outcome);
            entry.id = n as u64 + 1;
            assert!(unwritten.push(&entry));
        }
        assert!(unwritten.push(&Recorded { id: 6, at_ms: minute, what: Happened::Gap { dropped: 1, reason: None } }));
        let counts: Vec<_> = unwritten
            .minutes
            .counts
            .iter()
            .map(|(k, c)| (k.minute - minute / 60_000, k.mcp_server.as_str(), k.identity.as_str(), c.calls, c.errors))
            .collect();
        assert_eq!(counts, [(0, "a", "ci", 2, 1), (1, "a", "ci", 1, 1), (0, "b", "ci", 1, 0), (0, "a", "ops", 1, 0)]);
        assert_eq!(unwritten.entries, 6, "a gap is written too, and not counted as a call");
        let blocks: Vec<_> = unwritten.blocks().map(|b| (b.first_id, b.last_id, b.entries)).collect();
        assert_eq!(blocks, [(1, 6, 6)]);
        unwritten.clear();
        assert!(unwritten.is_empty() && unwritten.blocks().next().is_none() && unwritten.minutes.counts.is_empty());
    }

    #[test]
    fn full_blocks_are_sealed_in_order_and_past_the_limit_entries_are_refused() {
        let mut unwritten = Unwritten::default();
        for id in 1..=MAX_ENTRIES as u64 {
            assert!(unwritten.push(&Recorded { id, at_ms: 0, what: Happened::Gap { dropped: 1, reason: None } }));
        }
        assert!(!unwritten.push(&Recorded { id: 0, at_ms: 0, what: Happened::Gap { dropped: 1, reason: None } }));
        let blocks: Vec<_> = unwritten.blocks().map(|b| (b.first_id, b.last_id)).collect();
        assert_eq!(blocks.len(), MAX_ENTRIES / super::super::block::MAX_ENTRIES);
        assert!(blocks.windows(2).all(|w| w[0].1 + 1 == w[1].0), "consecutive, never overlapping: {blocks:?}");
        assert_eq!((blocks[0].0, blocks.last().unwrap().1), (1, MAX_ENTRIES as u64));

        // Emptied, its blocks' buffers are kept for the next ones, which read as new.
        unwritten.clear();
        assert_eq!(unwritten.spare.len(), SPARE_BLOCKS, "a few sealed blocks kept, not all");
        let block = super::super::block::MAX_ENTRIES as u64;
        for id in 1..=block + 1 {
            assert!(unwritten.push(&Recorded {
                id: 100 + id,
                at_ms: 0,
                what: Happened::Gap { dropped: 1, reason: None }
            }));
        }
        let again: Vec<_> = unwritten.blocks().map(|b| (b.first_id, b.last_id, b.entries)).collect();
        assert_eq!(again, [(101, 100 + block, block as usize), (101 + block, 101 + block, 1)]);
        assert_eq!(unwritten.spare.len(), SPARE_BLOCKS - 1, "a spare buffer reused");
    }
}
