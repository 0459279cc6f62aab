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
    // 3: entries in blocks, one row per block of a batch (at most `block::MAX_ENTRIES`): a row's
    // insert cost each entry more than its JSON did. `body` is the block's entries as JSON lines,
    // each as `/api/events` streams it, in id order; blocks never overlap. `minutes` keeps the
    // audited calls and failures per minute, server and identity (the chart), written with the
    // blocks. The old rows become one block each, and their calls are counted.
    "CREATE TABLE blocks (
        first_id INTEGER PRIMARY KEY,
        last_id INTEGER NOT NULL,
        first_at_ms INTEGER NOT NULL,
        last_at_ms INTEGER NOT NULL,
        entries INTEGER NOT NULL,
        body TEXT NOT NULL
    );
    INSERT INTO blocks (first_id, last_id, first_at_ms, last_at_ms, entries, body)
        SELECT id, id, at_ms, at_ms, 1, body FROM entries ORDER BY id;
    CREATE TABLE minutes (
        minute INTEGER NOT NULL,
        mcp_server TEXT NOT NULL,
        identity TEXT NOT NULL,
        calls INTEGER NOT NULL,
        errors INTEGER NOT NULL,
        PRIMARY KEY (minute, mcp_server, identity)
    ) WITHOUT ROWID;
    INSERT INTO minutes (minute, mcp_server, identity, calls, errors)
        SELECT at_ms / 60000, COALESCE(mcp_server, ''), COALESCE(identity, ''), COUNT(*),
               SUM(CASE WHEN outcome = 'ok' THEN 0 ELSE 1 END)
        FROM entries WHERE kind = 'audit' GROUP BY 1, 2, 3;
    DROP TABLE entries;",
    // 4: a block's `body` is stored lz4-compressed, as a BLOB (`block::Packer`): a block is
    // about a tenth of its text, and the disk gets about a fifth of the bytes. The tables stay; blocks written before stay
    // TEXT and are read as they are. The version is what changes, so that a release from before
    // refuses a journal it could not read (`Newer`) instead of misreading its blocks.
    "SELECT 1;",
    // 5: upstream credentials the hangar obtained (OAuth tokens), one row per identity, server,
    // issuer and resource, each sealed under `credentials.key_file` (`crate::vault`): `key_id`
    // names the key (never the key), `sealed` is nonce and ciphertext. Never pruned by
    // retention: a row goes when its owner forgets it or the flow replaces it.
    "CREATE TABLE credentials (
        identity TEXT NOT NULL,
        mcp_server TEXT NOT NULL,
        issuer TEXT NOT NULL,
        resource TEXT NOT NULL,
        key_id TEXT NOT NULL,
        sealed BLOB NOT NULL,
        updated_at_ms INTEGER NOT NULL,
        PRIMARY KEY (identity, mcp_server, issuer, resource)
    ) WITHOUT ROWID;",
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
    #[error("cannot open the journal {path}: {source}{}", damage_hint(.source, .path))]
    Unreadable { path: PathBuf, source: rusqlite::Error },
    #[error(
        "the journal {path} has schema version {found}, newer than this hangar knows ({known}); run a newer hangar or move the file aside"
    )]
    Newer { path: PathBuf, found: u32, known: u32 },
}

/// What to do about a journal SQLite finds damaged (a torn or truncated file): the hangar leaves
/// it as it is, so what it still holds can be recovered.
fn damage_hint(source: &rusqlite::Error, path: &Path) -> String {
    if source.sqlite_error_code() != Some(rusqlite::ErrorCode::DatabaseCorrupt) {
        return String::new();
    }
    format!(
        "; the file is damaged and left as it is: recover what it holds with \
         `sqlite3 {path} .recover | sqlite3 recovered.sqlite` and put that in its place, \
         or move it aside to start a new journal",
        path = path.display()
    )
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
/// lock is held as long as the returned file is open. The flag says the file was there but
/// empty (0 bytes): SQLite would quietly start afresh in it, so the caller says so aloud.
pub fn open(dir: &Path, path: &Path) -> Result<(Connection, File, bool), OpenError> {
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
    let was_empty = std::fs::metadata(path).is_ok_and(|found| found.is_file() && found.len() == 0);
    let connection = Connection::open(path).map_err(|source| OpenError::Unreadable { path: path.into(), source })?;
    Ok((prepare(connection, path)?, lock, was_empty))
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
    latest_written(connection).map_err(|source| OpenError::Unreadable { path: path.into(), source })
}

/// The newest id written: the last id of the newest block (blocks never overlap), 0 if none.
pub fn latest_written(connection: &Connection) -> rusqlite::Result<u64> {
    connection
        .query_row("SELECT COALESCE((SELECT last_id FROM blocks ORDER BY first_id DESC LIMIT 1), 0)", [], |row| {
            row.get::<_, i64>(0)
        })
        .map(|id| id.max(0) as u64)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_version_1_journal_becomes_blocks_and_minutes_and_keeps_its_entries() {
        let mut connection = Connection::open_in_memory().unwrap();
        let tx = connection.transaction().unwrap();
        tx.execute_batch(MIGRATIONS[0]).unwrap();
        tx.execute("INSERT INTO entries (id, at_ms, kind, body) VALUES (1, 5, 'gap', '{\"id\":1}')", []).unwrap();
        for (id, at_ms, outcome) in [(2, 60_001, "ok"), (3, 60_002, "error"), (7, 120_000, "ok")] {
            tx.execute(
                "INSERT INTO entries (id, at_ms, kind, mcp_server, identity, outcome, body)
                 VALUES (?1, ?2, 'audit', 'math', 'ci', ?3, '{}')",
                rusqlite::params![id, at_ms, outcome],
            )
            .unwrap();
        }
        tx.pragma_update(None, "user_version", 1).unwrap();
        tx.commit().unwrap();
        let connection = prepare(connection, Path::new(":memory:")).unwrap();
        let version: u32 = connection.pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
        assert_eq!(version, MIGRATIONS.len() as u32);
        let tables: i64 = connection
            .query_row("SELECT COUNT(*) FROM sqlite_master WHERE name IN ('entries', 'entries_at')", [], |r| r.get(0))
            .unwrap();
        assert_eq!(tables, 0, "the old table and its index are gone");
        let blocks: Vec<(i64, i64, String)> = connection
            .prepare("SELECT first_id, last_id, body FROM blocks ORDER BY first_id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(blocks.iter().map(|b| (b.0, b.1)).collect::<Vec<_>>(), [(1, 1), (2, 2), (3, 3), (7, 7)]);
        assert_eq!(blocks[0].2, "{\"id\":1}");
        let minutes: Vec<(i64, i64, i64)> = connection
            .prepare("SELECT minute, calls, errors FROM minutes ORDER BY minute")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(minutes, [(1, 2, 1), (2, 1, 0)], "the old calls are counted by minute");
        assert_eq!(last_id(&connection, Path::new(":memory:")).unwrap(), 7);
    }
}
