//! A dead server is told in one set of words wherever it is read: the `dead` object carries its
//! `note`, rendered once by hangar-core, and that note is the one `hangar_status` gives. The
//! status page shows that note as it came (`status_page.rs` checks it in a browser), so no
//! surface words a dead server its own way.

use std::time::Duration;

use hangar_core::record::DeadRecord;
use hangar_tests::serde_json::{self, Value, json};
use hangar_tests::{Hangar, poll, read_pid, sigkill};

#[test]
fn a_dead_object_carries_the_note_every_surface_gives() {
    let hangar = Hangar::start(
        r#"
mcp_servers:
  victim:
    command: ["{fake}", "--tools", "add", "--pid-file", "{dir}/victim.pid"]
"#,
    );
    hangar.tool_ok("hangar_start", json!({"mcp_server": "victim"}));
    sigkill(read_pid(&hangar.path("victim.pid")));
    let dead = poll("victim to read dead", Duration::from_secs(10), || {
        let details = hangar.details("victim");
        (details["state"] == "dead").then(|| details["dead"].clone())
    });

    let note = dead["note"].as_str().unwrap_or_else(|| panic!("the dead object carries its note: {dead}"));
    let record: DeadRecord = serde_json::from_value(dead.clone()).unwrap();
    assert_eq!(note, record.note(), "rendered by the one renderer");
    assert!(note.starts_with("Failed (crashed): a call after "), "{note}");
    assert!(note.ends_with("; its process was killed by SIGKILL"), "{note}");

    let status = hangar.tool_ok("hangar_status", json!({}));
    let entry = &status["mcp_servers"][0];
    assert_eq!(entry["note"], json!(note), "hangar_status says the same: {status}");
    let list = hangar.get("/api/mcp_servers").body;
    let summary: &Value = &list["mcp_servers"][0];
    assert_eq!((&summary["dead"], &entry["dead"]), (&dead, &dead), "one object everywhere");
}
