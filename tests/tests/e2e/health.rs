//! Health over time: capability drift in alert and block mode, the prober dying and coming
//! back without disturbing a child, and idle servers going cold.

use std::time::Duration;

use hangar_tests::serde_json::json;
use hangar_tests::{Hangar, children_named, poll, read_pid, sigkill};

#[test]
fn alert_mode_keeps_a_drifting_server_up_and_records_it() {
    let hangar = Hangar::start(
        r#"
mcp_servers:
  drifty:
    command: ["{fake}", "--tools", "add,exfiltrate"]
    capabilities:
      enforcement_mode: alert
      tools: {expected_tools: [add]}
"#,
    );
    let started = hangar.tool_ok("hangar_start", json!({"mcp_server": "drifty"}));
    assert_eq!(started["state"], "ready");
    assert_eq!(hangar.call("drifty", "add", json!({"a": 1, "b": 1})), Some(json!({"result": 2})));
    assert_eq!(hangar.metric("hangar_capability_violations_total{mcp_server=\"drifty\"}"), Some(1.0));
    let log = hangar.log();
    assert!(log.contains("capability violation (alert mode)"), "the hangar's own log records it");
}

#[test]
fn a_server_whose_tools_change_while_running_is_blocked() {
    let hangar = Hangar::start(
        r#"
mcp_servers:
  shifty:
    command: ["{fake}", "--tools", "add", "--alt-tools", "add,exfiltrate", "--alt-tools-flag", "{dir}/shift", "--pid-file", "{dir}/shifty.pid"]
    capabilities:
      enforcement_mode: block
      tools: {expected_tools: [add]}
"#,
    );
    hangar.tool_ok("hangar_start", json!({"mcp_server": "shifty"}));
    let pid = read_pid(&hangar.path("shifty.pid"));
    // The fake announces notifications/tools/list_changed when the flag appears.
    std::fs::write(hangar.path("shift"), "").unwrap();
    let dead = poll("shifty to be blocked", Duration::from_secs(10), || {
        let details = hangar.details("shifty");
        (details["state"] == "dead").then(|| details["dead"].clone())
    });
    assert_eq!(dead["reason"], "capability_blocked");
    assert_eq!(dead["revived_by"], "start");
    poll("the blocked process to be gone", Duration::from_secs(10), || (!hangar_tests::alive(pid)).then_some(()));
    let (error_type, _) = hangar.call_error("shifty", "add", json!({"a": 1, "b": 1}));
    assert_eq!(error_type, "capability_blocked");
}

#[test]
fn a_sigkilled_prober_disturbs_no_child_and_checks_resume_when_it_returns() {
    let hangar = Hangar::start(
        r#"
mcp_servers:
  one:
    command: ["{fake}", "--pid-file", "{dir}/one.pid"]
    health_check_interval_s: 0.1
  two:
    command: ["{fake}", "--legacy", "--pid-file", "{dir}/two.pid"]
    health_check_interval_s: 0.1
"#,
    );
    for id in ["one", "two"] {
        hangar.tool_ok("hangar_start", json!({"mcp_server": id}));
    }
    let pids = [read_pid(&hangar.path("one.pid")), read_pid(&hangar.path("two.pid"))];
    let checked_at = |id: &str| hangar.details(id)["health"]["last_check_at"].as_str().map(str::to_owned);
    poll("a first check of each", Duration::from_secs(10), || {
        (checked_at("one").is_some() && checked_at("two").is_some()).then_some(())
    });

    let prober =
        poll("the prober process", Duration::from_secs(10), || children_named(hangar.pid(), "hangar-prober").pop());
    sigkill(prober);
    let back = poll("a new prober", Duration::from_secs(15), || {
        children_named(hangar.pid(), "hangar-prober").into_iter().find(|pid| *pid != prober)
    });
    assert_ne!(back, prober);
    let before = [checked_at("one"), checked_at("two")];
    poll("checks to resume for both servers", Duration::from_secs(10), || {
        (checked_at("one") > before[0] && checked_at("two") > before[1]).then_some(())
    });
    for (id, pid) in ["one", "two"].iter().zip(pids) {
        let details = hangar.details(id);
        assert_eq!(details["state"], "ready", "{id}");
        assert_eq!(details["meta"]["pid"], json!(pid), "{id}: same process");
        assert_eq!(details["meta"]["restarts"], 0, "{id}");
        assert!(hangar_tests::alive(pid));
    }
    assert_eq!(hangar.metric("hangar_health_checks_total{mcp_server=\"one\",result=\"failed\"}"), Some(0.0));
}

#[test]
fn an_idle_server_returns_to_cold() {
    let hangar = Hangar::start(
        r#"
mcp_servers:
  sleepy:
    command: ["{fake}", "--pid-file", "{dir}/sleepy.pid"]
    idle_ttl_s: 0.3
  busy:
    command: ["{fake}"]
    idle_ttl_s: 0
"#,
    );
    hangar.tool_ok("hangar_start", json!({"mcp_server": "sleepy"}));
    hangar.tool_ok("hangar_start", json!({"mcp_server": "busy"}));
    let pid = read_pid(&hangar.path("sleepy.pid"));
    poll("sleepy to go cold", Duration::from_secs(10), || (hangar.details("sleepy")["state"] == "cold").then_some(()));
    poll("its process to exit", Duration::from_secs(10), || (!hangar_tests::alive(pid)).then_some(()));
    assert_eq!(hangar.details("sleepy")["dead"], json!(null));
    assert_eq!(hangar.metric("hangar_mcp_server_stops_total{mcp_server=\"sleepy\",reason=\"idle\"}"), Some(1.0));
    assert_eq!(hangar.details("busy")["state"], "ready", "idle_ttl_s: 0 keeps a server running");
    // A call brings it back.
    assert_eq!(hangar.call("sleepy", "echo", json!({"x": 1})), Some(json!({"x": 1})));
}
