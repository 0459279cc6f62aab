//! The key of the upstream credentials the hangar stores (`credentials.key_file`), and the
//! caller's own connections (`/api/credentials`):
//! - the key is made 0600 in `state_dir` when none is named, and a key file anyone else may read,
//!   or one in a directory boxes need, is refused at start naming its key (exit 78);
//! - from inside a strict box, the key file is not there, by name or through its directory, and
//!   a sandbox whose grants cover its directory is refused;
//! - a reload reads the key file again (a rotation) and refuses one that is not fit, or another
//!   file, keeping the running one;
//! - a caller lists only its own connections and forgets only its own.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, supervisor_exit};

use crate::box_fences::outside_tmp;
use crate::sandbox::{assert_refused, attempt};

/// 32 random-looking bytes in base64, as `head -c 32 /dev/urandom | base64` writes them.
fn a_key(seed: u8) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode([seed; 32])
}

/// A key file at `path`, with `mode`.
fn key_file(path: &Path, text: &str, mode: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The supervisor started on `config` (written beside it) only to be refused: its exit code and
/// stderr.
fn refused_at_start(dir: &Path, config: &str) -> (Option<i32>, String) {
    let path = dir.join("hangar.yaml");
    std::fs::write(&path, config).unwrap();
    let socket = dir.join("supervisor.sock");
    supervisor_exit(&[OsStr::new("--config"), path.as_os_str(), OsStr::new("--socket"), socket.as_os_str()], &[])
}

#[test]
fn the_default_key_is_made_for_the_hangars_user_alone_and_no_one_has_a_connection_yet() {
    let hangar = Hangar::start("mcp_servers: {}\n");
    let key = hangar.path("state").join("credentials.key");
    let key = if key.exists() { key } else { find_key(&hangar) };
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", key.display());
    let text = std::fs::read_to_string(&key).unwrap();
    assert_eq!(text.trim().len(), 44, "one key of 32 bytes in base64: {text:?}");

    let listed = hangar.get("/api/credentials");
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert_eq!(listed.body, json!({"credentials": []}));
    let forgot = hangar.delete("/api/credentials/linear");
    assert_eq!(forgot.status, 404, "{}", forgot.text);
    assert!(forgot.text.contains("no connection to `linear`"), "{}", forgot.text);
    // The key is nowhere the hangar speaks.
    hangar.assert_no_body_contains(text.trim());
    assert!(!hangar.log().contains(text.trim()), "the key is in the hangar's log");
}

/// The default key file, wherever the harness put the state directory.
fn find_key(hangar: &Hangar) -> std::path::PathBuf {
    let log = hangar.log();
    let line = log.lines().find(|line| line.contains("stored credentials open")).unwrap_or_else(|| panic!("{log}"));
    let at = line.find("key_file=").unwrap_or_else(|| panic!("{line}")) + "key_file=".len();
    std::path::PathBuf::from(line[at..].split_whitespace().next().unwrap().trim_matches('"'))
}

#[test]
fn a_key_file_others_may_read_or_in_a_shared_directory_is_refused_at_start_naming_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("keys").join("credentials.key");
    let config = format!("credentials: {{key_file: \"{}\"}}\nmcp_servers: {{}}\n", key.display());

    key_file(&key, &a_key(1), 0o644);
    let (code, stderr) = refused_at_start(dir.path(), &config);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("credentials.key_file") && stderr.contains("chmod 600"), "{stderr}");

    key_file(&key, "not a key\n", 0o600);
    let (code, stderr) = refused_at_start(dir.path(), &config);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("line 1 of the key file is not base64"), "{stderr}");
    assert!(!stderr.contains("not a key"), "the key file's text is not echoed: {stderr}");

    // A key directly in a directory every box needs (/var): refused before anything is read.
    let (code, stderr) =
        refused_at_start(dir.path(), "credentials: {key_file: /var/credentials.key}\nmcp_servers: {}\n");
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("credentials.key_file") && stderr.contains("directory of its own"), "{stderr}");
}

#[test]
fn the_key_file_is_hidden_from_a_box_and_a_grant_over_its_directory_is_refused() {
    let keys = outside_tmp("/var/tmp");
    let key = keys.path().join("hangar").join("credentials.key");
    let secret_key = a_key(7);
    key_file(&key, &secret_key, 0o600);
    let config = format!(
        r#"
credentials: {{key_file: "{key}"}}
mcp_servers:
  boxed:
    command: ["/usr/bin/python3", "{{fixtures}}/box_probe.py"]
    sandbox: strict
"#,
        key = key.display()
    );
    let hangar = Hangar::start(&config);
    let at = key.display().to_string();
    // The attacker inside the box: by name, by content, and its directory listed.
    assert_refused(&attempt(&hangar, "boxed", "stat", json!({"path": at})), &["ENOENT"], "the key file, by name");
    let read = attempt(&hangar, "boxed", "grep_file", json!({"path": at, "needle": secret_key}));
    assert_ne!(read["found"], true, "the box read the key");
    let dir = key.parent().unwrap().display().to_string();
    let listed = attempt(&hangar, "boxed", "list_dir", json!({"path": dir}));
    assert!(listed["ok"] == false || listed["entries"] == json!([]), "{listed}");
    // Through the supervisor's own root, where it is not hidden.
    let through = format!("/proc/{}/root{at}", hangar.pid());
    let read = attempt(&hangar, "boxed", "grep_file", json!({"path": through, "needle": secret_key}));
    assert_ne!(read["found"], true, "the box read the key through /proc");

    // A grant over its directory: refused at reload, the running config stays.
    let written = std::fs::read_to_string(hangar.path("hangar.yaml")).unwrap();
    let covering = written.replace(
        "sandbox: strict",
        &format!("sandbox: {{preset: strict, filesystem: {{read: [/usr, /lib, \"{}\"]}}}}", keys.path().display()),
    );
    std::fs::write(hangar.path("hangar.yaml"), &covering).unwrap();
    let reload = hangar.post("/api/config/reload", None);
    assert_ne!(reload.status, 200, "a grant over the key's directory was reloaded: {}", reload.text);
    assert!(reload.text.contains("credentials.key_file's directory"), "{}", reload.text);
}

#[test]
fn a_reload_reads_the_key_file_again_and_refuses_one_unfit_or_moved() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("keys").join("credentials.key");
    key_file(&key, &a_key(1), 0o600);
    let config = format!("credentials: {{key_file: \"{}\"}}\nmcp_servers: {{}}\n", key.display());
    let hangar = Hangar::start(&config);

    // A rotation: a new key first, the old one after.
    key_file(&key, &format!("{}\n{}\n", a_key(2), a_key(1)), 0o600);
    let reload = hangar.post("/api/config/reload", None);
    assert_eq!(reload.status, 200, "{}", reload.text);

    key_file(&key, &a_key(2), 0o664);
    let reload = hangar.post("/api/config/reload", None);
    assert_eq!(reload.status, 400, "{}", reload.text);
    assert!(reload.text.contains("chmod 600"), "{}", reload.text);

    key_file(&key, &a_key(2), 0o600);
    let moved = dir.path().join("keys").join("other.key");
    key_file(&moved, &a_key(3), 0o600);
    std::fs::write(hangar.path("hangar.yaml"), config.replace("credentials.key", "other.key")).unwrap();
    let reload = hangar.post("/api/config/reload", None);
    assert_eq!(reload.status, 400, "{}", reload.text);
    assert!(reload.text.contains("changes only with a restart"), "{}", reload.text);
    let body: Value = hangar.get("/api/credentials").body;
    assert_eq!(body, json!({"credentials": []}), "the hangar still answers");
}
