//! Pruning: entries older than `journal.retention_days` go, then, while the database holds more
//! than `journal.max_mb`, the oldest entries, a whole block at a time; per-minute counts older
//! than the chart reaches go too. Freed pages go back to the file system
//! (`auto_vacuum = INCREMENTAL`, set when the database is created), so the file never grows
//! forever. Run by the writer thread; the time is passed in.

use hangar_core::journal::JournalConfig;
use rusqlite::{Connection, OptionalExtension};

const DAY_MS: i64 = 24 * 3600 * 1000;

#[derive(Debug, Default, PartialEq)]
pub struct Pruned {
    pub by_age: usize,
    pub by_size: usize,
}

impl Pruned {
    pub fn any(&self) -> bool {
        self.by_age + self.by_size > 0
    }
}

pub fn prune(connection: &Connection, now_ms: i64, config: &JournalConfig) -> rusqlite::Result<Pruned> {
    let cutoff = now_ms.saturating_sub(i64::from(config.retention_days).saturating_mul(DAY_MS));
    // Whole blocks: those before the first whose newest entry is as recent as the cutoff (ids
    // and times rise together), or all. A block that straddles the cutoff stays until its
    // newest entry is old enough.
    let first_kept: Option<i64> = connection
        .query_row("SELECT first_id FROM blocks WHERE last_at_ms >= ?1 ORDER BY first_id LIMIT 1", [cutoff], |row| {
            row.get(0)
        })
        .optional()?;
    let by_age = delete_blocks_before(connection, first_kept.unwrap_or(i64::MAX))?;
    // The chart's counts reach back a day at most, and never past the retention.
    let charted_from = now_ms.saturating_sub(i64::from(super::CHARTED_MINUTES) * 60_000).max(cutoff);
    connection.execute("DELETE FROM minutes WHERE minute < ?1", [charted_from.div_euclid(60_000)])?;
    let cap = config.max_mb.saturating_mul(1024 * 1024);
    let mut by_size = 0;
    loop {
        let used = used_bytes(connection)?;
        if used <= cap {
            break;
        }
        // The share of the blocks that is over the cap, as a first guess (and at least one).
        let blocks: i64 = connection.query_row("SELECT COUNT(*) FROM blocks", [], |row| row.get(0))?;
        let over = ((blocks as u128 * u128::from(used - cap)).div_ceil(u128::from(used)) as i64).max(1);
        let Some(last_over): Option<i64> = connection.query_row(
            "SELECT MAX(first_id) FROM (SELECT first_id FROM blocks ORDER BY first_id LIMIT ?1)",
            [over],
            |row| row.get(0),
        )?
        else {
            break;
        };
        let deleted = delete_blocks_before(connection, last_over.saturating_add(1))?;
        if deleted == 0 {
            break;
        }
        by_size += deleted;
    }
    if by_age + by_size > 0 {
        // Each step of the pragma gives back one page: run it to the end.
        let mut vacuum = connection.prepare("PRAGMA incremental_vacuum")?;
        let mut steps = vacuum.query([])?;
        while steps.next()?.is_some() {}
    }
    Ok(Pruned { by_age, by_size })
}

/// Deletes the blocks that start before `first_id`; how many entries they held.
fn delete_blocks_before(connection: &Connection, first_id: i64) -> rusqlite::Result<usize> {
    let entries: i64 = connection.query_row(
        "SELECT COALESCE(SUM(entries), 0) FROM blocks WHERE first_id < ?1",
        [first_id],
        |row| row.get(0),
    )?;
    connection.execute("DELETE FROM blocks WHERE first_id < ?1", [first_id])?;
    Ok(entries.max(0) as usize)
}

