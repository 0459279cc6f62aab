//! What a server's next life should know, kept in the `servers` table: its last lifecycle (the
//! dead record and backoff streak) and its last known catalog, both tied to the hash of the
//! config they were learned under.

use std::collections::HashMap;

use rusqlite::{Connection, Transaction, params};

/// One server's memory, as saved. `lifecycle` and `catalog` are JSON, owned by the server
/// module; the journal only stores them.
#[derive(Debug, Clone, PartialEq)]
pub struct Remembered {
    pub mcp_server: String,
    pub config_hash: String,
    pub lifecycle: Option<String>,
    pub catalog: Option<String>,
    pub updated_at_ms: i64,
}

impl Remembered {
    pub(super) fn save(&self, tx: &Transaction) -> rusqlite::Result<()> {
        tx.prepare_cached(
            "INSERT INTO servers (mcp_server, config_hash, lifecycle, catalog, updated_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT(mcp_server) DO UPDATE SET config_hash = ?2, lifecycle = ?3, catalog = ?4, updated_at_ms = ?5",
        )?
        .execute(params![
            self.mcp_server,
            self.config_hash,
            self.lifecycle,
            self.catalog,
            self.updated_at_ms
        ])?;
        Ok(())
    }
}

pub(super) fn recall(connection: &Connection) -> rusqlite::Result<HashMap<String, Remembered>> {
    let mut select =
        connection.prepare("SELECT mcp_server, config_hash, lifecycle, catalog, updated_at_ms FROM servers")?;
    let rows = select.query_map([], |row| {
        Ok(Remembered {
            mcp_server: row.get(0)?,
            config_hash: row.get(1)?,
            lifecycle: row.get(2)?,
            catalog: row.get(3)?,
            updated_at_ms: row.get(4)?,
        })
    })?;
    rows.map(|row| row.map(|memory| (memory.mcp_server.clone(), memory))).collect()
}
