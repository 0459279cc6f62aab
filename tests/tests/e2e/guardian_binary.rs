//! The guardians are their own small binary, `hangar-guardian`, found beside the supervisor's and
//! opened once at start: an upgrade that removes or replaces the file while the hangar runs still
//! leaves it the guardian it came with (a killed guardian is replaced from the opened file), and a
//! hangar installed without it says so and runs on. `--guardian FILE` names another (the static
//! build installs ship, which maps no shared library), and one that is not there is refused at
//! start. Run by hand, the guardian only says what it is for.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use std::ffi::OsStr;

use hangar_tests::{alive, bin, children_named, poll, sigkill, supervisor_exit};

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

#[test]
fn the_guardian_named_by_its_flag_is_the_one_that_runs_and_one_that_is_not_there_is_refused() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("hangar.yaml"), "mcp_servers: {}\n").expect("write the config");
    let (config, socket) = (dir.path().join("hangar.yaml"), dir.path().join("s.sock"));
    let named = dir.path().join("elsewhere-guardian");
    std::fs::copy(bin("hangar-guardian"), &named).expect("copy the guardian");
    let mut supervisor = Command::new(bin("hangar-supervisor"))
        .arg("--config")
        .arg(&config)
        .arg("--socket")
        .arg(&socket)
        .args(["--no-api", "--no-prober"])
        .env("HANGAR_GUARDIAN", &named)
        .env("STATE_DIRECTORY", dir.path().join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the supervisor");
    let running = guardians(supervisor.id());
    let maps: Vec<String> =
        running.iter().map(|pid| std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default()).collect();
    sigkill(supervisor.id());
    let _ = supervisor.wait();
    for maps in &maps {
        assert!(maps.contains(&*named.to_string_lossy()), "the named binary runs: {maps}");
        if bin("hangar-guardian").to_string_lossy().contains("-musl/") {
            assert!(!maps.contains("libc.so"), "the static guardian maps no libc: {maps}");
        }
    }

    let missing = dir.path().join("no-such-guardian");
    let args = [OsStr::new("--config"), config.as_os_str(), OsStr::new("--socket"), socket.as_os_str()];
    let args = [&args[..], &[OsStr::new("--guardian"), missing.as_os_str()]].concat();
    let (code, stderr) = supervisor_exit(&args, &[]);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("--guardian") && stderr.contains("no-such-guardian"), "{stderr}");
}
