//! The journal's bounds hold as it grows, fairly: a non-admin's flood of big calls with
//! `audit.arguments: full` keeps the file within `journal.max_mb` while it lasts (not at the next
//! hourly prune), each entry's arguments are cut at `audit.max_argument_bytes`, and pruning by
//! size takes arguments before any entry, so the admin's older calls are all still there. A
//! corrupt block is skipped by readers with a `gap` marker that says so, a damaged database is
//! reported at start, and an empty journal file is said aloud.

use std::path::Path;
use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, key_hash, poll};

use crate::journal_audit::{entries, journal_of};
use crate::tasks::mcp;

const ADMIN: &str = "admin-key-0123456789";
const DEV: &str = "dev-key-0123456789";

/// Hex that lz4 cannot shrink much (an LCG's), `len` digits, different for every `seed`.
pub(crate) fn noise(seed: u64, len: usize) -> String {
    let mut state = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    (0..len)
        .map(|_| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            format!("{:x}", state >> 60)
        })
        .collect()
}

/// The bytes the database's pages hold, free pages not counted (as `journal.max_mb` counts).
fn used_bytes(path: &Path) -> u64 {
    let db = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let pragma = |name: &str| db.pragma_query_value(None, name, |row| row.get::<_, i64>(0)).unwrap();
    ((pragma("page_count") - pragma("freelist_count")) * pragma("page_size")) as u64
}

#[test]
fn a_flood_of_big_calls_keeps_the_journal_within_max_mb_and_takes_no_one_s_calls() {
    let hangar = Hangar::start(&format!(
        r#"
auth:
  api_keys:
    - {{name: boss, hash: "{admin}"}}
    - {{name: dev, hash: "{dev}", profile: dev}}
profiles:
  dev: {{servers: [math]}}
tool_access: {{mode: front_door}}
journal: {{max_mb: 1}}
audit: {{arguments: full}}
mcp_servers:
  math: {{command: ["{{fake}}", "--tools", "echo"]}}
"#,
        admin = key_hash(ADMIN),
        dev = key_hash(DEV)
    ));
    let journal = journal_of(&hangar);
    let echo = |key: &str, text: String| {
        let (status, answer) =
            mcp(&hangar.base, key, "tools/call", json!({"name": "echo", "arguments": {"text": text}}), false);
        assert_eq!(status, 200, "{answer}");
    };
    for n in 0..3 {
        echo(ADMIN, format!("the admin's call {n}"));
    }
    // About 3 MB of arguments, in 8 KB calls: past the cap whether or not they are cut.
    for n in 0..400 {
        echo(DEV, noise(n, 8000));
    }
    let cap = 1024 * 1024;
    let used = poll("the journal to be within max_mb", Duration::from_secs(10), || {
        let all = entries(&journal);
        let flood_written = all.iter().filter(|e| e["identity"] == "dev").count() >= 400;
        let used = used_bytes(&journal);
        (flood_written && used <= cap).then_some(used)
    });
    assert!(used <= cap, "{used}");
    let all = entries(&journal);
    let admin: Vec<&Value> = all.iter().filter(|e| e["kind"] == "audit" && e["identity"] == "boss").collect();
    assert_eq!(admin.len(), 3, "none of the admin's older calls vanished while the dev's newer ones stay");
    let dev: Vec<&Value> = all.iter().filter(|e| e["kind"] == "audit" && e["identity"] == "dev").collect();
    assert_eq!(dev.len(), 400, "and none of the dev's: arguments went first");
    let newest = dev.last().unwrap()["arguments"].as_str().unwrap_or_default().to_owned();
    assert!(newest.contains("[cut: ") && newest.len() < 4200, "each entry's arguments are cut at 4 KiB: {newest:.100}");
    assert!(dev[0]["arguments"] == json!("[pruned: journal.max_mb]"), "the oldest arguments went first: {}", dev[0]);
}
