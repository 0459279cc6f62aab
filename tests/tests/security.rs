//! Who may talk to the supervisor, and what never reaches a log.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

use hangar_tests::serde_json::json;
use hangar_tests::{Hangar, poll};

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
    if !nix::unistd::Uid::effective().is_root()
        || Command::new("setpriv").arg("--version").output().is_err()
        || !std::path::Path::new(python).exists()
    {
        eprintln!("skipping the other-user check: needs root, setpriv and {python}");
        return;
    }
    // Even with the file (and its directory) opened up, another uid is turned away by its
    // credentials.
    std::fs::set_permissions(hangar.dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    std::fs::set_permissions(&hangar.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let client = r#"
import json, socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(10)
try:
    s.sendall(json.dumps({"hello": {"protocol": 1, "role": "intruder", "version": "0"}}).encode() + b"\n")
    print("answered" if s.recv(4096) else "closed")
except (BrokenPipeError, ConnectionResetError):
    print("closed")
"#;
    let output = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", client])
        .arg(&hangar.socket)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    assert_eq!(said.trim(), "closed", "stderr: {}", String::from_utf8_lossy(&output.stderr));
    assert!(hangar.log().contains("is not the supervisor's"), "the refusal is logged");
    assert_eq!(hangar.get("/health/ready").status, 200, "the hangar's own API is unaffected");
}
