//! The call that was running when its upstream died (issue 29, section 9). When an upstream is
//! killed mid-call (by a signal, or by the kernel for its memory), the failed call's error says
//! how it ended, in the words of the server's dead record, and that record already reads `dead`
//! when the answer is sent: a REST read made right after the answer (no poll) shows it.

use std::time::Duration;

use hangar_tests::serde_json::json;
use hangar_tests::{Hangar, poll, sigkill};

const SLEEPER: &str = r#"
mcp_servers:
  sleeper:
    command: ["{fake}", "--tools", "sleep,echo"]
"#;

/// The sandbox probe under `memory_mb: 256` (as in `sandbox_limits`).
const HOG: &str = r#"
mcp_servers:
  hog:
    command: ["/usr/bin/python3", "{fixtures}/sandbox_probe.py"]
    sandbox: {memory_mb: 256, filesystem: {write: ["/var/tmp"], private: false}, syscalls: none}
"#;

fn pid_of(hangar: &Hangar, id: &str) -> u32 {
    let details = hangar.details(id);
    details["meta"]["pid"].as_u64().unwrap_or_else(|| panic!("{id} has a pid: {details}")) as u32
}

#[test]
fn a_call_whose_upstream_is_killed_says_so_and_the_server_already_reads_dead() {
    let hangar = Hangar::start(SLEEPER);
    hangar.tool_ok("hangar_start", json!({"mcp_server": "sleeper"}));
    let pid = pid_of(&hangar, "sleeper");
    let (error_type, error) = std::thread::scope(|scope| {
        let call = scope.spawn(|| hangar.call_error("sleeper", "sleep", json!({"ms": 60_000})));
        poll("the sleep to be in flight", Duration::from_secs(10), || {
            (hangar.details("sleeper")["health"]["total_invocations"] == 1).then_some(())
        });
        sigkill(pid);
        call.join().unwrap()
    });
    // Read at once: the answer came after the record changed, not before.
    let details = hangar.details("sleeper");
    assert_eq!(details["state"], "dead", "{details}");
    assert_eq!(details["dead"]["detail"], "its process was killed by SIGKILL", "{details}");
    assert_eq!(error_type, "upstream_died", "{error}");
    assert_eq!(error, "`sleeper` died during tool `sleep` (crashed); its process was killed by SIGKILL");
}

#[test]
fn a_call_that_runs_its_upstream_out_of_memory_says_so() {
    let hangar = Hangar::start(HOG);
    hangar.tool_ok("hangar_start", json!({"mcp_server": "hog"}));
    let enforced = hangar.details("hog")["sandbox"]["in_effect"]["enforced"].to_string();
    assert!(enforced.contains("memory_mb: 256 (cgroup v"), "a group holds the limit: {enforced}");
    // 2 GiB, each page touched: far past 256 MiB.
    let (error_type, error) = hangar.call_error("hog", "allocate", json!({"mb": 2048}));
    let details = hangar.details("hog");
    assert_eq!(details["state"], "dead", "{details}");
    assert_eq!(error_type, "upstream_died", "{error}");
    assert_eq!(
        error,
        "`hog` died during tool `allocate` (crashed); its process ran out of memory (memory_mb: 256), \
         so the kernel killed it (SIGKILL)"
    );
}
