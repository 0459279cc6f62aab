//! The state directory: made 0700, held by one supervisor at a time (a second one on the same
//! directory is refused, 69), and a journal the hangar cannot read (not a database: 73) or that a
//! newer hangar wrote (78) is refused naming the file and left exactly as it was.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use hangar_tests::{Hangar, supervisor_exit};

/// Runs a supervisor on `config` with its state in `state`, expecting it to exit.
fn exit_on(config: &Path, state: &Path) -> (Option<i32>, String) {
    let socket = state.with_extension("sock");
    let args = [OsStr::new("--config"), config.as_os_str(), OsStr::new("--socket"), socket.as_os_str()];
    supervisor_exit(&args, &[("STATE_DIRECTORY", Some(state.to_str().unwrap()))])
}

/// A temp dir with a config and an empty state directory: (temp, config, state).
fn prepared_state() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("hangar.yaml");
    std::fs::write(&config, "mcp_servers: {}\n").unwrap();
    let state = temp.path().join("state");
    std::fs::create_dir(&state).unwrap();
    (temp, config, state)
}

#[test]
fn the_state_dir_is_private_and_a_second_supervisor_on_it_is_refused() {
    let hangar = Hangar::start("mcp_servers: {}\n");
    let state = hangar.path("state");
    assert_eq!(std::fs::metadata(&state).unwrap().permissions().mode() & 0o777, 0o700);
    let (code, stderr) = exit_on(&hangar.path("hangar.yaml"), &state);
    assert_eq!(code, Some(69), "{stderr}");
    assert!(stderr.contains(&state.display().to_string()) && stderr.contains("in use"), "{stderr}");
    assert_eq!(hangar.get("/health/ready").status, 200, "the first one is untouched");
}

#[test]
fn an_unreadable_journal_exits_73_and_is_left_as_it_was() {
    let (_temp, config, state) = prepared_state();
    let journal = state.join("journal.sqlite");
    let garbage: Vec<u8> = (0..8192u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    std::fs::write(&journal, &garbage).unwrap();
    let (code, stderr) = exit_on(&config, &state);
    assert_eq!(code, Some(73), "{stderr}");
    assert!(stderr.contains(&journal.display().to_string()), "names the file: {stderr}");
    assert_eq!(std::fs::read(&journal).unwrap(), garbage, "left byte for byte");
}

#[test]
fn a_journal_from_a_newer_hangar_exits_78_and_is_left_as_it_was() {
    let (_temp, config, state) = prepared_state();
    let journal = state.join("journal.sqlite");
    {
        let db = rusqlite::Connection::open(&journal).unwrap();
        db.execute_batch("CREATE TABLE future (x); INSERT INTO future VALUES (1); PRAGMA user_version = 99;").unwrap();
    }
    let before = std::fs::read(&journal).unwrap();
    let (code, stderr) = exit_on(&config, &state);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains(&journal.display().to_string()) && stderr.contains("99"), "{stderr}");
    assert_eq!(std::fs::read(&journal).unwrap(), before, "left byte for byte");
}
