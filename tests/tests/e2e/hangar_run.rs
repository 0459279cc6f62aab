//! `hangar run -- <tests>`: a test suite's hangar. A Python suite (the `mcp` package's client)
//! and a Node suite (the TypeScript SDK's) find the hangar only through the variables it
//! exports, with `auth` configured (the run's own key) and without. The command's exit status
//! is the run's; SIGINT reaches the command; a server that does not become ready stops the run
//! before the command (exit 69, its dead reason and log tail, a JUnit report); `--keep` keeps the
//! audit trail, the logs and the journal. After every run, even one SIGKILLed mid-command,
//! nothing is left: no process of its hangar or upstream in `/proc`, nothing listening on the
//! port it exported. Two runs at once both pass.
//!
//! Needs `scripts/setup-tools` (the venv's `mcp`) and `scripts/setup-clients` (the TS SDK).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use hangar_tests::serde_json::{self, Value};
use hangar_tests::{bin, key_hash, node, poll, python, repo_root};

const KEY: &str = "ci-run-0123456789abcdef";

/// A config in a directory of its own: `math` (the fake, marked by `mark` in its environment),
/// with `auth` (one key) or without, and `extra` servers.
fn config(dir: &Path, auth: bool, mark: &str, extra: &str) -> PathBuf {
    let auth = if auth {
        format!("auth:\n  api_keys:\n    - {{name: ci, hash: \"{}\"}}\n", key_hash(KEY))
    } else {
        String::new()
    };
    let yaml = format!(
        "tool_access: {{mode: front_door}}\n{auth}mcp_servers:\n  math:\n    command: [\"{}\", \"--tools\", \"add\"]\n    env: {{RUN_MARK: \"{mark}\"}}\n{extra}",
        bin("hangar-upstream-fake").display()
    );
    let path = dir.join("hangar.yaml");
    std::fs::write(&path, yaml).expect("write the config");
    path
}

fn hangar_run(config: &Path, args: &[&str], command: &[&str]) -> Command {
    let mut run = Command::new(bin("hangar"));
    run.arg("run").arg("--config").arg(config).args(args).arg("--").args(command);
    for name in ["HANGAR_URL", "HANGAR_API_KEY", "HANGAR_MCP_URL", "HANGAR_MCP_CONFIG"] {
        run.env_remove(name);
    }
    run.stdin(Stdio::null());
    run
}

fn output(mut command: Command) -> Output {
    command.output().expect("run hangar run")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn fixture(name: &str) -> String {
    repo_root().join("tests/fixtures").join(name).display().to_string()
}

/// The live processes whose command line or environment holds `needle`.
fn processes_holding(needle: &str) -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| hangar_tests::alive(*pid) && *pid != std::process::id())
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let holds = |bytes: &[u8]| bytes.windows(needle.len()).any(|w| w == needle.as_bytes());
            (holds(&cmdline) || holds(&environ)).then(|| (pid, text(&cmdline).replace('\0', " ")))
        })
        .collect()
}

/// Until nothing of a run is left: no process holding its directory or its upstream's mark,
/// and the port refusing connections.
fn nothing_left(run_dir: &str, mark: &str, port: u16, spare: &[u32]) {
    poll("the run's processes to be gone", Duration::from_secs(30), || {
        let left: Vec<_> = processes_holding(run_dir)
            .into_iter()
            .chain(processes_holding(mark))
            .filter(|(pid, _)| !spare.contains(pid))
            .collect();
        left.is_empty().then_some(())
    });
    poll("the port to refuse connections", Duration::from_secs(10), || {
        let refused = std::net::TcpStream::connect(("127.0.0.1", port))
            .is_err_and(|err| err.kind() == std::io::ErrorKind::ConnectionRefused);
        refused.then_some(())
    });
    assert!(!Path::new(run_dir).exists(), "the run's directory {run_dir} is gone");
}

fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().and_then(|port| port.trim_end_matches('/').parse().ok()).expect("a port")
}

