//! `hangar run [--config F] [--server S]... [--keep DIR] [--junit F] -- CMD...`: a test suite's
//! hangar. It starts a hangar of its own on the config ([`Ephemeral`]: a private directory, a
//! loopback port it binds itself, an admin key of its own when `auth` is configured), starts
//! every server (or those named) and waits for each to be ready. One that is not stops the run
//! before the command, with exit 69, each failed server's dead reason and the tail of its log.
//!
//! The command then runs in a process group of its own, with `HANGAR_URL`, `HANGAR_MCP_URL`,
//! `HANGAR_API_KEY` (when `auth` is configured) and `HANGAR_MCP_CONFIG` (a generated `.mcp.json`
//! naming the hangar's MCP endpoint) in its environment; SIGINT and SIGTERM sent to this process
//! are passed on to its group, and the run exits with its status (128 + N for signal N). Then the
//! hangar stops and its directory goes: nothing is left behind, and nothing listens on the port.
//!
//! `--keep DIR` keeps, for CI artifacts: `audit.jsonl` (the audit trail, one entry a line), each
//! server's log (`logs/<server>.log`), the hangar's own log and its journal (`journal/`).
//! `--junit FILE` writes one test case per server: ready, or failed with its dead reason.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use hangar_core::terminal::visible;
use nix::sys::signal::Signal;
use serde_json::json;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::ephemeral::{Ephemeral, LOG_TAIL, Started};
use crate::error::CliError;

/// What `hangar run` was asked.
pub struct Run<'a> {
    pub config: &'a Path,
    pub servers: &'a [String],
    pub keep: Option<&'a Path>,
    pub junit: Option<&'a Path>,
    pub command: &'a [String],
}

/// Runs it: the command's exit code, or why the command never ran.
pub fn run(asked: &Run<'_>) -> Result<u8, CliError> {
    // SIGINT and SIGTERM are caught (not the default action, which would end this run and
    // leave the command behind) and passed on by a thread of this run's. Nothing is blocked:
    // each child starts with the default actions.
    let signals = Signals::new([SIGINT, SIGTERM])
        .map_err(|err| CliError::Local(format!("cannot take SIGINT and SIGTERM: {err}")))?;
    let group = Arc::new(AtomicI32::new(0));
    let received = Arc::new(AtomicI32::new(0));
    {
        let (group, received) = (group.clone(), received.clone());
        std::thread::spawn(move || pass_on(signals, &group, &received));
    }

    let auth = config_has_auth(asked.config)?;
    let mut hangar = Ephemeral::start(asked.config, auth)?;
    let all = hangar.servers()?;
    let wanted = match asked.servers {
        [] => all,
        named => {
            if let Some(unknown) = named.iter().find(|id| !all.contains(id)) {
                return Err(CliError::Usage(format!("--server {}: the config has no such server", visible(unknown))));
            }
            named.to_vec()
        }
    };
    let started = hangar.start_servers(&wanted);
    for server in &started {
        let state = if server.ready { "ready" } else { "dead" };
        eprintln!("hangar run: {}: {state} in {} ms", visible(&server.id), server.took.as_millis());
    }
    if let Some(junit) = asked.junit {
        write_file(junit, junit_xml(&started).as_bytes())?;
    }
    let failed: Vec<&Started> = started.iter().filter(|s| !s.ready).collect();
    if !failed.is_empty() {
        let report = failure_report(&hangar, &failed);
        keep(asked.keep, &mut hangar, &wanted)?;
        return Err(CliError::NotReady(report));
    }
    if received.load(Ordering::SeqCst) != 0 {
        keep(asked.keep, &mut hangar, &wanted)?;
        return Ok(128 + received.load(Ordering::SeqCst) as u8);
    }

    let status = run_command(asked.command, &hangar, &group)?;
    keep(asked.keep, &mut hangar, &wanted)?;
    hangar.stop();
    Ok(exit_code(status))
}

/// Whether the config configures authentication (then the run has a key of its own). The
/// config is read as the supervisor will read it; its problems are the supervisor's to report.
fn config_has_auth(config: &Path) -> Result<bool, CliError> {
    match hangar_core::config::Config::load(config) {
        Ok(config) => Ok(config.auth.is_configured()),
        Err(err) => Err(CliError::ConfigRead { path: config.to_owned(), reason: strip_path(&err.to_string(), config) }),
    }
}

fn strip_path(message: &str, path: &Path) -> String {
    let prefix = format!("{}: ", path.display());
    message.strip_prefix(&prefix).unwrap_or(message).to_owned()
}

