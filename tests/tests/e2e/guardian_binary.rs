//! The guardians are their own small binary, `hangar-guardian`, found beside the supervisor's and
//! opened once at start: an upgrade that removes or replaces the file while the hangar runs still
//! leaves it the guardian it came with (a killed guardian is replaced from the opened file), and a
//! hangar installed without it says so and runs on. Run by hand, the guardian only says what it
//! is for.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hangar_tests::{alive, bin, children_named, poll, sigkill};

const WITHIN: Duration = Duration::from_secs(10);

/// Copies of the supervisor (and, if `with_guardian`, the guardian) in `dir`, the supervisor
/// started from there without helpers.
fn start_copied(dir: &Path, with_guardian: bool) -> Child {
    let mut names = vec!["hangar-supervisor"];
    if with_guardian {
        names.push("hangar-guardian");
    }
    for name in names {
        std::fs::copy(bin(name), dir.join(name)).expect("copy a binary");
    }
    std::fs::write(dir.join("hangar.yaml"), "mcp_servers: {}\n").expect("write the config");
    Command::new(dir.join("hangar-supervisor"))
        .arg("--config")
        .arg(dir.join("hangar.yaml"))
        .arg("--socket")
        .arg(dir.join("s.sock"))
        .args(["--no-api", "--no-prober"])
        .env("STATE_DIRECTORY", dir.join("state"))
        .env("HANGAR_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("log")).expect("the log"))
        .spawn()
        .expect("start the copied supervisor")
}

fn guardians(supervisor: u32) -> Vec<u32> {
    poll("two guardians", WITHIN, || {
        let found = children_named(supervisor, "--internal-guardian");
        (found.len() == 2).then_some(found)
    })
}

#[test]
fn a_guardian_binary_removed_after_start_still_replaces_a_killed_guardian() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut supervisor = start_copied(dir.path(), true);
    let first = guardians(supervisor.id());
    std::fs::remove_file(dir.path().join("hangar-guardian")).expect("remove the guardian binary");
    sigkill(first[0]);
    let replaced = poll("a replacement guardian", WITHIN, || {
        let found = guardians(supervisor.id());
        (!found.contains(&first[0])).then_some(found)
    });
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", replaced[0])).unwrap_or_default();
    sigkill(supervisor.id());
    let _ = supervisor.wait();
    for pid in first.iter().chain(&replaced) {
        poll("the guardians to exit with their supervisor", WITHIN, || (!alive(*pid)).then_some(()));
    }
    assert_eq!(comm.trim(), "hangar-guardian");
}

#[test]
fn a_hangar_without_its_guardian_binary_says_so_and_runs_on() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut supervisor = start_copied(dir.path(), false);
    let log = poll("the supervisor to be ready", WITHIN, || {
        let log = std::fs::read_to_string(dir.path().join("log")).unwrap_or_default();
        log.contains("supervisor ready").then_some(log)
    });
    let guardians = children_named(supervisor.id(), "--internal-guardian");
    sigkill(supervisor.id());
    let _ = supervisor.wait();
    assert!(guardians.is_empty(), "{guardians:?}");
    assert!(log.contains("cannot start the guardians") && log.contains("hangar-guardian"), "{log}");
}

#[test]
fn the_guardian_run_by_hand_says_what_it_is_for() {
    let output = Command::new(bin("hangar-guardian")).stdin(Stdio::null()).output().expect("run hangar-guardian");
    assert_eq!(output.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&output.stderr).contains("started by hangar-supervisor only"));
}
