//! `hangar check --config F [--start] [--json]`: a CI lint for configs. Every problem is
//! printed with its key path (a typo'd key, a bad value, a rule that does not compile, a
//! credential file that cannot be read, a program not in PATH, a managed server's port that
//! something else holds), not only the first, and the exit code is 78; a good config is 0.
//! With `--start`, each server is started once in a hangar of the check's own: ready or dead
//! with its reason, its tools and its start time (exit 69 when one is not ready).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use hangar_tests::bin;
use hangar_tests::serde_json::{self, Value};

fn write(dir: &Path, yaml: &str) -> PathBuf {
    let path = dir.join("hangar.yaml");
    std::fs::write(&path, yaml.replace("{fake}", &bin("hangar-upstream-fake").display().to_string()))
        .expect("write the config");
    path
}

fn check(config: &Path, args: &[&str]) -> Output {
    Command::new(bin("hangar"))
        .args(args)
        .arg("check")
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null())
        .output()
        .expect("run hangar check")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn every_problem_is_printed_with_its_key_path() {
    let temp = tempfile::tempdir().expect("temp dir");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("a port to hold");
    let port = taken.local_addr().expect("its address").port();
    let yaml = format!(
        r#"
tool_access: {{mode: sideways}}
profiles:
  dev:
    servers: [math]
    rules:
      - {{tool: "*", when: "args.(", then: deny}}
mcp_servers:
  math: {{command: ["{{fake}}"], comand: [typo]}}
  web: {{mode: remote}}
  notes: {{command: ["{{fake}}"], env: {{TOKEN: {{file: /nonexistent/token}}}}}}
  gone: {{command: [no-such-program-anywhere]}}
  held: {{mode: http, command: ["{{fake}}"], endpoint: "http://127.0.0.1:{port}/mcp"}}
  fine: {{command: ["{{fake}}"]}}
"#
    );
    let config = write(temp.path(), &yaml);
    let checked = check(&config, &[]);
    let said = stdout(&checked);
    assert_eq!(checked.status.code(), Some(78), "{said}");
    for key in [
        "tool_access.mode",
        "profiles.dev.rules[0].when",
        "mcp_servers.math.comand",
        "mcp_servers.web.endpoint",
        "mcp_servers.notes.env.TOKEN.file",
        "mcp_servers.gone.command",
        "mcp_servers.held.endpoint",
    ] {
        assert!(said.contains(&format!(": {key}: ")), "{key} in:\n{said}");
    }
    assert!(!said.contains("mcp_servers.fine"), "{said}");
    assert!(said.trim_end().ends_with("7 problems"), "{said}");

    // For machines: one JSON object.
    let checked = check(&config, &["--json"]);
    let report: Value = serde_json::from_str(&stdout(&checked)).expect("JSON");
    assert_eq!((report["ok"].as_bool(), report["problems"].as_array().map(Vec::len)), (Some(false), Some(7)));
    drop(taken);
}

#[test]
fn a_good_config_passes_and_start_starts_each_server_once() {
    let temp = tempfile::tempdir().expect("temp dir");
    let config = write(temp.path(), "mcp_servers:\n  math: {command: [\"{fake}\", \"--tools\", \"add,echo\"]}\n");
    let checked = check(&config, &[]);
    assert_eq!(checked.status.code(), Some(0), "{}", stdout(&checked));
    assert!(stdout(&checked).contains("no problems"));

    let checked = Command::new(bin("hangar"))
        .args(["--json", "check", "--start", "--config"])
        .arg(&config)
        .stdin(Stdio::null())
        .output()
        .expect("check --start");
    assert_eq!(checked.status.code(), Some(0), "{}", String::from_utf8_lossy(&checked.stderr));
    let report: Value = serde_json::from_str(&stdout(&checked)).expect("JSON");
    let math = &report["servers"][0];
    assert_eq!((math["mcp_server"].as_str(), math["ready"].as_bool()), (Some("math"), Some(true)), "{report}");
    assert_eq!(math["tools"], serde_json::json!(["add", "echo"]), "{report}");
    assert!(math["start_ms"].is_u64(), "{report}");

    // A server that dies at start: 69, and the table says why.
    let broken = "  broken: {command: [sh, -c, \"echo bye >&2; exit 3\"]}\n";
    let config = write(temp.path(), &format!("mcp_servers:\n  math: {{command: [\"{{fake}}\"]}}\n{broken}"));
    let checked = check(&config, &[]);
    assert_eq!(checked.status.code(), Some(0), "the config itself is fine: {}", stdout(&checked));
    let checked = Command::new(bin("hangar"))
        .args(["check", "--start", "--config"])
        .arg(&config)
        .output()
        .expect("check --start");
    let table = stdout(&checked);
    assert_eq!(checked.status.code(), Some(69), "{table}");
    let row = table.lines().find(|line| line.starts_with("broken")).unwrap_or_default();
    assert!(row.contains("dead (start_failed") && row.contains("exited with code 3"), "{table}");
    assert!(table.lines().any(|line| line.starts_with("math") && line.contains("ready")), "{table}");
}
