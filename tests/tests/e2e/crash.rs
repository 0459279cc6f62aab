//! When an upstream's process dies, every surface says `dead`, reason `crashed`, with one and
//! the same `dead` object; and no surface repeats what the upstream printed. A crash after a
//! stable run is restarted at once, calls waiting for it; crashes in quick succession back off.

use std::time::Duration;

use hangar_tests::{Hangar, SENTINEL, poll, read_pid, serde_json::Value, serde_json::json, sigkill};

#[test]
fn sigkill_of_a_ready_upstream_reads_crashed_everywhere() {
    let hangar = Hangar::start(
        r#"
mcp_servers:
  victim:
    command: ["{fake}", "--tools", "add", "--pid-file", "{dir}/victim.pid", "--flood-stderr", "20000"]
  bystander:
    command: ["{fake}", "--tools", "echo"]
"#,
    );
    hangar.tool_ok("hangar_start", json!({"mcp_server": "victim"}));
    hangar.tool_ok("hangar_start", json!({"mcp_server": "bystander"}));
    let pid = read_pid(&hangar.path("victim.pid"));
    assert_eq!(hangar.details("victim")["meta"]["pid"], json!(pid));

    sigkill(pid);
    let dead = dead_record(&hangar, "victim");
    assert_eq!(dead["reason"], "crashed");
    assert_eq!(dead["revived_by"], "call_or_start");
    assert!(dead["since"].as_str().is_some_and(|s| s.ends_with('Z')), "{dead}");

    // Every surface shows the byte-identical object.
    let surfaces: Vec<(&str, Value)> = vec![
        ("GET /api/mcp_servers/victim", hangar.details("victim")["dead"].clone()),
        ("GET /api/mcp_servers", entry(&hangar.get("/api/mcp_servers").body, "mcp_server_id")),
        ("hangar_details", hangar.tool_ok("hangar_details", json!({"mcp_server": "victim"}))["dead"].clone()),
        ("hangar_list", entry(&hangar.tool_ok("hangar_list", json!({})), "mcp_server_id")),
        ("hangar_status", entry(&hangar.tool_ok("hangar_status", json!({})), "id")),
    ];
    for (surface, object) in &surfaces {
        assert_eq!(object, &dead, "{surface}");
    }
    let status = hangar.tool_ok("hangar_status", json!({}));
    let note = status["mcp_servers"][0]["note"].as_str().unwrap();
    assert!(note.starts_with("Failed (crashed): "), "{note}");

    let bystander = hangar.details("bystander");
    assert_eq!((bystander["state"].as_str(), &bystander["dead"]), (Some("ready"), &json!(null)));

    // The upstream's stderr reached its logs endpoint and nothing else.
    let logs = hangar.get("/api/mcp_servers/victim/logs?lines=1000");
    assert!(logs.text.contains(SENTINEL), "the logs endpoint keeps what the upstream printed");
    let bodies_before_logs: Vec<String> = hangar.bodies().into_iter().filter(|b| b != &logs.text).collect();
    for body in bodies_before_logs {
        assert!(!body.contains(SENTINEL), "leaked: {body}");
    }
}

/// Until `server` reads dead: its dead record.
fn dead_record(hangar: &Hangar, server: &str) -> Value {
    poll(&format!("{server} to read dead"), Duration::from_secs(10), || {
        let details = hangar.details(server);
        (details["state"] == "dead").then(|| details["dead"].clone())
    })
}

fn entry(list: &Value, key: &str) -> Value {
    list["mcp_servers"].as_array().unwrap().iter().find(|s| s[key] == "victim").unwrap()["dead"].clone()
}

#[test]
fn a_call_to_a_crashed_server_revives_it_once_its_backoff_has_passed() {
    let hangar = Hangar::start(
        r#"
recovery: {initial_backoff_s: 1}
mcp_servers:
  flaky:
    command: ["{fake}", "--tools", "add", "--crash-after", "1"]
"#,
    );
    assert_eq!(hangar.call("flaky", "add", json!({"a": 1, "b": 2})), Some(json!({"result": 3})));
    poll("flaky to crash after its first call", Duration::from_secs(10), || {
        (hangar.details("flaky")["dead"]["reason"] == "crashed").then_some(())
    });
    let dead = hangar.details("flaky")["dead"].clone();
    let retry_at = dead["retry_allowed_at"].as_str().expect("a crash sets a backoff").to_owned();

    // Inside the backoff: refused, saying when it may retry, and nothing is spawned.
    let (error_type, error) = hangar.call_error("flaky", "add", json!({"a": 1, "b": 2}));
    assert_eq!(error_type, "retry_later");
    assert!(error.contains(&retry_at), "says when: {error}");
    assert_eq!(hangar.details("flaky")["meta"]["restarts"], 0);

    // After it: the call revives the server and succeeds.
    let revived = poll("a call after the backoff to revive flaky", Duration::from_secs(10), || {
        hangar.call("flaky", "add", json!({"a": 1, "b": 2}))
    });
    assert_eq!(revived["result"], 3);
    assert_eq!(hangar.details("flaky")["meta"]["restarts"], 1);
}