/// Each SIGINT or SIGTERM this process gets goes on to the command's group once it runs;
/// before, it is noted, and the run stops before the command.
fn pass_on(mut signals: Signals, group: &AtomicI32, received: &AtomicI32) {
    for number in signals.forever() {
        received.store(number, Ordering::SeqCst);
        let pgid = group.load(Ordering::SeqCst);
        if let (true, Ok(signal)) = (pgid > 0, Signal::try_from(number)) {
            let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pgid), signal);
        }
    }
}

/// The command, in its own process group with the hangar's variables; its status.
fn run_command(command: &[String], hangar: &Ephemeral, group: &AtomicI32) -> Result<ExitStatus, CliError> {
    use std::os::unix::process::CommandExt;
    let (program, args) =
        command.split_first().ok_or_else(|| CliError::Usage("give the command to run after --".into()))?;
    let mcp_url = format!("{}/mcp", hangar.url);
    let mcp_config = hangar.dir().join("mcp.json");
    write_private(&mcp_config, mcp_json(&mcp_url, hangar.key.as_deref()).as_bytes())?;
    let mut child = Command::new(program);
    child
        .args(args)
        .env("HANGAR_URL", &hangar.url)
        .env("HANGAR_MCP_URL", &mcp_url)
        .env("HANGAR_MCP_CONFIG", &mcp_config)
        .process_group(0);
    match &hangar.key {
        Some(key) => child.env("HANGAR_API_KEY", key),
        None => child.env_remove("HANGAR_API_KEY"),
    };
    let mut child =
        child.spawn().map_err(|err| CliError::Local(format!("cannot run `{}`: {err}", visible(program))))?;
    group.store(child.id() as i32, Ordering::SeqCst);
    let status = child.wait().map_err(|err| CliError::Local(format!("cannot wait for the command: {err}")))?;
    group.store(0, Ordering::SeqCst);
    Ok(status)
}

/// The command's status as this run's exit code: its code, or 128 + the signal that ended it.
fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code).unwrap_or(1),
        (None, Some(signal)) => 128u8.saturating_add(u8::try_from(signal).unwrap_or(0)),
        (None, None) => 1,
    }
}

/// A `.mcp.json` with one server, the hangar's MCP endpoint.
pub fn mcp_json(mcp_url: &str, key: Option<&str>) -> String {
    let mut server = json!({"type": "http", "url": mcp_url});
    if let Some(key) = key {
        server["headers"] = json!({"Authorization": format!("Bearer {key}")});
    }
    let document = json!({"mcpServers": {"hangar": server}});
    serde_json::to_string_pretty(&document).unwrap_or_default() + "\n"
}

/// What the run says when servers did not become ready: each one's dead reason and log tail.
fn failure_report(hangar: &Ephemeral, failed: &[&Started]) -> String {
    let mut out = Vec::new();
    for server in failed {
        let why = server.dead.as_deref().unwrap_or("not ready");
        out.push(format!("{} did not become ready: {}", visible(&server.id), visible(why)));
        let lines = hangar.log_tail(&server.id, LOG_TAIL);
        if lines.is_empty() {
            out.push("  (it printed nothing)".into());
        } else {
            out.push(format!("  its last {} log lines:", lines.len()));
            out.extend(lines.iter().map(|line| format!("  | {line}")));
        }
    }
    out.push("the command was not run".into());
    out.join("\n")
}

/// JUnit XML: a test case per server, failed with its dead reason when it was not ready.
pub fn junit_xml(started: &[Started]) -> String {
    let failures = started.iter().filter(|s| !s.ready).count();
    let seconds: f64 = started.iter().map(|s| s.took.as_secs_f64()).sum();
    let mut xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"hangar run\" tests=\"{}\" failures=\"{failures}\" time=\"{seconds:.3}\">\n",
        started.len()
    );
    for server in started {
        let name = escape(&server.id);
        let time = server.took.as_secs_f64();
        match (&server.dead, server.ready) {
            (_, true) => xml.push_str(&format!(
                "    <testcase classname=\"hangar.servers\" name=\"{name}\" time=\"{time:.3}\"><system-out>{}</system-out></testcase>\n",
                escape(&format!("ready, {} tools: {}", server.tools.len(), server.tools.join(", ")))
            )),
            (dead, false) => {
                let why = escape(dead.as_deref().unwrap_or("not ready"));
                xml.push_str(&format!(
                    "    <testcase classname=\"hangar.servers\" name=\"{name}\" time=\"{time:.3}\"><failure message=\"{why}\" type=\"dead\">{why}</failure></testcase>\n"
                ));
            }
        }
    }
    xml.push_str("  </testsuite>\n</testsuites>\n");
    xml
}

/// Text for XML: markup escaped, and characters XML 1.0 cannot hold dropped.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {}
            c => out.push(c),
        }
    }
    out
}

