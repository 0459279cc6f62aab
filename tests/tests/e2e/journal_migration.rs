//! A journal written by the previous schema (version 1: `entries` with an index on `at_ms`) is
//! migrated at start: the index goes (schema 2: time ranges are found by id), every entry stays
//! readable, and the chart still counts the old calls with the new ones (its minutes are found
//! by a binary search over the ids, no longer by the index).

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, poll};
use nix::sys::signal::Signal;

use super::journal_audit::{journal_of, wait_for};

const CONFIG: &str = r#"
tool_access: {mode: front_door}
mcp_servers:
  math: {command: ["{fake}", "--tools", "echo"]}
"#;

fn schema_of(journal: &std::path::Path) -> (u32, i64) {
    let db = rusqlite::Connection::open_with_flags(journal, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let version = db.pragma_query_value(None, "user_version", |row| row.get(0)).unwrap();
    let index = db
        .query_row("SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = 'entries_at'", [], |row| {
            row.get(0)
        })
        .unwrap();
    (version, index)
}

fn calls_charted(hangar: &Hangar) -> u64 {
    let rates: Value = hangar.get("/api/audit/rates?minutes=5").body;
    rates["minutes"].as_array().unwrap_or_else(|| panic!("{rates}")).iter().map(|m| m["calls"].as_u64().unwrap()).sum()
}

#[test]
fn a_version_1_journal_loses_its_time_index_and_keeps_every_entry_readable_and_charted() {
    let hangar = Hangar::start(CONFIG);
    for n in 0..3 {
        assert_eq!(hangar.tool("echo", json!({"text": format!("before {n}")}))["isError"], false);
    }
    let journal = journal_of(&hangar);
    wait_for(&journal, "three audited calls", |all| {
        (all.iter().filter(|e| e["kind"] == "audit").count() == 3).then_some(())
    });
    assert_eq!(schema_of(&journal), (2, 0), "a new journal is at schema 2, with no time index");

    // As the previous release left it: schema 1, with its index on `at_ms` (the version is read
    // only at start, so the running supervisor keeps writing its entries meanwhile).
    {
        let db = rusqlite::Connection::open(&journal).unwrap();
        db.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
        db.execute_batch("CREATE INDEX entries_at ON entries(at_ms); PRAGMA user_version = 1;").unwrap();
    }
    assert_eq!(schema_of(&journal), (1, 1));
    let hangar = hangar.restart(Signal::SIGTERM, &[]);
    assert_eq!(schema_of(&journal), (2, 0), "migrated at start");

    assert_eq!(hangar.tool("echo", json!({"text": "after"}))["isError"], false);
    let audit = poll("the four calls on /api/audit", std::time::Duration::from_secs(10), || {
        let page: Value = hangar.get("/api/audit?limit=100").body;
        let entries = page["entries"].as_array()?.clone();
        (entries.len() == 4).then_some(entries)
    });
    let texts: Vec<&str> = audit.iter().map(|e| e["tool"].as_str().unwrap_or_default()).collect();
    assert_eq!(texts, ["echo"; 4], "{audit:?}");
    assert_eq!(calls_charted(&hangar), 4, "the old calls are charted with the new");
}
