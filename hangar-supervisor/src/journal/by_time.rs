//! Finding entries by time without an index on it: ids and times rise together (an entry's id
//! is taken as it is recorded), so the first entry at or after a time is found by a binary
//! search over the id primary key, each step one seek. An index on `at_ms` would cost every
//! entry's write about a fifth more (BENCHMARKS.md), for a lookup made hourly (pruning) and by
//! the status page's chart.
//!
//! Were the clock set back, entries around the jump would be out of order; the bound found is
//! then one of them, so pruning and the chart may be off by those entries, never more.

use rusqlite::{Connection, OptionalExtension};

/// The smallest id of an entry recorded at or after `at_ms`, or `None` when every entry is older
/// (or there is none).
pub fn first_id_at_or_after(connection: &Connection, at_ms: i64) -> rusqlite::Result<Option<i64>> {
    let (low, high): (Option<i64>, Option<i64>) =
        connection.query_row("SELECT MIN(id), MAX(id) FROM entries", [], |row| Ok((row.get(0)?, row.get(1)?)))?;
    let (Some(mut low), Some(mut high)) = (low, high) else { return Ok(None) };
    let mut first_from =
        connection.prepare_cached("SELECT id, at_ms FROM entries WHERE id >= ?1 ORDER BY id LIMIT 1")?;
    // The first entry from id `from` on: its id and time (none past the last: "never").
    let mut entry_from = |from: i64| -> rusqlite::Result<(i64, i64)> {
        Ok(first_from
            .query_row([from], |row| Ok((row.get(0)?, row.get(1)?)))
            .optional()?
            .unwrap_or((i64::MAX, i64::MAX)))
    };
    if entry_from(high)?.1 < at_ms {
        return Ok(None);
    }
    // The entry from `high` on is recent enough; every entry before `low` is older.
    while low < high {
        let middle = low + (high - low) / 2;
        let (id, at) = entry_from(middle)?;
        if at >= at_ms {
            high = middle;
        } else {
            // Every id from `middle` to `id` leads to that same, older, entry.
            low = id.saturating_add(1);
        }
    }
    Ok(Some(entry_from(low)?.0))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn journal(rows: &[(i64, i64)]) -> Connection {
        let connection = super::super::schema::in_memory().unwrap();
        for (id, at_ms) in rows {
            connection
                .execute("INSERT INTO entries (id, at_ms, kind, body) VALUES (?1, ?2, 'gap', '{}')", [id, at_ms])
                .unwrap();
        }
        connection
    }

    #[test]
    fn the_first_entry_at_or_after_a_time_is_found_across_gaps_in_the_ids() {
        let rows = [(3, 10), (4, 10), (9, 20), (10, 20), (11, 25), (40, 30), (41, 31), (100, 50)];
        let connection = journal(&rows);
        for at in [0, 10, 11, 20, 21, 25, 26, 30, 31, 32, 50] {
            let expected = rows.iter().find(|(_, t)| *t >= at).map(|(id, _)| *id);
            assert_eq!(first_id_at_or_after(&connection, at).unwrap(), expected, "at {at}");
        }
        assert_eq!(first_id_at_or_after(&connection, 51).unwrap(), None, "every entry is older");
        assert_eq!(first_id_at_or_after(&journal(&[]), 0).unwrap(), None, "no entry");
        assert_eq!(first_id_at_or_after(&journal(&[(7, 5)]), 5).unwrap(), Some(7));
    }
}
