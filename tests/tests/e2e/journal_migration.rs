//! A journal written by an earlier schema is migrated at start. Here, one as the release before
//! blocks left it (version 1: one `entries` row per entry, with an index on `at_ms`): the
//! supervisor stops, its journal is rewritten in that shape, and the next supervisor finds every
//! old entry readable on `/api/audit`, charted with the new calls (the per-minute counts are
//! built from the old rows), and writes on in compressed blocks (schema 4) beside the old ones,
//! which stay as they were migrated (text).

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, poll};
use nix::sys::signal::Signal;

use super::journal_audit::{entries, journal_of, wait_for};

const CONFIG: &str = r#"
tool_access: {mode: front_door}
mcp_servers:
  math: {command: ["{fake}", "--tools", "echo"]}
"#;

/// Schema 1, as that release created it.
const VERSION_1: &str = "CREATE TABLE entries (
        id INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL, kind TEXT NOT NULL, mcp_server TEXT,
        identity TEXT, outcome TEXT, error_type TEXT, body TEXT NOT NULL);
    CREATE INDEX entries_at ON entries(at_ms);
    CREATE TABLE servers (mcp_server TEXT PRIMARY KEY, config_hash TEXT NOT NULL, lifecycle TEXT,
        catalog TEXT, updated_at_ms INTEGER NOT NULL);";

fn schema_of(journal: &std::path::Path) -> (u32, Vec<String>) {
    let db = rusqlite::Connection::open_with_flags(journal, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let version = db.pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
    let mut names =
        db.prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'index') ORDER BY name").unwrap();
    let names = names.query_map([], |row| row.get(0)).unwrap().map(Result::unwrap).collect();
    (version, names)
}

fn calls_charted(hangar: &Hangar) -> u64 {
    let rates: Value = hangar.get("/api/audit/rates?minutes=5").body;
    rates["minutes"].as_array().unwrap_or_else(|| panic!("{rates}")).iter().map(|m| m["calls"].as_u64().unwrap()).sum()
}

fn table_names(names: &[String]) -> Vec<&str> {
    names.iter().map(String::as_str).filter(|n| !n.starts_with("sqlite_")).collect()
}

#[test]
fn a_version_1_journal_becomes_blocks_and_keeps_every_entry_readable_and_charted() {
    let hangar = Hangar::start(CONFIG);
    for n in 0..3 {
        assert_eq!(hangar.tool("echo", json!({"text": format!("before {n}")}))["isError"], false);
    }
    let journal = journal_of(&hangar);
    wait_for(&journal, "three audited calls", |all| {
        (all.iter().filter(|e| e["kind"] == "audit").count() == 3).then_some(())
    });
    let (version, names) = schema_of(&journal);
    assert_eq!(
        (version, table_names(&names)),
        (5, vec!["blocks", "credentials", "minutes", "servers"]),
        "a new journal is at schema 5"
    );

    // Stopped, and its journal rewritten as the release before blocks would have left it.
    let migrated = std::cell::Cell::new(0);
    let hangar = hangar.restart_after(Signal::SIGTERM, &[], |_| {
        let old = entries(&journal);
        migrated.set(old.len());
        assert!(old.iter().filter(|e| e["kind"] == "audit").count() == 3, "{old:?}");
        for file in ["journal.sqlite", "journal.sqlite-wal", "journal.sqlite-shm"] {
            let _ = std::fs::remove_file(journal.with_file_name(file));
        }
        let db = rusqlite::Connection::open(&journal).unwrap();
        db.execute_batch(VERSION_1).unwrap();
        for entry in &old {
            // The time as that release kept it, ms since the epoch (SQLite reads RFC 3339).
            db.execute(
                "INSERT INTO entries (id, at_ms, kind, mcp_server, identity, outcome, body)
                 VALUES (?1, CAST(ROUND((julianday(?2) - 2440587.5) * 86400000) AS INTEGER), ?3, ?4, ?5, ?6, ?7)",
                rusqlite::params![
                    entry["id"].as_i64().unwrap(),
                    entry["at"].as_str().unwrap(),
                    entry["kind"].as_str().unwrap(),
                    entry["mcp_server"].as_str().or(entry["mcp_server_id"].as_str()),
                    entry["identity"].as_str(),
                    entry["outcome"].as_str(),
                    // Its keys sorted, not as that release wrote them (`id` first): a reader
                    // must not depend on where the id stands.
                    entry.to_string(),
                ],
            )
            .unwrap();
        }
        db.pragma_update(None, "user_version", 1).unwrap();
        let (version, names) = schema_of(&journal);
        assert_eq!((version, table_names(&names)), (1, vec!["entries", "entries_at", "servers"]));
    });
    let (version, names) = schema_of(&journal);
    assert_eq!(
        (version, table_names(&names)),
        (5, vec!["blocks", "credentials", "minutes", "servers"]),
        "migrated at start"
    );

    assert_eq!(hangar.tool("echo", json!({"text": "after"}))["isError"], false);
    let audit = poll("the four calls on /api/audit", std::time::Duration::from_secs(10), || {
        let page: Value = hangar.get("/api/audit?limit=100").body;
        let entries = page["entries"].as_array()?.clone();
        (entries.len() == 4).then_some(entries)
    });
    let texts: Vec<&str> = audit.iter().map(|e| e["tool"].as_str().unwrap_or_default()).collect();
    assert_eq!(texts, ["echo"; 4], "{audit:?}");
    poll("the four calls charted", std::time::Duration::from_secs(10), || (calls_charted(&hangar) == 4).then_some(()));
    // The new call's block, once the writer has it: compressed, and the migrated ones as they were.
    let stored = poll("the new call's block written", std::time::Duration::from_secs(10), || {
        let db = rusqlite::Connection::open_with_flags(&journal, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
        let stored: Vec<String> = db
            .prepare("SELECT typeof(body) FROM blocks ORDER BY first_id")
            .ok()?
            .query_map([], |row| row.get(0))
            .ok()?
            .collect::<Result<_, _>>()
            .ok()?;
        (stored.len() > migrated.get()).then_some(stored)
    });
    let (old, new) = stored.split_at(migrated.get());
    assert!(old.len() >= 3 && old.iter().all(|t| t == "text"), "the migrated entries stay as they were: {stored:?}");
    assert!(new.iter().all(|t| t == "blob"), "new blocks are compressed: {stored:?}");
}