/// A mark no other run's upstream carries.
fn mark() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("run-mark-{}-{n}", std::process::id())
}

#[test]
fn a_python_and_a_node_suite_use_what_it_exports_and_nothing_is_left() {
    let temp = tempfile::tempdir().expect("temp dir");
    for auth in [true, false] {
        let mark = mark();
        let config = config(temp.path(), auth, &mark, "");
        let seen = temp.path().join("seen.json");
        let script = format!(
            "{} {} > {} && {} {} && echo \"$HANGAR_URL $HANGAR_MCP_CONFIG\" >> {}",
            python().display(),
            fixture("run_suite.py"),
            seen.display(),
            node().display(),
            fixture("run_suite.mjs"),
            seen.display()
        );
        let ran = output(hangar_run(&config, &[], &["sh", "-c", &script]));
        assert!(ran.status.success(), "auth {auth}: {}\n{}", text(&ran.stderr), text(&ran.stdout));
        let lines = std::fs::read_to_string(&seen).expect("what the suite saw");
        let mut lines = lines.lines();
        let python_saw: Value = serde_json::from_str(lines.next().unwrap_or_default()).expect("JSON");
        assert_eq!(python_saw["sum"]["result"], 5, "{python_saw}");
        assert_eq!(python_saw["config_url"], python_saw["url"], "{python_saw}");
        assert_eq!(python_saw["config_auth"].is_string(), auth, "a key exactly when auth is configured: {python_saw}");
        assert!(text(&ran.stderr).contains("math: ready"), "{}", text(&ran.stderr));
        let (url, mcp_config) = lines.next().and_then(|l| l.split_once(' ')).expect("the variables");
        let run_dir = Path::new(mcp_config).parent().expect("the run's directory").display().to_string();
        nothing_left(&run_dir, &mark, port_of(url), &[]);
    }
}

#[test]
fn exit_codes_and_signals_pass_through() {
    let temp = tempfile::tempdir().expect("temp dir");
    let config = config(temp.path(), false, &mark(), "");
    let ran = output(hangar_run(&config, &[], &["sh", "-c", "exit 7"]));
    assert_eq!(ran.status.code(), Some(7), "{}", text(&ran.stderr));
    let ran = output(hangar_run(&config, &[], &["sh", "-c", "kill -TERM $$"]));
    assert_eq!(ran.status.code(), Some(128 + 15), "{}", text(&ran.stderr));

    // SIGINT to `hangar run` reaches the command, whose own exit status then ends the run.
    let started = temp.path().join("started");
    let script = format!("trap 'exit 42' INT; touch {}; while true; do sleep 0.1; done", started.display());
    let mut run = hangar_run(&config, &[], &["sh", "-c", &script]).stderr(Stdio::piped()).spawn().expect("run");
    poll("the command to start", Duration::from_secs(30), || started.exists().then_some(()));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(run.id() as i32), nix::sys::signal::Signal::SIGINT)
        .expect("SIGINT");
    let status = poll("the run to end", Duration::from_secs(30), || run.try_wait().ok().flatten());
    assert_eq!(status.code(), Some(42));
}