/// `--keep DIR`: the audit trail, each server's log and the hangar's own while it runs, then
/// (stopped) its journal.
fn keep(dir: Option<&Path>, hangar: &mut Ephemeral, servers: &[String]) -> Result<(), CliError> {
    let Some(dir) = dir else { return Ok(()) };
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).map_err(|err| wrote(&logs, &err))?;
    let mut audit = Vec::new();
    let mut since = 0u64;
    loop {
        let page = hangar.api.get(&format!("/api/audit?since={since}&limit=1000"))?;
        let entries = page.body["entries"].as_array().cloned().unwrap_or_default();
        for entry in &entries {
            audit.extend_from_slice(entry.to_string().as_bytes());
            audit.push(b'\n');
        }
        let next = page.body["next"].as_u64().unwrap_or(since);
        if entries.is_empty() || next <= since {
            break;
        }
        since = next;
    }
    write_file(&dir.join("audit.jsonl"), &audit)?;
    for id in servers {
        let answer = hangar.api.get(&format!("/api/mcp_servers/{}/logs?lines=1000", crate::client::segment(id)));
        let lines = answer.map(|a| a.body["logs"].as_array().cloned().unwrap_or_default()).unwrap_or_default();
        let text: String =
            lines.iter().filter_map(|line| line["content"].as_str()).map(|line| format!("{line}\n")).collect();
        write_file(&logs.join(format!("{}.log", file_name(id))), text.as_bytes())?;
    }
    hangar.stop();
    write_file(&dir.join("hangar.log"), hangar.log().as_bytes())?;
    let journal = dir.join("journal");
    std::fs::create_dir_all(&journal).map_err(|err| wrote(&journal, &err))?;
    for entry in std::fs::read_dir(hangar.state_dir()).into_iter().flatten().flatten() {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with("journal.sqlite") {
            std::fs::copy(entry.path(), journal.join(&name)).map_err(|err| wrote(&journal.join(&name), &err))?;
        }
    }
    Ok(())
}

/// A server id as a file name: it never holds `/` (ids are letters, digits, `_`, `-`, `.`), and
/// never is `.` or `..`.
fn file_name(id: &str) -> String {
    let name: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() || "_-.".contains(c) { c } else { '_' }).collect();
    if name.trim_matches('.').is_empty() { format!("_{name}") } else { name }
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    std::fs::write(path, bytes).map_err(|err| wrote(path, &err))
}

/// Written readable by this user only (it holds the run's key).
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|err| wrote(path, &err))?;
    file.write_all(bytes).map_err(|err| wrote(path, &err))
}

fn wrote(path: &Path, err: &std::io::Error) -> CliError {
    CliError::Local(format!("cannot write {}: {err}", path.display()))
}

/// The value of `--junit`/`--keep` made absolute (the command may change directory; this run
/// does not, but a relative path is read against where it was started).
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::Value;

    use super::*;

    #[test]
    fn the_junit_report_has_a_case_per_server() {
        let started = [
            Started {
                id: "math".into(),
                ready: true,
                dead: None,
                tools: vec!["add".into()],
                took: Duration::from_millis(120),
            },
            Started {
                id: "broken".into(),
                ready: false,
                dead: Some("start_failed: exited with code 1 <&>".into()),
                tools: Vec::new(),
                took: Duration::from_millis(30),
            },
        ];
        let xml = junit_xml(&started);
        assert!(xml.contains(r#"tests="2" failures="1""#), "{xml}");
        assert!(xml.contains(r#"name="math" time="0.120"><system-out>ready, 1 tools: add"#), "{xml}");
        assert!(xml.contains(r#"<failure message="start_failed: exited with code 1 &lt;&amp;&gt;""#), "{xml}");
        assert_eq!(escape("a\u{1}b\u{7}"), "ab");
    }

    #[test]
    fn the_generated_mcp_json_names_the_endpoint_and_the_key() {
        let with = mcp_json("http://127.0.0.1:5/mcp", Some("k"));
        let value: Value = serde_json::from_str(&with).unwrap_or_default();
        assert_eq!(value["mcpServers"]["hangar"]["url"], "http://127.0.0.1:5/mcp");
        assert_eq!(value["mcpServers"]["hangar"]["headers"]["Authorization"], "Bearer k");
        let without: Value = serde_json::from_str(&mcp_json("http://h/mcp", None)).unwrap_or_default();
        assert!(without["mcpServers"]["hangar"].get("headers").is_none());
    }

    #[test]
    fn exit_codes_pass_through() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(exit_code(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(exit_code(ExitStatus::from_raw(9)), 137, "killed by SIGKILL");
        assert_eq!(file_name(".."), "_..");
    }
}
