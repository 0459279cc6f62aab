//! Without cgroups (`--kill-mode subreaper`), a descendant that sheds every mark of its upstream
//! still goes with a SIGKILLed supervisor: an upstream's child double-forks, so what it leaves is
//! orphaned to the supervisor; that orphan leaves the upstream's process group (`setsid`) and
//! execs with an empty environment (`env -i`, so it loses the `HANGAR_UPSTREAM` marker), several
//! times in quick succession. The supervisor is SIGKILLed before any sweep of its own could
//! adopt or kill them: it is held stopped (SIGSTOP) from before they are born, so the test does
//! not depend on when its next sweep would have come. Its guardians, which look at the
//! supervisor's children every 100 ms, must know them anyway, and kill them all.

use std::time::{Duration, Instant};

use hangar_tests::serde_json::json;
use hangar_tests::{Frozen, Hangar, alive, children_named, poll, read_pid, sigkill};

/// How many escapers the upstream's child makes, one right after the other.
const ESCAPERS: usize = 5;

/// An upstream whose child waits for `{dir}/go`, then double-forks [`ESCAPERS`] times: each
/// grandchild, orphaned at once, leaves the process group, clears its environment, writes its
/// pid and execs a long sleep.
const CONFIG: &str = r#"
mcp_servers:
  escaper:
    command: ["sh", "-c", "(until [ -e {dir}/go ]; do sleep 0.02; done; for i in 1 2 3 4 5; do ( setsid env -i /bin/sh -c 'echo $$ > {dir}/escaper.'$i'.tmp; mv {dir}/escaper.'$i'.tmp {dir}/escaper.'$i'; exec sleep 1000' & ); done) & exec {fake} --tools add --pid-file {dir}/escaper.pid"]
"#;

const WITHIN: Duration = Duration::from_secs(10);

#[test]
fn orphans_that_clear_their_environment_and_leave_the_group_die_with_a_sigkilled_supervisor() {
    let hangar = Hangar::start_with(CONFIG, &["--kill-mode", "subreaper"]);
    let supervisor = hangar.pid();
    poll("two guardians", WITHIN, || (children_named(supervisor, "--internal-guardian").len() == 2).then_some(()));
    hangar.tool_ok("hangar_start", json!({"mcp_server": "escaper"}));
    let upstream = read_pid(&hangar.path("escaper.pid"));

    // No sweep of the supervisor's own from here on: only what its guardians know counts.
    let frozen = Frozen::stop(supervisor);
    std::fs::write(hangar.path("go"), "").unwrap();
    let escapers: Vec<u32> = (1..=ESCAPERS).map(|i| read_pid(&hangar.path(&format!("escaper.{i}")))).collect();
    // Each is in place: the supervisor's child (orphaned), the leader of a session of its own,
    // and a long sleep with no marker in its environment.
    poll("every escaper to be orphaned, out of the group and unmarked", WITHIN, || {
        escapers.iter().all(|pid| escaped(*pid, supervisor)).then_some(())
    });
    // The guardians say when they have recorded a new child of the supervisor. Waited for (the
    // window that remains is one look, 100 ms), but not required: without the record the
    // supervisor is SIGKILLed all the same, and whether the escapers survive is the verdict.
    let recorded = wait_until(WITHIN, || escapers.iter().all(|pid| recorded_by_a_guardian(&hangar.log(), *pid)));
    sigkill(supervisor);
    drop(frozen);

    let deadline = Instant::now() + WITHIN;
    while escapers.iter().any(|pid| alive(*pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survivors: Vec<u32> = escapers.iter().copied().filter(|pid| alive(*pid)).collect();
    for pid in &survivors {
        sigkill(*pid);
    }
    assert!(
        survivors.is_empty(),
        "{} of {ESCAPERS} escapers outlived the SIGKILLed supervisor (pids {survivors:?}; the guardians \
         recorded them: {recorded}); log:\n{}",
        survivors.len(),
        hangar.log()
    );
    assert!(!alive(upstream), "the upstream outlived the SIGKILLed supervisor");
}

/// Whether `pid` is a long sleep, a child of `supervisor`, leading its own session, with no
/// `HANGAR_UPSTREAM` in its environment.
fn escaped(pid: u32, supervisor: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    let Some((head, rest)) = stat.rsplit_once(") ") else { return false };
    // After the name: state ppid pgrp session.
    let fields: Vec<&str> = rest.split(' ').collect();
    let (ppid, session) = (fields.get(1).copied(), fields.get(3).copied());
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    head.ends_with("(sleep")
        && ppid == Some(supervisor.to_string().as_str())
        && session == Some(pid.to_string().as_str())
        && !String::from_utf8_lossy(&environ).contains("HANGAR_UPSTREAM")
}

/// Whether a guardian logged that it recorded `pid` as a child of the supervisor.
fn recorded_by_a_guardian(log: &str, pid: u32) -> bool {
    let field = format!("pid={pid}");
    log.lines()
        .filter(|line| line.contains("recorded a new child of the supervisor"))
        .any(|line| line.split_whitespace().any(|word| word == field))
}

/// Polls `check` every 20 ms for at most `limit`; whether it came true.
fn wait_until(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