#[test]
fn a_server_that_is_not_ready_stops_the_run_before_the_command() {
    let temp = tempfile::tempdir().expect("temp dir");
    let broken = "  broken:\n    command: [\"sh\", \"-c\", \"echo 'no database at /nowhere' >&2; exit 3\"]\n";
    let config = config(temp.path(), true, &mark(), broken);
    let (junit, keep, ran_marker) = (temp.path().join("junit.xml"), temp.path().join("kept"), temp.path().join("ran"));
    let touch = format!("touch {}", ran_marker.display());
    let args = ["--junit", junit.to_str().unwrap_or(""), "--keep", keep.to_str().unwrap_or("")];
    let ran = output(hangar_run(&config, &args, &["sh", "-c", &touch]));
    let said = text(&ran.stderr);
    assert_eq!(ran.status.code(), Some(69), "{said}");
    assert!(!ran_marker.exists(), "the command never ran");
    assert!(said.contains("broken did not become ready: start_failed"), "{said}");
    assert!(said.contains("exited with code 3") && said.contains("| no database at /nowhere"), "{said}");
    let report = std::fs::read_to_string(&junit).expect("the JUnit report");
    assert!(report.contains(r#"tests="2" failures="1""#), "{report}");
    assert!(report.contains(r#"name="math""#) && report.contains(r#"<failure message="start_failed"#), "{report}");
    // What --keep keeps: the audit trail, each server's log, the journal.
    assert!(keep.join("journal/journal.sqlite").is_file());
    let log = std::fs::read_to_string(keep.join("logs/broken.log")).expect("broken's log");
    assert!(log.contains("no database at /nowhere"), "{log}");
    let audit = std::fs::read_to_string(keep.join("audit.jsonl")).expect("the audit trail");
    assert!(audit.lines().any(|line| line.contains("\"method\":\"start\"")), "{audit}");

    // Only the servers named with --server are started: without `broken`, the run goes on.
    let ran = output(hangar_run(&config, &["--server", "math"], &["sh", "-c", &touch]));
    assert!(ran.status.success(), "{}", text(&ran.stderr));
    assert!(ran_marker.exists());
    let ran = output(hangar_run(&config, &["--server", "nope"], &["true"]));
    assert_eq!(ran.status.code(), Some(64), "{}", text(&ran.stderr));
}

#[test]
fn a_run_killed_mid_command_leaves_nothing_and_two_runs_at_once_both_pass() {
    let temp = tempfile::tempdir().expect("temp dir");
    let mark = mark();
    let config = config(temp.path(), true, &mark, "");
    let seen = temp.path().join("seen");
    let script =
        format!("echo \"$HANGAR_URL $HANGAR_MCP_CONFIG\" > {}.tmp && mv {0}.tmp {0}; exec sleep 600", seen.display());
    let mut run = hangar_run(&config, &[], &["sh", "-c", &script]).stderr(Stdio::null()).spawn().expect("run");
    let line = poll("the command to start", Duration::from_secs(30), || std::fs::read_to_string(&seen).ok());
    let (url, mcp_config) = line.trim().split_once(' ').expect("the variables");
    let run_dir = Path::new(mcp_config).parent().expect("the run's directory").display().to_string();
    assert!(!processes_holding(&mark).is_empty(), "the upstream runs");
    run.kill().expect("SIGKILL"); // `hangar run` itself
    let _ = run.wait();
    // The command was in a group of its own, and is the test's to stop; nothing else is left.
    let command: Vec<u32> =
        processes_holding(&run_dir).into_iter().filter(|(_, c)| c.starts_with("sleep")).map(|(p, _)| p).collect();
    nothing_left(&run_dir, &mark, port_of(url), &command);
    for pid in command {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
    }

    // Two runs at once, on the same config: each its own port, directory and hangar.
    let suite = format!("{} {}", python().display(), fixture("run_suite.py"));
    let runs: Vec<_> = (0..2)
        .map(|_| hangar_run(&config, &[], &["sh", "-c", &suite]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn())
        .collect::<Result<_, _>>()
        .expect("two runs");
    let seen: Vec<Value> = runs
        .into_iter()
        .map(|run| {
            let done = run.wait_with_output().expect("a run");
            assert!(done.status.success(), "{}", text(&done.stderr));
            serde_json::from_str(text(&done.stdout).lines().last().unwrap_or_default()).expect("JSON")
        })
        .collect();
    assert_ne!(seen[0]["url"], seen[1]["url"], "two ports");
    assert!(seen.iter().all(|s| s["sum"]["result"] == 5), "{seen:?}");
    poll("both runs' upstreams to be gone", Duration::from_secs(30), || {
        processes_holding(&mark).is_empty().then_some(())
    });
}
