//! A config file the hangar must not take: a key given twice (anywhere), a FIFO, something too
//! large. At start it exits 78 naming the problem; on reload (SIGHUP and REST) it is refused,
//! the running servers keep their processes and config, and the supervisor keeps answering
//! while it refuses (reading a FIFO used to freeze it).

use std::ffi::OsStr;
use std::path::Path;
use std::time::Duration;

use hangar_tests::serde_json::json;
use hangar_tests::{Hangar, bin, poll, read_pid, supervisor_exit};
use nix::sys::signal::{Signal, kill};
use nix::sys::stat::Mode;
use nix::unistd::Pid;

const RUNNING: &str = r#"
mcp_servers:
  math:
    command: ["{fake}", "--tools", "add", "--pid-file", "{dir}/math.pid"]
  echo:
    command: ["{fake}", "--tools", "echo"]
"#;

/// `math` twice: the second would silently replace the first.
const DUPLICATE_SERVER: &str = "mcp_servers:
  math:
    command: [a]
  echo:
    command: [b]
  math:
    command: [c]
";

fn start_exit(config: &Path, socket: &Path) -> (Option<i32>, String) {
    supervisor_exit(&[OsStr::new("--config"), config.as_os_str(), OsStr::new("--socket"), socket.as_os_str()], &[])
}

#[test]
fn a_key_given_twice_anywhere_exits_78_naming_both_lines() {
    let temp = tempfile::tempdir().unwrap();
    let config = temp.path().join("hangar.yaml");
    let socket = temp.path().join("s.sock");
    let cases = [
        (DUPLICATE_SERVER, "mcp_servers.math: duplicate key `math` at line 6 (first at line 2) in mcp_servers"),
        ("mcp_servers: {}\nmcp_servers: {}\n", "mcp_servers: duplicate key `mcp_servers` at line 2 (first at line 1)"),
        ("mcp_servers:\n  m:\n    command: [a]\n    command: [b]\n", "at line 4 (first at line 3) in mcp_servers.m"),
        ("mcp_servers:\n  m:\n    command: [a]\n    env:\n      K: x\n      K: y\n", "at line 6 (first at line 5)"),
        ("mcp_servers:\n  m: {command: [a], env: {K: x, K: y}}\n", "mcp_servers.m.env.K: duplicate key `K` at line 2"),
        ("recovery:\n  max_retries: 1\n  max_retries: 2\n", "recovery.max_retries: duplicate key"),
    ];
    for (yaml, expected) in cases {
        std::fs::write(&config, yaml).unwrap();
        let (code, stderr) = start_exit(&config, &socket);
        assert_eq!(code, Some(78), "{yaml}\n{stderr}");
        assert!(stderr.contains(&config.display().to_string()), "names the file: {stderr}");
        assert!(stderr.contains(expected), "{yaml}: expected {expected:?} in {stderr}");
        assert!(!socket.exists(), "nothing was started");
    }
}

#[test]
fn a_config_that_is_not_a_regular_file_or_too_large_exits_78() {
    let temp = tempfile::tempdir().unwrap();
    let socket = temp.path().join("s.sock");
    let fifo = temp.path().join("fifo.yaml");
    nix::unistd::mkfifo(&fifo, Mode::S_IRUSR | Mode::S_IWUSR).unwrap();
    // With nobody writing, opening the FIFO the usual way would block the start forever.
    let (code, stderr) = start_exit(&fifo, &socket);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains(&format!("{}: cannot read the config: not a regular file (it is a FIFO)", fifo.display())));
    let (code, stderr) = start_exit(temp.path(), &socket);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("not a regular file (it is a directory)"), "{stderr}");
    let large = temp.path().join("large.yaml");
    std::fs::write(&large, oversize()).unwrap();
    let (code, stderr) = start_exit(&large, &socket);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("larger than the limit of 4 MiB"), "{stderr}");
    // A symlink to a regular file is fine (Kubernetes ConfigMaps are made of them): it starts.
    let real = temp.path().join("real.yaml");
    std::fs::write(&real, "mcp_servers: {}\n").unwrap();
    let link = temp.path().join("link.yaml");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let mut started = hangar_tests::Background::start(
        &bin("hangar-supervisor"),
        &["--config", link.to_str().unwrap(), "--socket", socket.to_str().unwrap(), "--no-api", "--no-prober"],
        "hangar-supervisor ready",
    );
    assert!(started.child.try_wait().unwrap().is_none());
}

