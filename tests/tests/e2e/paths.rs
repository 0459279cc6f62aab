//! `--socket` never destroys what is at its path: only a stale socket (a socket file nobody
//! answers on) is replaced. A regular file (the config itself), a directory, a symlink, a FIFO
//! are refused with exit 73 and left exactly as they were; a live socket of another hangar is
//! refused with exit 69 and that hangar keeps serving. The socket's directory must be one no
//! other user can write to, the default `/tmp/hangar-$USER` included.

use std::ffi::OsStr;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use hangar_tests::{Background, bin, skip, supervisor_exit};
use nix::sys::stat::Mode;

const CONFIG: &str = "mcp_servers:\n  math:\n    command: [\"hangar-upstream-fake\"]\n";

/// Everything that identifies what is at a path, without following a symlink: a refusal must
/// leave all of it unchanged.
#[derive(Debug, PartialEq)]
struct Snapshot {
    ino: u64,
    mode: u32,
    len: u64,
    content: Option<Vec<u8>>,
    link: Option<PathBuf>,
}

fn snapshot(path: &Path) -> Snapshot {
    let meta = std::fs::symlink_metadata(path).unwrap();
    Snapshot {
        ino: meta.ino(),
        mode: meta.mode(),
        len: meta.len(),
        content: meta.is_file().then(|| std::fs::read(path).unwrap()),
        link: meta.file_type().is_symlink().then(|| std::fs::read_link(path).unwrap()),
    }
}

fn run(config: &Path, socket: &Path) -> (Option<i32>, String) {
    supervisor_exit(&[OsStr::new("--config"), config.as_os_str(), OsStr::new("--socket"), socket.as_os_str()], &[])
}

fn setup() -> (tempfile::TempDir, PathBuf) {
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("hangar.yaml");
    std::fs::write(&config, CONFIG).unwrap();
    (temp, config)
}

/// Runs the supervisor with `--socket target` and asserts it exits `code` naming the path and
/// `what`, with the target untouched.
fn assert_refused(config: &Path, target: &Path, code: i32, what: &str) {
    let before = snapshot(target);
    let (exit, stderr) = run(config, target);
    assert_eq!(exit, Some(code), "--socket {}: {stderr}", target.display());
    assert!(stderr.contains(&target.display().to_string()), "names the path: {stderr}");
    assert!(stderr.contains(what), "expected {what:?} in {stderr}");
    assert_eq!(snapshot(target), before, "{} was changed", target.display());
}

#[test]
fn the_config_file_and_other_regular_files_are_never_removed() {
    let (temp, config) = setup();
    assert_refused(&config, &config, 73, &format!("a regular file ({} bytes) is there", CONFIG.len()));
    assert_eq!(std::fs::read_to_string(&config).unwrap(), CONFIG);
    let other = temp.path().join("notes.txt");
    std::fs::write(&other, "keep me\n").unwrap();
    assert_refused(&config, &other, 73, "a regular file (8 bytes) is there");
}

#[test]
fn a_directory_a_symlink_and_a_fifo_are_refused_and_left_alone() {
    let (temp, config) = setup();
    let dir = temp.path().join("a-directory");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("inside"), "x").unwrap();
    assert_refused(&config, &dir, 73, "a directory is there");
    assert!(dir.join("inside").exists());

    let target = temp.path().join("target.txt");
    std::fs::write(&target, "pointed at\n").unwrap();
    let link = temp.path().join("link.sock");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert_refused(&config, &link, 73, &format!("a symlink (to {}) is there", target.display()));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "pointed at\n");
    // A symlink to a stale socket is a symlink too: judged without following it.
    let stale = temp.path().join("stale-target.sock");
    drop(UnixListener::bind(&stale).unwrap());
    let link_to_socket = temp.path().join("link-to-socket.sock");
    std::os::unix::fs::symlink(&stale, &link_to_socket).unwrap();
    assert_refused(&config, &link_to_socket, 73, "a symlink");
    assert!(std::fs::symlink_metadata(&stale).unwrap().file_type().is_socket());

    let fifo = temp.path().join("fifo");
    nix::unistd::mkfifo(&fifo, Mode::S_IRUSR | Mode::S_IWUSR).unwrap();
    assert_refused(&config, &fifo, 73, "a FIFO is there");
}

