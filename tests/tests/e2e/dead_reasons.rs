//! A server driven dead for any reason reads the same `dead` object on every surface, and
//! nothing its upstream printed leaks onto one. Every fault is real (a flag file that makes the
//! fake fail, SIGKILL, an exit at start, a forbidden tool) and every action goes through MCP.

use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, SENTINEL, poll, read_pid, sigkill};

const CONFIG: &str = r#"
recovery: {max_retries: 1, initial_backoff_s: 0.2, backoff_multiplier: 2, max_backoff_s: 1}
mcp_servers:
  gave-up:
    command: ["{fake}", "--tools", "add", "--fail-flag", "{dir}/gave-up.fail"]
    max_consecutive_failures: 1
    health_check_interval_s: 0.2
    probe_timeout_s: 1
    handshake_timeout_s: 3
  crashed:
    command: ["{fake}", "--tools", "add", "--pid-file", "{dir}/crashed.pid"]
  start-failed:
    command: ["{fake}", "--tools", "add", "--exit-flag", "{dir}/start-failed.exit"]
  blocked:
    command: ["{fake}", "--tools", "add,exfiltrate"]
    capabilities:
      enforcement_mode: block
      tools: {expected_tools: [add]}
  healthy:
    command: ["{fake}", "--tools", "add"]
    health_check_interval_s: 0.2
"#;

const IDS: [&str; 5] = ["gave-up", "crashed", "start-failed", "blocked", "healthy"];

#[test]
fn every_dead_reason_reads_the_same_on_every_surface() {
    let hangar = Hangar::start(CONFIG);
    for id in ["gave-up", "crashed", "healthy"] {
        hangar.tool_ok("hangar_start", json!({"mcp_server": id}));
    }

    // gave-up: its tools/list starts failing; a check degrades it; the one recovery restart fails.
    std::fs::write(hangar.path("gave-up.fail"), "").unwrap();
    // crashed: SIGKILL.
    sigkill(read_pid(&hangar.path("crashed.pid")));
    // start-failed: exits at start.
    std::fs::write(hangar.path("start-failed.exit"), "").unwrap();
    let failed = hangar.tool("hangar_start", json!({"mcp_server": "start-failed"}));
    assert_eq!(failed["isError"], true, "{failed}");
    assert_eq!(failed["structuredContent"]["error_type"], "start_failed");
    // blocked: serves a tool it must not.
    let blocked = hangar.tool("hangar_start", json!({"mcp_server": "blocked"}));
    assert_eq!(blocked["structuredContent"]["error_type"], "capability_blocked", "{blocked}");

    for (id, reason) in [
        ("gave-up", "given_up"),
        ("crashed", "crashed"),
        ("start-failed", "start_failed"),
        ("blocked", "capability_blocked"),
    ] {
        poll(&format!("{id} to read dead/{reason}"), Duration::from_secs(15), || {
            (hangar.details(id)["dead"]["reason"] == reason).then_some(())
        });
    }

    let surfaces = read_every_surface(&hangar);
    for id in IDS {
        let objects: Vec<(&str, &Value)> = surfaces.iter().map(|(surface, by_id)| (*surface, &by_id[id])).collect();
        let (first_surface, first) = objects[0];
        for (surface, object) in &objects {
            assert_eq!(*object, first, "{id}: {surface} and {first_surface} differ");
        }
        if id == "healthy" {
            assert_eq!(first, &json!(null));
            continue;
        }
        assert!(first["since"].as_str().is_some_and(|s| s.ends_with('Z')), "{id}: {first}");
        if id == "blocked" {
            assert_eq!((first["revived_by"].as_str(), &first["retry_allowed_at"]), (Some("start"), &json!(null)));
        } else {
            assert_eq!(first["revived_by"], "call_or_start", "{id}");
            assert!(first["retry_allowed_at"].is_string(), "{id}: a backoff applies: {first}");
        }
    }
    let status = hangar.tool_ok("hangar_status", json!({}));
    for entry in status["mcp_servers"].as_array().unwrap() {
        let id = entry["id"].as_str().unwrap();
        match &entry["dead"] {
            Value::Null => assert_eq!((id, entry["state"].as_str()), ("healthy", Some("ready"))),
            dead => {
                let note = entry["note"].as_str().unwrap();
                assert!(note.starts_with(&format!("Failed ({}): ", dead["reason"].as_str().unwrap())), "{id}: {note}");
            }
        }
    }
    for (id, gauge) in [("gave-up", 4.0), ("crashed", 4.0), ("start-failed", 4.0), ("blocked", 4.0), ("healthy", 2.0)] {
        assert_eq!(hangar.metric(&format!("hangar_mcp_server_state{{mcp_server=\"{id}\"}}")), Some(gauge), "{id}");
    }
    let healthy = hangar.details("healthy");
    assert_eq!((healthy["state"].as_str(), &healthy["dead"]), (Some("ready"), &json!(null)));

    // Nothing the upstreams printed or answered reached a read surface...
    hangar.assert_no_body_contains(SENTINEL);
    // ...and it is all in the logs endpoint.
    let logs = hangar.get("/api/mcp_servers/start-failed/logs?lines=100");
    assert!(logs.text.contains(SENTINEL), "{}", logs.text);
    let gave_up_logs = hangar.get("/api/mcp_servers/gave-up/logs?lines=1000");
    assert!(gave_up_logs.text.contains(SENTINEL));
}

