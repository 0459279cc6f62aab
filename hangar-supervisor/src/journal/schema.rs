//! Opening the database: its directory, pragmas, and versioned migrations.

use std::path::{Path, PathBuf};

use hangar_runtime::exit::{EX_CANTCREAT, EX_CONFIG, Sysexit};
use rusqlite::Connection;

/// Each migration takes the schema from version `i` to `i + 1`; never edit one that shipped.
const MIGRATIONS: &[&str] = &[
    // 1: entries and per-server memory.
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
    CREATE INDEX entries_kind ON entries(kind, id);
    CREATE TABLE servers (
        mcp_server TEXT PRIMARY KEY,
        config_hash TEXT NOT NULL,
        lifecycle TEXT,
        catalog TEXT,
        updated_at_ms INTEGER NOT NULL
    );",
];

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot create the state directory {path}: {source}")]
    Directory { path: PathBuf, source: std::io::Error },
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
            OpenError::Directory { .. } | OpenError::Unreadable { .. } => EX_CANTCREAT,
            OpenError::Newer { .. } => EX_CONFIG,
        }
    }
}

pub fn open(dir: &Path, path: &Path) -> Result<Connection, OpenError> {
    std::fs::create_dir_all(dir).map_err(|source| OpenError::Directory { path: dir.into(), source })?;
    let connection = Connection::open(path).map_err(|source| OpenError::Unreadable { path: path.into(), source })?;
    prepare(connection, path)
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
    // WAL: readers never block the writer. NORMAL: a commit survives a crash of the process
    // (SIGKILL); a power loss may lose the last commits, never the database.
    connection.pragma_update(None, "journal_mode", "WAL").map_err(unreadable)?;
    connection.pragma_update(None, "synchronous", "NORMAL").map_err(unreadable)?;
    let found: u32 = connection.pragma_query_value(None, "user_version", |row| row.get(0)).map_err(unreadable)?;
    let known = MIGRATIONS.len() as u32;
    if found > known {
        return Err(OpenError::Newer { path: path.into(), found, known });
    }
    for (version, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let tx = connection.transaction().map_err(unreadable)?;
        tx.execute_batch(sql).map_err(unreadable)?;
        tx.pragma_update(None, "user_version", version as u32 + 1).map_err(unreadable)?;
        tx.commit().map_err(unreadable)?;
    }
    Ok(connection)
}

pub fn last_id(connection: &Connection) -> Result<u64, OpenError> {
    connection
        .query_row("SELECT COALESCE(MAX(id), 0) FROM entries", [], |row| row.get::<_, i64>(0))
        .map(|id| id.max(0) as u64)
        .map_err(|source| OpenError::Unreadable { path: PathBuf::from(crate::journal::FILE_NAME), source })
}
