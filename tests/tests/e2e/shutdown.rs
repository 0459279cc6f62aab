//! SIGTERM stops every child and the supervisor exits 0; SIGKILL of the supervisor leaves no
//! child behind either (the parent-death signal and process groups).

use std::time::Duration;

use hangar_tests::{Hangar, alive, poll, read_pid, serde_json::json, sigkill};

const CONFIG: &str = r#"
mcp_servers:
  a:
    command: ["{fake}", "--pid-file", "{dir}/a.pid", "--spawn-grandchild", "{dir}/a-grandchild.pid"]
  b:
    command: ["{fake}", "--legacy", "--pid-file", "{dir}/b.pid"]
  hung:
    command: ["{fake}", "--pid-file", "{dir}/hung.pid", "--hang-flag", "{dir}/hang"]
"#;

fn start_all(hangar: &Hangar) -> Vec<u32> {
    for id in ["a", "b", "hung"] {
        hangar.tool_ok("hangar_start", json!({"mcp_server": id}));
    }
    // From now on `hung` ignores everything it reads, stdin closing included.
    std::fs::write(hangar.path("hang"), "").unwrap();
    ["a.pid", "a-grandchild.pid", "b.pid", "hung.pid"].iter().map(|f| read_pid(&hangar.path(f))).collect()
}

#[test]
fn sigterm_stops_every_child_and_exits_zero() {
    let mut hangar = Hangar::start(CONFIG);
    let pids = start_all(&hangar);
    assert!(pids.iter().all(|p| alive(*p)));
    let status = hangar.terminate();
    assert_eq!(status.code(), Some(0), "log:\n{}", hangar.log());
    for pid in pids {
        assert!(!alive(pid), "pid {pid} outlived a clean shutdown");
    }
    assert!(!hangar.socket.exists(), "the control socket is removed");
}

#[test]
fn sigkill_of_the_supervisor_leaves_no_child() {
    let mut hangar = Hangar::start(CONFIG);
    let pids = start_all(&hangar);
    sigkill(hangar.pid());
    for pid in pids {
        poll(&format!("pid {pid} to die with the supervisor"), Duration::from_secs(10), || (!alive(pid)).then_some(()));
    }
    hangar.terminate();
}
