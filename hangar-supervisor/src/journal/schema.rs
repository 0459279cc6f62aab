//! Opening the database: its directory (0700, locked by one supervisor at a time), pragmas, and
//! versioned migrations. A database that cannot be read, or was written by a newer hangar, is
//! refused before anything is written to it.

use std::fs::{DirBuilder, File, TryLockError};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use hangar_runtime::exit::{EX_CANTCREAT, EX_CONFIG, EX_UNAVAILABLE, Sysexit};
use rusqlite::Connection;

/// The lock file in the state directory: held (`flock`) for as long as a supervisor runs.
pub const LOCK_FILE: &str = "journal.lock";

/// Each migration takes the schema from version `i` to `i + 1`; never edit one that shipped.
const MIGRATIONS: &[&str] = &[
    // 1: entries and per-server memory. Readers scan `entries` by id (the primary key) and
    // filter the other columns as they go; `at_ms` is indexed for retention and the per-minute
    // counts (until 2). Every index is paid for on each call's entry, so there is no other.
    "CREATE TABLE entries (
        id INTEGER PRIMARY KEY,
        at_ms INTEGER NOT NULL,
        kind TEXT NOT NULL,
        mcp_server TEXT,
        identity TEXT,
        outcome TEXT,
        error_type TEXT,
        body TEXT NOT NULL
    );
    CREATE INDEX entries_at ON entries(at_ms);
    CREATE TABLE servers (
        mcp_server TEXT PRIMARY KEY,
        config_hash TEXT NOT NULL,
        lifecycle TEXT,
        catalog TEXT,
        updated_at_ms INTEGER NOT NULL
    );",
    // 2: no index on `at_ms`: it cost every entry about a fifth of its write. Ids and times
    // rise together, so a time range is found by its id bounds (`by_time.rs`).
    "DROP INDEX IF EXISTS entries_at;",
];

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot create the state directory {path}: {source}")]
    Directory { path: PathBuf, source: std::io::Error },
    #[error(
        "the state directory {path} is in use by another hangar-supervisor (it holds {LOCK_FILE}); give this one its own state_dir"
    )]
    Locked { path: PathBuf },
    #[error("cannot lock the state directory {path}: {source}")]
    Lock { path: PathBuf, source: std::io::Error },
    #[error("cannot open the journal {path}: {source}")]
    Unreadable { path: PathBuf, source: rusqlite::Error },
    #[error(
        "the journal {path} has schema version {found}, newer than this hangar knows ({known}); run a newer hangar or move the file aside"
    )]
    Newer { path: PathBuf, found: u32, known: u32 },
}

impl Sysexit for OpenError {
    fn exit_code(&self) -> u8 {
        match self {
            OpenError::Directory { .. } | OpenError::Lock { .. } | OpenError::Unreadable { .. } => EX_CANTCREAT,
            OpenError::Locked { .. } => EX_UNAVAILABLE,
            OpenError::Newer { .. } => EX_CONFIG,
        }
    }
}

/// Creates the state directory (0700) if needed, locks it, and opens the journal in it. The
/// lock is held as long as the returned file is open.
pub fn open(dir: &Path, path: &Path) -> Result<(Connection, File), OpenError> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| OpenError::Directory { path: dir.into(), source })?;
    let lock_path = dir.join(LOCK_FILE);
    let lock = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|source| OpenError::Lock { path: lock_path.clone(), source })?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Err(OpenError::Locked { path: dir.into() }),
        Err(TryLockError::Error(source)) => return Err(OpenError::Lock { path: lock_path, source }),
    }
    let connection = Connection::open(path).map_err(|source| OpenError::Unreadable { path: path.into(), source })?;
    Ok((prepare(connection, path)?, lock))
}

#[cfg(test)]
pub fn in_memory() -> Result<Connection, OpenError> {
    let path = Path::new(":memory:");
    let connection =
        Connection::open_in_memory().map_err(|source| OpenError::Unreadable { path: path.into(), source })?;
    prepare(connection, path)
}

fn prepare(mut connection: Connection, path: &Path) -> Result<Connection, OpenError> {
    let unreadable = |source| OpenError::Unreadable { path: path.into(), source };
    // Read first, write nothing yet: a file that is not a database, or one a newer hangar wrote,
    // is refused as it is.
    let found: u32 = connection.pragma_query_value(None, "user_version", |row| row.get(0)).map_err(unreadable)?;
    let known = MIGRATIONS.len() as u32;
    if found > known {
        return Err(OpenError::Newer { path: path.into(), found, known });
    }
    if found == 0 {
        // Only possible before the first table: pruned pages can then be given back.
        connection.pragma_update(None, "auto_vacuum", "INCREMENTAL").map_err(unreadable)?;
    }
    // WAL: readers never block the writer. NORMAL: a commit survives a crash of the process
    // (SIGKILL); a power loss may lose the last commits, never the database.
    connection.pragma_update(None, "journal_mode", "WAL").map_err(unreadable)?;
    connection.pragma_update(None, "synchronous", "NORMAL").map_err(unreadable)?;
    for (version, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let tx = connection.transaction().map_err(unreadable)?;
        tx.execute_batch(sql).map_err(unreadable)?;
        tx.pragma_update(None, "user_version", version as u32 + 1).map_err(unreadable)?;
        tx.commit().map_err(unreadable)?;
    }
    Ok(connection)
}

pub fn last_id(connection: &Connection, path: &Path) -> Result<u64, OpenError> {
    connection
        .query_row("SELECT COALESCE(MAX(id), 0) FROM entries", [], |row| row.get::<_, i64>(0))
        .map(|id| id.max(0) as u64)
        .map_err(|source| OpenError::Unreadable { path: path.into(), source })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_version_1_journal_loses_its_time_index_and_keeps_its_entries() {
        let mut connection = Connection::open_in_memory().unwrap();
        let tx = connection.transaction().unwrap();
        tx.execute_batch(MIGRATIONS[0]).unwrap();
        tx.execute("INSERT INTO entries (id, at_ms, kind, body) VALUES (1, 5, 'gap', '{}')", []).unwrap();
        tx.pragma_update(None, "user_version", 1).unwrap();
        tx.commit().unwrap();
        let index = |c: &Connection| -> i64 {
            c.query_row("SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'entries_at'", [], |r| {
                r.get(0)
            })
            .unwrap()
        };
        assert_eq!(index(&connection), 1);
        let connection = prepare(connection, Path::new(":memory:")).unwrap();
        assert_eq!(index(&connection), 0, "migration 2 dropped it");
        let version: u32 = connection.pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
        assert_eq!(version, MIGRATIONS.len() as u32);
        assert_eq!(last_id(&connection, Path::new(":memory:")).unwrap(), 1);
    }
}
