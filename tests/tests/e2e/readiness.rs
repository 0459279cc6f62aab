//! Readiness follows the supervisor's answers: a supervisor that is frozen (SIGSTOP) keeps its
//! socket open but answers nothing, and `/health/ready` must say so while `/health/live` stays
//! up; once it runs again, the hangar is ready and serves as before.

use std::time::Duration;

use hangar_tests::serde_json::json;
use hangar_tests::{Hangar, poll};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

const CONFIG: &str = r#"
mcp_servers:
  up:
    command: ["{fake}", "--tools", "echo"]
"#;

/// A stopped process, continued again when this is dropped, so that a failing test still lets
/// the harness stop the hangar.
struct Frozen(Pid);

impl Frozen {
    fn stop(pid: u32) -> Frozen {
        let pid = Pid::from_raw(i32::try_from(pid).expect("a pid"));
        kill(pid, Signal::SIGSTOP).expect("SIGSTOP the supervisor");
        Frozen(pid)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = kill(self.0, Signal::SIGCONT);
    }
}

#[test]
fn a_frozen_supervisor_makes_the_hangar_not_ready_until_it_runs_again() {
    let hangar = Hangar::start(CONFIG);
    assert_eq!(hangar.get("/health/ready").status, 200);

    let frozen = Frozen::stop(hangar.pid());
    let not_ready = poll("/health/ready to answer 503", Duration::from_secs(20), || {
        let ready = hangar.get("/health/ready");
        (ready.status == 503).then_some(ready)
    });
    assert_eq!(not_ready.body["status"], "not_ready");
    let reason = not_ready.body["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("supervisor has not answered for "), "{}", not_ready.text);
    assert_eq!(hangar.get("/health/live").status, 200, "the API itself is alive");

    drop(frozen);
    poll("/health/ready to answer 200 again", Duration::from_secs(20), || {
        (hangar.get("/health/ready").status == 200).then_some(())
    });
    assert_eq!(hangar.call("up", "echo", json!({"back": true})), Some(json!({"back": true})));
    let list = hangar.get("/api/mcp_servers");
    assert_eq!(list.status, 200, "{}", list.text);
}
