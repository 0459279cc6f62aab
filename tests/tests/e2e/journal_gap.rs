//! Writes never slow a call: while another process holds the journal's write lock (a real
//! `BEGIN EXCLUSIVE` from Python's sqlite3, as a slow or busy disk would), every call is still
//! answered; the entries that could not be written are counted in `/metrics`
//! (`hangar_journal_dropped_total`), and once the lock is released a `gap` entry says how many
//! were lost.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, poll};

use super::journal_audit::{entries, journal_of, wait_for};

const CONFIG: &str = r#"
tool_access: {mode: front_door}
audit: {arguments: full}
mcp_servers:
  math: {command: ["{fake}", "--tools", "add,echo"]}
"#;

/// Another process holding the database's write lock until dropped.
struct Locker(Child);

impl Locker {
    fn hold(path: &std::path::Path) -> Locker {
        let script = "import sqlite3, sys\n\
            db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)\n\
            db.execute('BEGIN EXCLUSIVE')\n\
            print('locked', flush=True)\n\
            sys.stdin.read()\n\
            db.execute('COMMIT')\n";
        let mut child = Command::new("python3")
            .args(["-c", script])
            .arg(path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "locked");
        Locker(child)
    }
}

impl Drop for Locker {
    fn drop(&mut self) {
        if let Some(mut stdin) = self.0.stdin.take() {
            let _ = stdin.flush();
        }
        let _ = self.0.wait();
    }
}

fn metric(hangar: &Hangar, name: &str) -> u64 {
    let text = hangar.metrics();
    let line = text.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{text}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

fn calls_numbered(all: &[Value]) -> Vec<u64> {
    all.iter().filter(|e| e["kind"] == "audit").filter_map(|e| e["arguments"]["n"].as_u64()).collect()
}

#[test]
fn a_locked_journal_drops_counts_and_marks_the_gap_and_calls_go_on() {
    let hangar = Hangar::start(CONFIG);
    let journal = journal_of(&hangar);
    assert_eq!(hangar.tool("add", json!({"a": 1, "b": 2, "n": 0}))["isError"], false);
    wait_for(&journal, "the first call's entry", |all| calls_numbered(all).contains(&0).then_some(()));
    assert_eq!(metric(&hangar, "hangar_journal_dropped_total"), 0);
    let written = metric(&hangar, "hangar_journal_entries_total");
    assert!(written > 0, "the first call's entry is counted");

    const LOCKED_CALLS: u64 = 20;
    let locker = Locker::hold(&journal);
    for n in 1..=LOCKED_CALLS {
        let result = hangar.tool("add", json!({"a": n, "b": 1, "n": n}));
        assert_eq!(result["isError"], false, "call {n} answered while the journal is locked: {result}");
    }
    let dropped = poll("the locked calls' entries counted as dropped", Duration::from_secs(20), || {
        let dropped = metric(&hangar, "hangar_journal_dropped_total");
        (dropped >= LOCKED_CALLS).then_some(dropped)
    });
    drop(locker);

    let gap = wait_for(&journal, "the gap entry", |all| all.iter().find(|e| e["kind"] == "gap").cloned());
    assert_eq!(gap["dropped"], json!(dropped), "the gap counts what /metrics counted: {gap}");
    assert_eq!(metric(&hangar, "hangar_journal_dropped_total"), dropped, "nothing more was dropped");
    assert_eq!(hangar.tool("add", json!({"a": 1, "b": 1, "n": 99}))["isError"], false);
    let all =
        wait_for(&journal, "a call after the lock", |all| calls_numbered(all).contains(&99).then(|| all.to_vec()));
    let numbered = calls_numbered(&all);
    assert!(numbered.iter().all(|n| !(1..=LOCKED_CALLS).contains(n)), "the locked calls are the gap: {numbered:?}");
    assert!(entries(&journal).iter().filter(|e| e["kind"] == "gap").count() == 1);
    assert!(hangar.log().contains("journal entries dropped"), "the drop is logged");
}