#[test]
fn a_server_that_dies_after_every_start_backs_off_further_each_time() {
    let hangar = Hangar::start(
        r#"
recovery: {initial_backoff_s: 0.3, backoff_multiplier: 3, max_backoff_s: 60}
mcp_servers:
  storm:
    command: ["{fake}", "--tools", "add", "--crash-after", "1"]
"#,
    );
    let mut waits = Vec::new();
    let mut last_since = None;
    for round in 0..2 {
        // Refused while the backoff runs; the first call after it revives the server, which
        // answers and dies again.
        poll("a call to get through", Duration::from_secs(10), || {
            hangar.call("storm", "add", json!({"a": round, "b": 0}))
        });
        let dead = poll("storm to crash again", Duration::from_secs(10), || {
            let dead = hangar.details("storm")["dead"].clone();
            (dead["reason"] == "crashed" && dead["since"] != json!(last_since)).then_some(dead)
        });
        last_since = dead["since"].as_str().map(str::to_owned);
        waits.push(millis_between(dead["since"].as_str().unwrap(), dead["retry_allowed_at"].as_str().unwrap()));
    }
    // 0.3 s then 0.9 s, each within the ±10 % jitter: it never resets while it keeps dying young.
    assert!((270..=330).contains(&waits[0]), "{waits:?}");
    assert!((810..=990).contains(&waits[1]), "{waits:?}");
}

#[test]
fn a_crash_after_a_stable_run_is_restarted_at_once_and_calls_wait_for_it() {
    // Stable after 1 s here (a minute in production): the crash of a server up that long costs a
    // blink, not a backoff.
    let hangar = Hangar::start_with_env(
        r#"
recovery: {initial_backoff_s: 5}
mcp_servers:
  steady:
    command: ["{fake}", "--tools", "add", "--pid-file", "{dir}/steady.pid"]
"#,
        &[],
        &[("HANGAR_TEST_STABLE_AFTER_S", "1")],
    );
    assert_eq!(hangar.call("steady", "add", json!({"a": 1, "b": 2})), Some(json!({"result": 3})));
    let first = read_pid(&hangar.path("steady.pid"));
    // The precondition, not a poll: the server must have been up longer than "stable".
    std::thread::sleep(Duration::from_millis(1500));
    sigkill(first);
    poll("steady to see its process gone", Duration::from_secs(10), || {
        (hangar.details("steady")["meta"]["pid"] != json!(first)).then_some(())
    });
    // A call now waits for the restart instead of failing (`retry_later` before).
    assert_eq!(hangar.call("steady", "add", json!({"a": 2, "b": 2})), Some(json!({"result": 4})));
    let details = hangar.details("steady");
    assert_eq!((details["state"].as_str(), details["meta"]["restarts"].as_u64()), (Some("ready"), Some(1)));

    // Without any call, it is back at once: a new process, ready.
    let second = read_pid(&hangar.path("steady.pid"));
    assert_ne!(second, first);
    std::thread::sleep(Duration::from_millis(1500));
    sigkill(second);
    poll("steady to come back by itself", Duration::from_secs(10), || {
        let details = hangar.details("steady");
        (details["state"] == "ready" && details["meta"]["restarts"] == 2).then_some(())
    });

    // A crash in quick succession (up well under a second): the backoff again.
    let third = read_pid(&hangar.path("steady.pid"));
    assert_ne!(third, second);
    sigkill(third);
    let dead = dead_record(&hangar, "steady");
    let wait = millis_between(dead["since"].as_str().unwrap(), dead["retry_allowed_at"].as_str().unwrap());
    assert!((4500..=5500).contains(&wait), "the first backoff, 5 s ± 10 %: {wait} ms");
}

/// Milliseconds from one RFC 3339 UTC timestamp (`...T..:..:SS.mmmZ`) to a later one.
fn millis_between(from: &str, to: &str) -> i64 {
    let ms = |t: &str| -> i64 {
        let time = t.split('T').nth(1).unwrap().trim_end_matches('Z');
        let parts: Vec<f64> = time.split(':').map(|p| p.parse().unwrap()).collect();
        ((parts[0] * 3600.0 + parts[1] * 60.0 + parts[2]) * 1000.0).round() as i64
    };
    (ms(to) - ms(from)).rem_euclid(86_400_000)
}
