//! `--log-format json` covers every process the supervisor starts: the API and the prober it runs
//! and its guardians log JSON into the same stream, so a log shipper reading it sees no line it
//! cannot parse.

use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, poll};

#[test]
fn the_helpers_and_guardians_log_json_when_the_supervisor_does() {
    let hangar = Hangar::start_with(
        // A child of the upstream (not an orphan, which the supervisor would adopt): the
        // guardians note it as a descendant, and say so.
        "mcp_servers:\n  math:\n    command: [\"sh\", \"-c\", \"setsid sleep 1000 & exec {fake} --tools add\"]\n",
        &["--log-format", "json", "--kill-mode", "subreaper"],
    );
    hangar.tool_ok("hangar_start", json!({"mcp_server": "math"}));
    let targets = ["hangar_supervisor::", "hangar_api", "hangar_prober", "hangar_guardian"];
    let lines: Vec<Value> = poll("every process to have logged", Duration::from_secs(10), || {
        let lines: Vec<Value> = hangar
            .log()
            .lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                hangar_tests::serde_json::from_str(line).unwrap_or_else(|err| panic!("not JSON ({err}): {line}"))
            })
            .collect();
        let logged = |target: &str| lines.iter().any(|l| l["target"].as_str().is_some_and(|t| t.starts_with(target)));
        targets.iter().all(|target| logged(target)).then_some(lines)
    });
    assert!(!lines.is_empty());
}