/// Every surface's `dead` object for every server, keyed by surface name then server id.
fn read_every_surface(hangar: &Hangar) -> Vec<(&'static str, Value)> {
    let by_id = |list: &Value, key: &str| -> Value {
        list["mcp_servers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s[key].as_str().unwrap().to_owned(), s["dead"].clone()))
            .collect()
    };
    let rest_get: Value = IDS.iter().map(|id| ((*id).to_owned(), hangar.details(id)["dead"].clone())).collect();
    let mcp_details: Value = IDS
        .iter()
        .map(|id| ((*id).to_owned(), hangar.tool_ok("hangar_details", json!({"mcp_server": id}))["dead"].clone()))
        .collect();
    vec![
        ("GET /api/mcp_servers/{id}", rest_get),
        ("GET /api/mcp_servers", by_id(&hangar.get("/api/mcp_servers").body, "mcp_server_id")),
        ("hangar_details", mcp_details),
        ("hangar_list", by_id(&hangar.tool_ok("hangar_list", json!({})), "mcp_server_id")),
        ("hangar_status", by_id(&hangar.tool_ok("hangar_status", json!({})), "id")),
    ]
}

#[test]
fn an_explicit_start_revives_given_up_and_blocked_servers_refuse_calls() {
    let hangar = Hangar::start(CONFIG);
    hangar.tool_ok("hangar_start", json!({"mcp_server": "gave-up"}));
    std::fs::write(hangar.path("gave-up.fail"), "").unwrap();
    poll("gave-up to give up", Duration::from_secs(15), || {
        (hangar.details("gave-up")["dead"]["reason"] == "given_up").then_some(())
    });
    std::fs::remove_file(hangar.path("gave-up.fail")).unwrap();
    // An explicit start, too, waits for the backoff (issue 11): until then it says when.
    let started = hangar.start_after_backoff("gave-up");
    assert_eq!(started["structuredContent"]["state"], "ready", "{started}");
    assert_eq!(hangar.details("gave-up")["dead"], json!(null));

    // A blocked server refuses calls without being started again; only a start retries it.
    let (error_type, _) = hangar.call_error("blocked", "add", json!({"a": 1, "b": 1}));
    assert_eq!(error_type, "capability_blocked", "the lazy start is refused");
    let starts = hangar.metric("hangar_mcp_server_starts_total{mcp_server=\"blocked\"}");
    let (error_type, error) = hangar.call_error("blocked", "add", json!({"a": 1, "b": 1}));
    assert_eq!(error_type, "capability_blocked");
    assert!(error.contains("explicit start"), "{error}");
    assert_eq!(
        hangar.metric("hangar_mcp_server_starts_total{mcp_server=\"blocked\"}"),
        starts,
        "no new process for a refused call"
    );
    assert_eq!(hangar.post("/api/mcp_servers/blocked/start", None).status, 409);
}