/// The bytes the database's pages hold, free pages not counted.
fn used_bytes(connection: &Connection) -> rusqlite::Result<u64> {
    let pragma = |name: &str| connection.pragma_query_value(None, name, |row| row.get::<_, i64>(0));
    let used = pragma("page_count")? - pragma("freelist_count")?;
    Ok(used.max(0) as u64 * pragma("page_size")?.max(0) as u64)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn journal() -> Connection {
        super::super::schema::in_memory().unwrap()
    }

    /// A block of `entries` entries from `first_id`, all at `at_ms`.
    fn insert(connection: &Connection, first_id: i64, entries: i64, at_ms: i64, body: &str) {
        connection
            .execute(
                "INSERT INTO blocks (first_id, last_id, first_at_ms, last_at_ms, entries, body)
                 VALUES (?1, ?2, ?3, ?3, ?4, ?5)",
                rusqlite::params![first_id, first_id + entries - 1, at_ms, entries, body],
            )
            .unwrap();
    }

    fn first_ids(connection: &Connection) -> Vec<i64> {
        let mut select = connection.prepare("SELECT first_id FROM blocks ORDER BY first_id").unwrap();
        select.query_map([], |row| row.get(0)).unwrap().map(Result::unwrap).collect()
    }

    fn minutes(connection: &Connection) -> Vec<i64> {
        let mut select = connection.prepare("SELECT minute FROM minutes ORDER BY minute").unwrap();
        select.query_map([], |row| row.get(0)).unwrap().map(Result::unwrap).collect()
    }

    #[test]
    fn blocks_older_than_the_retention_go_and_the_rest_stay() {
        let connection = journal();
        let now = 100 * DAY_MS;
        insert(&connection, 1, 2, now - 31 * DAY_MS, "{}");
        insert(&connection, 3, 3, now - 30 * DAY_MS - 1, "{}");
        insert(&connection, 6, 1, now - 30 * DAY_MS, "{}");
        insert(&connection, 7, 4, now, "{}");
        for minute in [now - 2 * DAY_MS, now - DAY_MS - 60_000, now - DAY_MS + 60_000, now] {
            connection.execute("INSERT INTO minutes VALUES (?1, 'math', 'ci', 1, 0)", [minute / 60_000]).unwrap();
        }
        let config = JournalConfig { retention_days: 30, max_mb: 512 };
        assert_eq!(prune(&connection, now, &config).unwrap(), Pruned { by_age: 5, by_size: 0 });
        assert_eq!(first_ids(&connection), [6, 7]);
        assert_eq!(
            minutes(&connection),
            [(now - DAY_MS + 60_000) / 60_000, now / 60_000],
            "the chart's counts go past a day"
        );
        assert_eq!(prune(&connection, now, &config).unwrap(), Pruned::default(), "nothing more to prune");
        let short = JournalConfig { retention_days: 1, max_mb: 512 };
        assert_eq!(prune(&connection, now + DAY_MS, &short).unwrap(), Pruned { by_age: 1, by_size: 0 });
        assert_eq!(minutes(&connection), [now / 60_000], "nor past the retention");
    }

    #[test]
    fn past_the_size_cap_the_oldest_blocks_go_until_it_fits() {
        let connection = journal();
        let body = "x".repeat(10_000);
        for block in 0..300 {
            insert(&connection, block * 10 + 1, 10, 50 * DAY_MS, &body);
        }
        assert!(used_bytes(&connection).unwrap() > 2 * 1024 * 1024);
        let config = JournalConfig { retention_days: 30, max_mb: 1 };
        let pruned = prune(&connection, 50 * DAY_MS, &config).unwrap();
        assert_eq!(pruned.by_age, 0);
        assert!(pruned.by_size >= 2000 && pruned.by_size < 2900, "{pruned:?}");
        assert_eq!(pruned.by_size % 10, 0, "whole blocks");
        assert!(used_bytes(&connection).unwrap() <= 1024 * 1024);
        let free: i64 = connection.pragma_query_value(None, "freelist_count", |row| row.get(0)).unwrap();
        assert_eq!(free, 0, "the freed pages were given back (auto_vacuum = INCREMENTAL)");
        let left = first_ids(&connection);
        assert_eq!(left.last(), Some(&2991), "the newest stay");
        assert_eq!(left.len() * 10, 3000 - pruned.by_size);
        assert_eq!(left[0], 3001 - 10 * left.len() as i64, "the oldest went first");
    }
}