#[test]
fn a_live_socket_of_another_hangar_is_refused_with_69_and_keeps_serving() {
    let (temp, config) = setup();
    let socket = temp.path().join("live.sock");
    let args = ["--config", config.to_str().unwrap(), "--socket", socket.to_str().unwrap(), "--no-api", "--no-prober"];
    let mut first = Background::start(&bin("hangar-supervisor"), &args, "hangar-supervisor ready");
    assert_refused(&config, &socket, 69, "another supervisor is already serving");
    assert!(first.child.try_wait().unwrap().is_none(), "the first hangar still runs");
    UnixStream::connect(&socket).expect("the first hangar still answers on its socket");
}

#[test]
fn a_stale_socket_is_replaced_and_the_hangar_serves() {
    let (temp, config) = setup();
    let socket = temp.path().join("stale.sock");
    // Bound, then closed without removing the file: what a killed supervisor leaves.
    drop(UnixListener::bind(&socket).unwrap());
    let before = snapshot(&socket);
    assert!(UnixStream::connect(&socket).is_err(), "nobody answers on it");
    let args = ["--config", config.to_str().unwrap(), "--socket", socket.to_str().unwrap(), "--no-api", "--no-prober"];
    let mut hangar = Background::start(&bin("hangar-supervisor"), &args, "hangar-supervisor ready");
    assert!(hangar.child.try_wait().unwrap().is_none());
    // (The inode number may be reused at once, so the mode tells: the supervisor's is 0600.)
    assert_ne!(before.mode & 0o777, 0o600);
    assert_eq!(snapshot(&socket).mode & 0o777, 0o600, "the supervisor's own socket took its place");
    UnixStream::connect(&socket).expect("the new hangar answers");
}

#[test]
fn a_directory_others_can_write_to_is_refused() {
    let (temp, config) = setup();
    let open = temp.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let socket = open.join("supervisor.sock");
    let (exit, stderr) = run(&config, &socket);
    assert_eq!(exit, Some(73), "{stderr}");
    assert!(stderr.contains(&format!("its directory {} is writable by every user (mode 0777)", open.display())));
    assert!(!socket.exists(), "no socket was made there");

    if !nix::unistd::Uid::effective().is_root() && skip("the other-owner cases: chown needs root") {
        return;
    }
    let theirs = temp.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
    let nobody = nix::unistd::Uid::from_raw(65534);
    nix::unistd::chown(&theirs, Some(nobody), Some(nix::unistd::Gid::from_raw(65534))).unwrap();
    let socket = theirs.join("supervisor.sock");
    let (exit, stderr) = run(&config, &socket);
    assert_eq!(exit, Some(73), "{stderr}");
    assert!(stderr.contains(&format!("its directory {} is owned by uid 65534", theirs.display())), "{stderr}");
    assert!(!socket.exists());

    // The classic /tmp attack: another user made /tmp/hangar-$USER first. With no --socket and
    // no runtime directory, the default path leads there, and it is refused.
    let user = format!("hangar-test-{}", std::process::id());
    let planted = PathBuf::from(format!("/tmp/hangar-{user}"));
    std::fs::create_dir(&planted).unwrap();
    nix::unistd::chown(&planted, Some(nobody), None).unwrap();
    let (exit, stderr) = supervisor_exit(
        &[OsStr::new("--config"), config.as_os_str()],
        &[("USER", Some(&user)), ("RUNTIME_DIRECTORY", None), ("XDG_RUNTIME_DIR", None)],
    );
    let planted_socket = planted.join("supervisor.sock");
    let made = planted_socket.exists();
    std::fs::remove_dir_all(&planted).unwrap();
    assert_eq!(exit, Some(73), "{stderr}");
    assert!(stderr.contains(&format!("its directory {} is owned by uid 65534", planted.display())), "{stderr}");
    assert!(!made, "no socket was made in the planted directory");
}