/// 10 MiB of valid YAML (comments): refused for its size, not its content.
fn oversize() -> String {
    "# padding padding padding padding padding padding padding padding padding padding\n".repeat(128 * 1024)
}

fn rest_reload(hangar: &Hangar) -> hangar_tests::Response {
    hangar.post_raw("/api/config/reload", &[("Content-Type", "application/json")], b"{}")
}

/// The running config is untouched: the same servers, `math` still the same process and
/// answering, and the supervisor answering the API.
fn assert_running_config_stays(hangar: &Hangar, math_pid: u32) {
    let listed = hangar.get("/api/mcp_servers");
    assert_eq!(listed.status, 200, "{}", listed.text);
    let ids: Vec<_> =
        listed.body["mcp_servers"].as_array().unwrap().iter().map(|s| s["mcp_server_id"].clone()).collect();
    assert_eq!(ids, [json!("math"), json!("echo")]);
    assert_eq!(hangar.details("math")["meta"]["pid"], json!(math_pid));
    assert_eq!(hangar.call("math", "add", json!({"a": 1, "b": 2})), Some(json!({"result": 3})));
}

/// Sends SIGHUP and waits (bounded) for the supervisor to log its refusal, which must name `why`.
fn sighup_refused(hangar: &Hangar, why: &str) {
    let refusals =
        |log: &str| log.lines().filter(|l| l.contains("SIGHUP: reload refused")).map(str::to_owned).collect::<Vec<_>>();
    let before = refusals(&hangar.log()).len();
    kill(Pid::from_raw(hangar.pid() as i32), Signal::SIGHUP).unwrap();
    let refusal =
        poll("SIGHUP's refusal in the log", Duration::from_secs(10), || refusals(&hangar.log()).get(before).cloned());
    assert!(refusal.contains(why), "expected {why:?} in {refusal}");
}

#[test]
fn a_reload_with_a_duplicate_key_is_refused_and_the_running_config_stays() {
    let hangar = Hangar::start(RUNNING);
    hangar.tool_ok("hangar_start", json!({"mcp_server": "math"}));
    let math = read_pid(&hangar.path("math.pid"));
    std::fs::write(hangar.path("hangar.yaml"), DUPLICATE_SERVER).unwrap();

    let refused = rest_reload(&hangar);
    assert_eq!(refused.status, 400, "{}", refused.text);
    let message = refused.body["error"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("the running one stays"), "{message}");
    assert!(message.contains("duplicate key `math` at line 6 (first at line 2) in mcp_servers"), "{message}");
    assert_running_config_stays(&hangar, math);

    sighup_refused(&hangar, "duplicate key `math` at line 6 (first at line 2)");
    assert_running_config_stays(&hangar, math);
}

#[test]
fn a_fifo_or_an_oversize_config_is_refused_on_reload_while_the_supervisor_keeps_answering() {
    let hangar = Hangar::start(RUNNING);
    hangar.tool_ok("hangar_start", json!({"mcp_server": "math"}));
    let math = read_pid(&hangar.path("math.pid"));
    let config = hangar.path("hangar.yaml");
    std::fs::remove_file(&config).unwrap();
    // Nobody ever writes to it: reading it the usual way blocks for good.
    nix::unistd::mkfifo(&config, Mode::S_IRUSR | Mode::S_IWUSR).unwrap();
    let not_regular = format!("{}: cannot read the config: not a regular file (it is a FIFO)", config.display());

    sighup_refused(&hangar, &not_regular);
    assert_running_config_stays(&hangar, math);
    let refused = rest_reload(&hangar);
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(refused.text.contains(&not_regular), "{}", refused.text);
    assert_running_config_stays(&hangar, math);

    std::fs::remove_file(&config).unwrap();
    std::fs::write(&config, oversize()).unwrap();
    let refused = rest_reload(&hangar);
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert!(refused.text.contains("larger than the limit of 4 MiB"), "{}", refused.text);
    sighup_refused(&hangar, "larger than the limit of 4 MiB");
    assert_running_config_stays(&hangar, math);
}
