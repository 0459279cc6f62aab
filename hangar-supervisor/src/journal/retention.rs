//! Pruning: entries older than `journal.retention_days` go, then, while the database holds more
//! than `journal.max_mb`, the oldest entries; freed pages go back to the file system
//! (`auto_vacuum = INCREMENTAL`, set when the database is created), so the file never grows
//! forever. Run by the writer thread; the time is passed in.

use hangar_core::journal::JournalConfig;
use rusqlite::Connection;

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
    // Found by id (`at_ms` has no index): before the first entry as recent as the cutoff, or all.
    let by_age = match super::by_time::first_id_at_or_after(connection, cutoff)? {
        Some(first_kept) => connection.execute("DELETE FROM entries WHERE id < ?1", [first_kept])?,
        None => connection.execute("DELETE FROM entries", [])?,
    };
    let cap = config.max_mb.saturating_mul(1024 * 1024);
    let mut by_size = 0;
    loop {
        let used = used_bytes(connection)?;
        if used <= cap {
            break;
        }
        // The share of the rows that is over the cap, as a first guess (and at least one).
        let rows: i64 = connection.query_row("SELECT COUNT(*) FROM entries", [], |row| row.get(0))?;
        let over = ((rows as u128 * u128::from(used - cap)).div_ceil(u128::from(used)) as i64).max(1);
        let deleted = connection
            .execute("DELETE FROM entries WHERE id IN (SELECT id FROM entries ORDER BY id LIMIT ?1)", [over])?;
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

    fn insert(connection: &Connection, id: i64, at_ms: i64, body: &str) {
        connection
            .execute(
                "INSERT INTO entries (id, at_ms, kind, body) VALUES (?1, ?2, 'gap', ?3)",
                rusqlite::params![id, at_ms, body],
            )
            .unwrap();
    }

    fn ids(connection: &Connection) -> Vec<i64> {
        let mut select = connection.prepare("SELECT id FROM entries ORDER BY id").unwrap();
        select.query_map([], |row| row.get(0)).unwrap().map(Result::unwrap).collect()
    }

    #[test]
    fn entries_older_than_the_retention_go_and_the_rest_stay() {
        let connection = journal();
        let now = 100 * DAY_MS;
        insert(&connection, 1, now - 31 * DAY_MS, "{}");
        insert(&connection, 2, now - 30 * DAY_MS - 1, "{}");
        insert(&connection, 3, now - 30 * DAY_MS, "{}");
        insert(&connection, 4, now, "{}");
        let config = JournalConfig { retention_days: 30, max_mb: 512 };
        assert_eq!(prune(&connection, now, &config).unwrap(), Pruned { by_age: 2, by_size: 0 });
        assert_eq!(ids(&connection), [3, 4]);
        assert_eq!(prune(&connection, now, &config).unwrap(), Pruned::default(), "nothing more to prune");
    }

    #[test]
    fn past_the_size_cap_the_oldest_go_until_it_fits() {
        let connection = journal();
        let body = "x".repeat(1000);
        for id in 1..=3000 {
            insert(&connection, id, 50 * DAY_MS, &body);
        }
        assert!(used_bytes(&connection).unwrap() > 2 * 1024 * 1024);
        let config = JournalConfig { retention_days: 30, max_mb: 1 };
        let pruned = prune(&connection, 50 * DAY_MS, &config).unwrap();
        assert_eq!(pruned.by_age, 0);
        assert!(pruned.by_size >= 2000 && pruned.by_size < 2900, "{pruned:?}");
        assert!(used_bytes(&connection).unwrap() <= 1024 * 1024);
        let free: i64 = connection.pragma_query_value(None, "freelist_count", |row| row.get(0)).unwrap();
        assert_eq!(free, 0, "the freed pages were given back (auto_vacuum = INCREMENTAL)");
        let left = ids(&connection);
        assert_eq!(left.last(), Some(&3000), "the newest stay");
        assert_eq!(left.len(), 3000 - pruned.by_size);
        assert_eq!(left[0], 3001 - left.len() as i64, "the oldest went first");
    }
}
