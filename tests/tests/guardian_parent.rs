//! A guardian kills only the hangar's processes, even when it first runs after its supervisor
//! died. Such a guardian has been handed to a subreaper above the hangar (a CI runner, a
//! terminal multiplexer, init), whose other children are not the hangar's. Before the
//! supervisor named itself to its guardians, such a guardian took its new parent for the
//! supervisor and killed every one of that parent's children. On a CI host whose init runs the
//! build, that killed the build.
//!
//! This is a test binary of its own because it makes its process a subreaper, the place a CI
//! runner stands.

use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::time::Duration;

use hangar_tests::{alive, bin, children_named, poll};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

#[test]
fn a_guardian_started_after_its_supervisor_died_spares_its_new_parents_children() {
    nix::sys::prctl::set_child_subreaper(true).expect("become a subreaper");
    let mut bystander = Command::new("sleep").arg("1000").spawn().expect("start a bystander");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log = dir.path().join("guardian.log");
    // The guardian's end of its socket; the supervisor's end is closed below: it died.
    let (guardian_end, supervisor_end) = std::os::unix::net::UnixStream::pair().expect("a socket pair");
    // A stand-in supervisor starts its guardian as the real one does (argv[0], the internal
    // argument, the log format, `PID:START` of itself) and exits before the guardian runs.
    let script = r#"start=$(cut -d' ' -f22 /proc/$$/stat); (sleep 0.3; exec -a hangar-guardian "$0" --internal-guardian human "$$:$start") & exit 0"#;
    let status = Command::new("bash")
        .args(["-c", script])
        .arg(bin("hangar-guardian"))
        .stdin(Stdio::from(OwnedFd::from(guardian_end)))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("the guardian's log"))
        .status()
        .expect("run the stand-in supervisor");
    assert!(status.success());
    drop(supervisor_end);
    let own = std::process::id();
    let guardian = poll("the guardian to be handed to this subreaper", Duration::from_secs(10), || {
        children_named(own, "--internal-guardian").first().copied()
    });
    let exited = poll("the guardian to exit", Duration::from_secs(10), || {
        match waitpid(Pid::from_raw(guardian as i32), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => None,
            other => Some(other),
        }
    });
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    let spared = alive(bystander.id());
    let _ = bystander.kill();
    let _ = bystander.wait();
    assert!(matches!(exited, Ok(WaitStatus::Exited(_, 0))), "the guardian ended {exited:?}; it said:\n{said}");
    assert!(spared, "the guardian killed its new parent's child; it said:\n{said}");
    assert!(said.contains("the supervisor was gone before this guardian ran"), "{said}");
}
