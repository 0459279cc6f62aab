//! A damaged journal is read around and said aloud, never a wall of 500s nor a silent fresh
//! start: a block overwritten with garbage (by sqlite, as a bad disk or a stray tool would) is
//! skipped by every read that spans it, a `gap` entry at its place saying so; the next start
//! checks the database and logs what was lost; an emptied journal file is logged as a warning
//! and marked by a `gap` entry every reader sees; a truncated one SQLite cannot open is refused
//! (73) naming the damage and how to recover it, and left byte for byte.

use std::ffi::OsStr;
use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, poll, supervisor_exit};
use nix::sys::signal::Signal;

use crate::events::EventStream;
use crate::journal_audit::journal_of;

const CONFIG: &str = r#"
tool_access: {mode: front_door}
audit: {arguments: full}
mcp_servers:
  math: {command: ["{fake}", "--tools", "echo"]}
"#;

/// The audit entries `GET /api/audit` answers (failing the test on any other status).
fn audit(hangar: &Hangar) -> Vec<Value> {
    let page = hangar.get("/api/audit?limit=100");
    assert_eq!(page.status, 200, "a read spanning a corrupt block still answers: {}", page.text);
    page.body["entries"].as_array().cloned().unwrap_or_default()
}

fn texts(entries: &[Value]) -> Vec<String> {
    entries.iter().filter_map(|e| e["arguments"]["text"].as_str().map(str::to_owned)).collect()
}

#[test]
fn a_corrupt_block_is_skipped_with_a_gap_that_says_so_and_the_next_start_reports_it() {
    let hangar = Hangar::start(CONFIG);
    for n in 0..3 {
        assert_eq!(hangar.tool("echo", json!({"text": format!("before {n}")}))["isError"], false);
    }
    let (first, last) = poll("the calls to be written", Duration::from_secs(10), || {
        let entries = audit(&hangar);
        let id = |text: &str| entries.iter().find(|e| e["arguments"]["text"] == text).and_then(|e| e["id"].as_u64());
        Some((id("before 0")?, id("before 2")?))
    });
    // Overwrite the bodies of the blocks that hold them with garbage.
    let journal = journal_of(&hangar);
    let db = rusqlite::Connection::open(&journal).unwrap();
    db.busy_timeout(Duration::from_secs(5)).unwrap();
    poll("the blocks to be written", Duration::from_secs(10), || {
        let holding = "SELECT COUNT(*) FROM blocks WHERE last_id >= ?1 AND first_id <= ?2";
        let blocks: i64 = db.query_row(holding, [first as i64, last as i64], |row| row.get(0)).unwrap();
        let written: i64 = db
            .query_row("SELECT COUNT(*) FROM blocks WHERE first_id <= ?1 AND last_id >= ?1", [last as i64], |r| {
                r.get(0)
            })
            .unwrap();
        (blocks >= 1 && written == 1).then_some(())
    });
    db.execute(
        "UPDATE blocks SET body = X'ffff0000deadbeef00112233' WHERE last_id >= ?1 AND first_id <= ?2",
        [first as i64, last as i64],
    )
    .unwrap();
    drop(db);
    for n in 0..2 {
        assert_eq!(hangar.tool("echo", json!({"text": format!("after {n}")}))["isError"], false);
    }
    let after = poll("the later calls to read back", Duration::from_secs(10), || {
        let texts = texts(&audit(&hangar));
        (texts.len() >= 2).then_some(texts)
    });
    assert!(after.iter().all(|t| t.starts_with("after")), "the corrupt block's entries are skipped: {after:?}");
    // A replay of the whole journal has the gap in the block's place, saying what happened.
    let stream = EventStream::open(&hangar, "?since=0", &[]);
    let seen = stream.until("the gap of the corrupt block", |e| e.kind == "gap");
    let gap = &seen.last().unwrap().data;
    assert!(gap["reason"].as_str().unwrap_or_default().contains("corrupt"), "{gap}");
    assert!(gap["dropped"].as_u64() >= Some(1), "{gap}");
    stream.close();
    // The next start checks the journal and says what was lost.
    let hangar = hangar.restart(Signal::SIGTERM, &[]);
    poll("the start's integrity report", Duration::from_secs(10), || {
        let log = hangar.log();
        (log.contains("corrupt journal block") && log.contains("their entries are lost")).then_some(())
    });
    assert_eq!(hangar.tool("echo", json!({"text": "still recording"}))["isError"], false);
}

