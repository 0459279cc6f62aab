//! The check of the journal as it was found at start: SQLite's own `quick_check`, then every
//! block's body unpacked. It logs what is damaged and which entries are lost (readers skip a
//! corrupt block with a `gap` entry saying so) and changes nothing. It runs on a thread of its
//! own with its own read-only connection (WAL lets it read while the writer writes), so a large
//! journal's check delays no entry.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

/// Starts the check of the journal at `path` in the background.
pub fn start(path: &Path) {
    let path = path.to_owned();
    let checking = std::thread::Builder::new().name("journal-check".into()).spawn(move || {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        match Connection::open_with_flags(&path, flags) {
            Ok(connection) => check(&connection),
            Err(err) => tracing::error!(%err, "the journal could not be opened for its integrity check"),
        }
    });
    if let Err(err) = checking {
        tracing::warn!(%err, "the journal's integrity check did not start");
    }
}

/// How many blocks the integrity check reads at a time.
const CHECKED_PER_READ: i64 = 64;

/// Checks the database as it was found: SQLite's own `quick_check`, then every block's body
/// unpacked. Logs what is damaged and which entries are lost (readers skip a corrupt block with a
/// `gap` entry saying so); changes nothing.
fn check(connection: &Connection) {
    let problems: rusqlite::Result<Vec<String>> = connection
        .prepare("PRAGMA quick_check(20)")
        .and_then(|mut check| check.query_map([], |row| row.get(0))?.collect());
    match problems {
        Ok(problems) if problems.iter().all(|p| p == "ok") => {}
        Ok(problems) => {
            tracing::error!(problems = ?problems, "the journal database is damaged (quick_check); entries in damaged pages are lost")
        }
        Err(err) => tracing::error!(%err, "the journal database could not be checked (quick_check)"),
    }
    let mut corrupt = Vec::new();
    let mut lost = 0_i64;
    let mut from = i64::MIN;
    loop {
        let rows: rusqlite::Result<Vec<super::read::Stored>> = connection
            .prepare_cached(
                "SELECT first_id, last_id, first_at_ms, entries, body FROM blocks WHERE first_id > ?1 ORDER BY first_id LIMIT ?2",
            )
            .and_then(|mut blocks| blocks.query_map([from, CHECKED_PER_READ], super::read::Stored::of)?.collect());
        let rows = match rows {
            Ok(rows) => rows,
            Err(err) => {
                tracing::error!(%err, after = from, "the journal's blocks could not all be read; those after this id are lost");
                break;
            }
        };
        for stored in &rows {
            from = stored.first_id;
            if let Err(err) = &stored.body {
                tracing::warn!(first_id = stored.first_id, last_id = stored.last_id, entries = stored.entries, %err, "a corrupt journal block");
                corrupt.push((stored.first_id, stored.last_id));
                lost += stored.entries;
            }
        }
        if (rows.len() as i64) < CHECKED_PER_READ {
            break;
        }
    }
    if !corrupt.is_empty() {
        tracing::error!(
            blocks = corrupt.len(),
            entries = lost,
            "the journal holds corrupt blocks: their entries are lost, and readers skip them with a gap entry"
        );
    }
}
