//! The operators' command-line client, `hangar`, against a real hangar: status, start, logs,
//! stop, and the errors a script relies on (the API's message, exit 1; unreachable, exit 69).

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use hangar_tests::serde_json::{self, Value};
use hangar_tests::{Hangar, bin, free_port, poll};

const CONFIG: &str = r#"
mcp_servers:
  math:
    command: ["{fake}", "--tools", "add,sub"]
"#;

/// Runs `hangar --url URL args...` to completion (every subcommand used here returns promptly;
/// the client's own timeouts bound it).
pub(crate) fn cli(url: &str, args: &[&str]) -> Output {
    Command::new(bin("hangar"))
        .arg("--url")
        .arg(url)
        .args(args)
        .env_remove("HANGAR_URL")
        .env_remove("HANGAR_API_KEY")
        .stdin(Stdio::null())
        .output()
        .expect("run hangar")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

pub(crate) fn ok(output: Output) -> String {
    assert!(output.status.success(), "hangar failed: {:?}\n{}", output.status, stderr(&output));
    stdout(&output)
}

#[test]
fn status_start_logs_stop() {
    let hangar = Hangar::start(CONFIG);
    let url = hangar.base.as_str();

    let table = ok(cli(url, &["status"]));
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["SERVER", "STATE", "MODE", "TOOLS", "HEALTH", "DEAD"]);
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["math", "cold", "subprocess"], "{table}");
    assert_eq!(row.last(), Some(&"-"), "a cold server is not dead: {table}");

    let started = ok(cli(url, &["start", "math"]));
    assert_eq!(started.trim(), "math: ready (2 tools: add, sub)");

    let json: Value = serde_json::from_str(&ok(cli(url, &["status", "--json"]))).unwrap();
    assert_eq!(json["mcp_servers"][0]["mcp_server_id"], "math");
    assert_eq!(json["mcp_servers"][0]["state"], "ready", "{json}");
    assert_eq!(json, hangar.get("/api/mcp_servers").body, "--json is the API's JSON");

    // The fake says what it serves on stderr as it starts; the log may trail the handshake.
    let logs = poll("the fake's stderr line in `hangar logs`", Duration::from_secs(10), || {
        let logs = ok(cli(url, &["logs", "math", "-n", "50"]));
        logs.contains("hangar-upstream-fake: serving tools add,sub").then_some(logs)
    });
    let line = logs.lines().find(|l| l.contains("serving tools")).unwrap();
    let (recorded_at, rest) = line.split_once(' ').unwrap();
    assert!(recorded_at.ends_with('Z'), "recorded_at first: {line}");
    assert!(rest.starts_with("stderr hangar-upstream-fake: "), "then stream and content: {line}");

    let stopped = ok(cli(url, &["stop", "math"]));
    assert_eq!(stopped.trim(), "math: stopped (user_request)");
    assert_eq!(hangar.details("math")["state"], "cold");
}

#[test]
fn logs_follow_prints_only_new_lines() {
    let hangar = Hangar::start(CONFIG);
    assert_eq!(hangar.post("/api/mcp_servers/math/start", None).status, 200);
    poll("the first start's log line", Duration::from_secs(10), || {
        ok(cli(&hangar.base, &["logs", "math"])).contains("serving tools").then_some(())
    });

    let mut follow = Command::new(bin("hangar"))
        .args(["--url", &hangar.base, "logs", "math", "-n", "1", "-f"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run hangar logs -f");
    let stdout = follow.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let next = |what: &str| rx.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| panic!("no line: {what}"));
    let first = next("the last line");
    assert!(first.contains("serving tools"), "{first}");

    // A restart makes the fake say it again: that line, and nothing already printed, follows.
    assert_eq!(hangar.post("/api/mcp_servers/math/stop", None).status, 200);
    assert_eq!(hangar.post("/api/mcp_servers/math/start", None).status, 200);
    let line = poll("the restart's line", Duration::from_secs(10), || {
        let line = next("after the restart");
        assert_ne!(line, first, "a line already printed came again");
        line.contains("serving tools").then_some(line)
    });
    assert!(line.contains(" stderr hangar-upstream-fake: serving tools add,sub"), "{line}");
    // `-f` runs until interrupted; if the test fails first, it exits 69 once the hangar is gone.
    let _ = follow.kill();
    let _ = follow.wait();
}

#[test]
fn an_unknown_server_exits_1_with_the_apis_message() {
    let hangar = Hangar::start(CONFIG);
    let expected = hangar.post("/api/mcp_servers/nope/start", None).body;
    let message = expected["error"]["message"].as_str().unwrap();
    let code = expected["error"]["code"].as_str().unwrap();

    let output = cli(&hangar.base, &["start", "nope"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(stderr(&output).trim(), format!("hangar: {message} ({code})"));
    assert!(stdout(&output).is_empty());

    let output = cli(&hangar.base, &["logs", "nope"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("(McpServerNotFound)"), "{}", stderr(&output));
}

#[test]
fn an_unreachable_hangar_exits_69() {
    let url = format!("http://127.0.0.1:{}", free_port());
    let output = cli(&url, &["status"]);
    assert_eq!(output.status.code(), Some(69), "{}", stderr(&output));
    let expected = format!("hangar: cannot reach the hangar at {url}: ");
    assert!(stderr(&output).starts_with(&expected), "{}", stderr(&output));
}

#[test]
fn bad_usage_exits_64() {
    let output = cli("http://127.0.0.1:1", &["logs"]);
    assert_eq!(output.status.code(), Some(64), "{}", stderr(&output));
    let output = cli("ftp://nowhere", &["status"]);
    assert_eq!(output.status.code(), Some(64), "{}", stderr(&output));
}

#[test]
fn reload_reports_the_difference_and_a_bad_config_exits_1() {
    let hangar = Hangar::start(CONFIG);
    let config = hangar.path("hangar.yaml");
    let before = std::fs::read_to_string(&config).unwrap();

    std::fs::write(&config, "mcp_servers:\n  math:\n    comand: [x]\n").unwrap();
    let output = cli(&hangar.base, &["reload"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("mcp_servers.math.comand"), "{}", stderr(&output));

    let fake = bin("hangar-upstream-fake").display().to_string();
    std::fs::write(&config, format!("{before}  extra:\n    command: [\"{fake}\", \"--tools\", \"mul\"]\n")).unwrap();
    let reloaded = ok(cli(&hangar.base, &["reload"]));
    assert_eq!(reloaded.trim(), "reloaded; added: extra; unchanged: math");
    assert!(ok(cli(&hangar.base, &["status"])).lines().any(|l| l.starts_with("extra ")));
}
