//! Who may talk to the supervisor, and what never reaches a log.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

use hangar_core::ipc::PROTOCOL_VERSION;
use hangar_tests::serde_json::json;
use hangar_tests::{Hangar, poll, skip};

#[test]
fn env_values_are_redacted_from_the_upstream_log() {
    let hangar = Hangar::start(
        r#"
mcp_servers:
  leaky:
    command: ["sh", "-c", "echo using token $SECRET_TOKEN >&2; exec \"$0\" --tools add", "{fake}"]
    env: {SECRET_TOKEN: sk-test-0123456789}
"#,
    );
    hangar.tool_ok("hangar_start", json!({"mcp_server": "leaky"}));
    let logs = poll("the upstream's line in its log", Duration::from_secs(10), || {
        let logs = hangar.get("/api/mcp_servers/leaky/logs?lines=100");
        logs.text.contains("using token").then_some(logs.text)
    });
    assert!(logs.contains("using token [redacted]"), "{logs}");
    assert!(!logs.contains("sk-test-0123456789"));
    assert!(!hangar.log().contains("sk-test-0123456789"), "nor the hangar's own log");
}

#[test]
fn the_control_socket_is_private_and_refuses_other_users() {
    let hangar = Hangar::start("mcp_servers: {}\n");
    let mode = std::fs::metadata(&hangar.socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "created owner-only");
    // A system Python another user may run (not one under root's home).
    let python = "/usr/bin/python3";
    if (!nix::unistd::Uid::effective().is_root()
        || Command::new("setpriv").arg("--version").output().is_err()
        || !std::path::Path::new(python).exists())
        && skip(&format!("the other-user check needs root, setpriv and {python}"))
    {
        return;
    }
    // Even with the file (and its directory) opened up, another uid is turned away by its
    // credentials.
    std::fs::set_permissions(hangar.dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    std::fs::set_permissions(&hangar.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let output = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", HELLO_CLIENT])
        .arg(&hangar.socket)
        .arg(PROTOCOL_VERSION.to_string())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    assert_eq!(said.trim(), "closed", "stderr: {}", String::from_utf8_lossy(&output.stderr));
    assert!(hangar.log().contains("is not the supervisor's"), "the refusal is logged");
    assert_eq!(hangar.get("/health/ready").status, 200, "the hangar's own API is unaffected");
}

/// A Python client that says hello as the API (in the control protocol of `argv[2]`, proving the
/// control key beside the socket if it can read it) as whatever user runs it, and prints whether
/// it was greeted (`answered`), refused with a reason (`refused`), or cut off (`closed`).
const HELLO_CLIENT: &str = r#"
import json, socket, sys
hello = {"hello": {"protocol": int(sys.argv[2]), "role": "api", "version": "0"}}
try:
    hello["hello"]["key"] = open(sys.argv[1] + ".key").read().strip()
except OSError:
    pass
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(10)
try:
    s.sendall(json.dumps(hello).encode() + b"\n")
    said = s.recv(4096)
    print("answered" if b'"hello"' in said else "refused" if said else "closed")
except (BrokenPipeError, ConnectionResetError):
    print("closed")
"#;

#[test]
fn a_socket_group_admits_its_members_and_no_one_else() {
    // A gid nobody on the machine uses: only the peers the test puts in it are members.
    const GROUP: u32 = 4242;
    let hangar = Hangar::start_with("mcp_servers: {}\n", &["--socket-group", &GROUP.to_string()]);
    let meta = std::fs::metadata(&hangar.socket).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o660, "group-writable");
    assert_eq!(std::os::unix::fs::MetadataExt::gid(&meta), GROUP, "owned by the group");
    // Its members read the control key, which they prove in their hello.
    let key = std::fs::metadata(format!("{}.key", hangar.socket.display())).unwrap();
    assert_eq!(key.permissions().mode() & 0o777, 0o640, "group-readable");
    assert_eq!(std::os::unix::fs::MetadataExt::gid(&key), GROUP, "the key is the group's");
    let python = "/usr/bin/python3";
    if (!nix::unistd::Uid::effective().is_root()
        || Command::new("setpriv").arg("--version").output().is_err()
        || !std::path::Path::new(python).exists())
        && skip(&format!("the other-user checks need root, setpriv and {python}"))
    {
        return;
    }
    // The test's temp directory is 0700; the peer must be able to reach the socket inside it.
    std::fs::set_permissions(hangar.dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let as_nobody = |gid: u32, groups: &str| {
        let output = Command::new("setpriv")
            .args(["--reuid=65534", &format!("--regid={gid}"), groups, python, "-c", HELLO_CLIENT])
            .arg(&hangar.socket)
            .arg(PROTOCOL_VERSION.to_string())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        (said, String::from_utf8_lossy(&output.stderr).into_owned())
    };

    // In the group as a supplementary group only (its primary gid is 65534): served.
    let (said, stderr) = as_nobody(65534, &format!("--groups={GROUP}"));
    assert_eq!(said, "answered", "stderr: {stderr}\nlog:\n{}", hangar.log());
    // As its primary group, with no supplementary ones: served.
    let (said, stderr) = as_nobody(GROUP, "--clear-groups");
    assert_eq!(said, "answered", "stderr: {stderr}\nlog:\n{}", hangar.log());
    assert!(!hangar.log().contains("control connection refused"), "{}", hangar.log());

    // The same uid outside the group: the file lets it connect (its mode is opened up here), but
    // its credentials do not.
    std::fs::set_permissions(&hangar.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (said, stderr) = as_nobody(65534, "--clear-groups");
    assert_eq!(said, "closed", "stderr: {stderr}");
    let log = hangar.log();
    assert!(log.contains("is not the supervisor's") && log.contains("not in --socket-group 4242"), "{log}");
    assert_eq!(hangar.get("/health/ready").status, 200, "the hangar's own API is unaffected");
}

#[test]
fn an_unknown_socket_group_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("hangar.yaml");
    std::fs::write(&config, "mcp_servers: {}\n").unwrap();
    let output = Command::new(hangar_tests::bin("hangar-supervisor"))
        .arg("--config")
        .arg(&config)
        .arg("--socket")
        .arg(dir.path().join("supervisor.sock"))
        .args(["--no-api", "--no-prober", "--socket-group", "no-such-group-hangar"])
        .env("STATE_DIRECTORY", dir.path().join("state"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(78), "stderr: {stderr}");
    assert!(stderr.contains("no-such-group-hangar") && stderr.contains("no such group"), "{stderr}");
    assert!(!dir.path().join("supervisor.sock").exists(), "no socket was made");
}
