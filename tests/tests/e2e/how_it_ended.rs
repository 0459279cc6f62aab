//! A dead server's record says how its process ended, in the hangar's words, the same on every
//! surface (REST, MCP, the `hangar` CLI): an upstream the hangar killed because it closed its
//! stdout reads as the hangar's doing and why, never as a bare "killed by SIGKILL" as if someone
//! else had done it; an exit and a stranger's SIGKILL read as what they were.

use std::process::{Command, Stdio};
use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, SENTINEL, alive, bin, poll, read_pid, sigkill};

const CONFIG: &str = r#"
mcp_servers:
  closer:
    command: ["{fake}", "--tools", "add", "--close-stdout-after", "1", "--pid-file", "{dir}/closer.pid"]
  crasher:
    command: ["{fake}", "--tools", "add", "--crash-after", "1"]
  victim:
    command: ["{fake}", "--tools", "add", "--pid-file", "{dir}/victim.pid"]
"#;

const EXPECTED: [(&str, &str); 3] = [
    ("closer", "its process closed its stdout, so the hangar killed it (SIGKILL)"),
    ("crasher", "its process exited with code 101"),
    ("victim", "its process was killed by SIGKILL"),
];

#[test]
fn each_dead_record_says_how_its_process_ended_and_who_ended_it() {
    let hangar = Hangar::start(CONFIG);
    for id in ["closer", "crasher", "victim"] {
        hangar.tool_ok("hangar_start", json!({"mcp_server": id}));
    }
    let closer = read_pid(&hangar.path("closer.pid"));
    // Their first call is answered; then `closer` closes its stdout and keeps running (until the
    // hangar kills it), and `crasher` exits with code 101.
    for id in ["closer", "crasher"] {
        assert_eq!(hangar.call(id, "add", json!({"a": 1, "b": 2})), Some(json!({"result": 3})), "{id}");
    }
    sigkill(read_pid(&hangar.path("victim.pid")));
    for (id, _) in EXPECTED {
        poll(&format!("{id} to read dead"), Duration::from_secs(10), || {
            (hangar.details(id)["state"] == "dead").then_some(())
        });
    }
    poll("the upstream that closed its stdout to be killed", Duration::from_secs(10), || {
        (!alive(closer)).then_some(())
    });

    let status = hangar.tool_ok("hangar_status", json!({}));
    let listed = hangar.get("/api/mcp_servers").body;
    let mcp_listed = hangar.tool_ok("hangar_list", json!({}));
    let table = hangar_status(&hangar.base);
    for (id, detail) in EXPECTED {
        let dead = hangar.details(id)["dead"].clone();
        assert_eq!(dead["reason"], "crashed", "{id}: {dead}");
        assert_eq!(dead["detail"], detail, "{id}: {dead}");
        // The very same object on every surface.
        let surfaces = [
            ("GET /api/mcp_servers", entry(&listed, "mcp_server_id", id)["dead"].clone()),
            ("hangar_details", hangar.tool_ok("hangar_details", json!({"mcp_server": id}))["dead"].clone()),
            ("hangar_list", entry(&mcp_listed, "mcp_server_id", id)["dead"].clone()),
            ("hangar_status", entry(&status, "id", id)["dead"].clone()),
        ];
        for (surface, object) in &surfaces {
            assert_eq!(object, &dead, "{id}: {surface}");
        }
        let note = entry(&status, "id", id)["note"].as_str().unwrap().to_owned();
        assert!(note.starts_with("Failed (crashed): ") && note.ends_with(&format!("; {detail}")), "{id}: {note}");
        let row = table.lines().find(|line| line.starts_with(id)).unwrap_or_else(|| panic!("{id} in:\n{table}"));
        assert!(row.ends_with(&format!("; {detail}")), "hangar status, {id}: {row}");
    }
    hangar.assert_no_body_contains(SENTINEL);
}

pub fn entry(list: &Value, key: &str, id: &str) -> Value {
    list["mcp_servers"].as_array().unwrap().iter().find(|s| s[key] == id).cloned().unwrap_or(Value::Null)
}

/// `hangar status` against the hangar's API: its table.
pub fn hangar_status(url: &str) -> String {
    let output = Command::new(bin("hangar"))
        .args(["--url", url, "status"])
        .env_remove("HANGAR_URL")
        .env_remove("HANGAR_API_KEY")
        .stdin(Stdio::null())
        .output()
        .expect("run hangar");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}