#[test]
fn an_emptied_journal_file_is_said_aloud_and_marked_not_silently_started_afresh() {
    let hangar = Hangar::start(CONFIG);
    assert_eq!(hangar.tool("echo", json!({"text": "history"}))["isError"], false);
    poll("the call to be written", Duration::from_secs(10), || (!texts(&audit(&hangar)).is_empty()).then_some(()));
    let hangar = hangar.restart_after(Signal::SIGTERM, &[], |dir| {
        let state = dir.join("state");
        std::fs::OpenOptions::new().write(true).open(state.join("journal.sqlite")).unwrap().set_len(0).unwrap();
        for stale in ["journal.sqlite-wal", "journal.sqlite-shm"] {
            let _ = std::fs::remove_file(state.join(stale));
        }
    });
    poll("the warning about the empty journal", Duration::from_secs(10), || {
        hangar.log().contains("the journal file was empty").then_some(())
    });
    let stream = EventStream::open(&hangar, "?since=0", &[]);
    let seen = stream.until("the gap marking the lost history", |e| e.kind == "gap");
    let gap = &seen.last().unwrap().data;
    assert!(gap["reason"].as_str().unwrap_or_default().contains("empty"), "{gap}");
    stream.close();
}

#[test]
fn a_truncated_journal_is_refused_naming_the_damage_and_the_way_to_recover_it() {
    let hangar = Hangar::start(CONFIG);
    for n in 0..300_u64 {
        let text = format!("{n:04}-{}", crate::journal_bounds::noise(n, 1500));
        assert_eq!(hangar.tool("echo", json!({"text": text}))["isError"], false);
    }
    poll("the calls to be written", Duration::from_secs(10), || (texts(&audit(&hangar)).len() >= 100).then_some(()));
    let config = hangar.path("hangar.yaml");
    let state = hangar.path("state");
    let mut hangar = hangar;
    hangar.terminate();
    let path = state.join("journal.sqlite");
    // Everything into the main file first (as a clean close leaves it), then cut it in half.
    let db = rusqlite::Connection::open(&path).unwrap();
    db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
    drop(db);
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len > 200_000, "{len}");
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len / 2).unwrap();
    let cut = std::fs::read(&path).unwrap();
    let socket = state.with_extension("sock");
    let args = [OsStr::new("--config"), config.as_os_str(), OsStr::new("--socket"), socket.as_os_str()];
    let (code, stderr) = supervisor_exit(&args, &[("STATE_DIRECTORY", Some(state.to_str().unwrap()))]);
    assert_eq!(code, Some(73), "{stderr}");
    assert!(stderr.contains("malformed") && stderr.contains(".recover"), "names the damage and the way out: {stderr}");
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    assert_eq!(std::fs::read(&path).unwrap(), cut, "left byte for byte, for recovery");
    drop(hangar);
}

#[test]
fn a_damaged_page_costs_only_the_entries_in_it_and_the_start_reports_it() {
    let hangar = Hangar::start(&CONFIG.replace("{arguments: full}", "{arguments: full, max_argument_bytes: 1048576}"));
    assert_eq!(hangar.tool("echo", json!({"text": "small before"}))["isError"], false);
    poll("the first call to be written", Duration::from_secs(10), || (texts(&audit(&hangar)).len() == 1).then_some(()));
    // A block of its own, its body spread over many overflow pages.
    let big = crate::journal_bounds::noise(1, 400_000);
    assert_eq!(hangar.tool("echo", json!({"text": big}))["isError"], false);
    poll("the big call to be written", Duration::from_secs(10), || (texts(&audit(&hangar)).len() == 2).then_some(()));
    assert_eq!(hangar.tool("echo", json!({"text": "small after"}))["isError"], false);
    poll("the last call to be written", Duration::from_secs(10), || (texts(&audit(&hangar)).len() == 3).then_some(()));
    let hangar = hangar.restart_after(Signal::SIGTERM, &[], |dir| {
        use std::io::{Seek, SeekFrom, Write};
        let path = dir.join("state").join("journal.sqlite");
        let db = rusqlite::Connection::open(&path).unwrap();
        db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
        let page_size: u64 = db.pragma_query_value(None, "page_size", |row| row.get(0)).unwrap();
        let pages: u64 = db.pragma_query_value(None, "page_count", |row| row.get(0)).unwrap();
        drop(db);
        // The big body fills most of the file: a page in its middle is one of its overflow pages.
        let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.seek(SeekFrom::Start(pages / 2 * page_size)).unwrap();
        file.write_all(&vec![0; page_size as usize]).unwrap();
    });
    poll("the start's report of the damaged page", Duration::from_secs(10), || {
        hangar.log().contains("journal database is damaged").then_some(())
    });
    for query in ["/api/audit?limit=100", "/api/audit?since=0&limit=100"] {
        let page = hangar.get(query);
        assert_eq!(page.status, 200, "{query}: {}", page.text);
        let read = texts(page.body["entries"].as_array().unwrap());
        assert_eq!(read, ["small before", "small after"], "{query}: only the damaged block's entry is lost");
    }
}
