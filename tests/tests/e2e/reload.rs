//! Config reload (SIGHUP and `POST /api/config/reload`): added servers appear, removed ones
//! stop, changed ones restart, unchanged ones keep running (same pid), and a bad new config is
//! refused while the running one stays.

use std::time::Duration;

use hangar_tests::serde_json::json;
use hangar_tests::{Hangar, alive, poll, read_pid};

const BEFORE: &str = r#"
mcp_servers:
  keep:
    command: ["{fake}", "--tools", "add", "--pid-file", "{dir}/keep.pid"]
  change:
    command: ["{fake}", "--tools", "add", "--pid-file", "{dir}/change.pid"]
  remove:
    command: ["{fake}", "--tools", "add", "--pid-file", "{dir}/remove.pid"]
"#;

const AFTER: &str = r#"
mcp_servers:
  keep:
    command: ["{fake}", "--tools", "add", "--pid-file", "{dir}/keep.pid"]
  change:
    command: ["{fake}", "--tools", "add,echo", "--pid-file", "{dir}/change.pid"]
  added:
    command: ["{fake}", "--tools", "echo"]
"#;

pub(crate) fn write_config(hangar: &Hangar, yaml: &str) {
    let yaml = yaml
        .replace("{fake}", &hangar_tests::bin("hangar-upstream-fake").display().to_string())
        .replace("{dir}", &hangar.dir.path().display().to_string());
    std::fs::write(hangar.path("hangar.yaml"), yaml).unwrap();
}

fn start_all(hangar: &Hangar) -> [u32; 3] {
    for id in ["keep", "change", "remove"] {
        hangar.tool_ok("hangar_start", json!({"mcp_server": id}));
    }
    ["keep.pid", "change.pid", "remove.pid"].map(|f| read_pid(&hangar.path(f)))
}

fn ids(hangar: &Hangar) -> Vec<String> {
    let listed = hangar.get("/api/mcp_servers").body;
    listed["mcp_servers"].as_array().unwrap().iter().map(|s| s["mcp_server_id"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn reload_over_rest_applies_the_difference_and_keeps_the_unchanged() {
    let hangar = Hangar::start(BEFORE);
    let [keep, change, remove] = start_all(&hangar);
    std::fs::remove_file(hangar.path("change.pid")).unwrap();
    write_config(&hangar, AFTER);
    let reloaded = hangar.post("/api/config/reload", None);
    assert_eq!(reloaded.status, 200, "{}", reloaded.text);
    assert_eq!(
        reloaded.body,
        json!({"added": ["added"], "removed": ["remove"], "changed": ["change"], "unchanged": ["keep"]})
    );
    assert_eq!(ids(&hangar), ["keep", "change", "added"]);
    assert_eq!(hangar.details("keep")["meta"]["pid"], json!(keep), "unchanged: same process");
    assert!(alive(keep));
    poll("the removed server's process to exit", Duration::from_secs(10), || (!alive(remove)).then_some(()));
    poll("the old `change` process to exit", Duration::from_secs(10), || (!alive(change)).then_some(()));
    let restarted = read_pid(&hangar.path("change.pid"));
    assert_ne!(restarted, change);
    let details = hangar.details("change");
    assert_eq!(
        (details["state"].as_str(), details["meta"]["pid"].as_u64()),
        (Some("ready"), Some(u64::from(restarted)))
    );
    assert_eq!(hangar.details("added")["state"], "cold");
    assert_eq!(hangar.get("/api/mcp_servers/remove").status, 404);
}

#[test]
fn sighup_reloads_and_a_bad_config_is_refused() {
    let hangar = Hangar::start(BEFORE);
    let [keep, ..] = start_all(&hangar);
    std::fs::write(hangar.path("hangar.yaml"), "mcp_servers:\n  keep:\n    comand: [x]\n").unwrap();
    let refused = hangar.post("/api/config/reload", None);
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(refused.body["error"]["message"].as_str().unwrap().contains("mcp_servers.keep.comand"), "{}", refused.text);
    assert_eq!(ids(&hangar), ["keep", "change", "remove"], "the running config stays");
    assert_eq!(hangar.details("keep")["meta"]["pid"], json!(keep));

    write_config(&hangar, AFTER);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(hangar.pid() as i32), nix::sys::signal::Signal::SIGHUP).unwrap();
    poll("SIGHUP to apply the new config", Duration::from_secs(10), || {
        (ids(&hangar) == ["keep", "change", "added"]).then_some(())
    });
    assert_eq!(hangar.details("keep")["meta"]["pid"], json!(keep));
}
