//! Managed HTTP upstreams (`mode: http`) and remote ones (`mode: remote`): the hangar never
//! starts a server on an endpoint that already answers, never proxies a leftover, and treats a
//! clean HTTP upstream like a stdio one (proxied, health-checked, recovered).

use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Background, Hangar, SENTINEL, bin, free_port, poll, read_pid, sigkill, skip};

fn leftover(addr: &str) -> Background {
    Background::start(&bin("hangar-upstream-fake"), &["--http", addr, "--leftover"], "listening on")
}

fn managed(port: u16, host: &str, extra: &str) -> String {
    format!(
        r#"
recovery: {{max_retries: 1, initial_backoff_s: 0.2}}
mcp_servers:
  web:
    mode: http
    command: ["{{fake}}", "--http", "127.0.0.1:{port}", "--tools", "add,echo", "--pid-file", "{{dir}}/web.pid", "--fail-flag", "{{dir}}/web.fail"{extra}]
    endpoint: http://{host}:{port}/mcp
    handshake_timeout_s: 2
    health_check_interval_s: 0.2
    max_consecutive_failures: 1
"#
    )
}

#[test]
fn a_clean_http_upstream_is_proxied_checked_and_recovered() {
    let port = free_port();
    let hangar = Hangar::start(&managed(port, "127.0.0.1", ""));
    let started = hangar.tool_ok("hangar_start", json!({"mcp_server": "web"}));
    assert_eq!(started["tools"], json!(["add", "echo"]));
    assert_eq!(hangar.call("web", "add", json!({"a": 2, "b": 3})), Some(json!({"result": 5})));
    let details = hangar.details("web");
    assert_eq!((details["mode"].as_str(), details["meta"]["protocol_era"].as_str()), (Some("http"), Some("modern")));
    poll("a health check of web", Duration::from_secs(10), || {
        hangar.details("web")["health"]["last_check_at"].as_str().map(str::to_owned)
    });

    // Crash: the managed child dies and every surface says so.
    let pid = read_pid(&hangar.path("web.pid"));
    sigkill(pid);
    poll("web to read crashed", Duration::from_secs(10), || {
        (hangar.details("web")["dead"]["reason"] == "crashed").then_some(())
    });

    // Recovery: an explicit start (once the backoff lets it) brings it back on the same port;
    // failed checks degrade it and the recovery restart (a new process, same port) brings it
    // back to ready.
    assert_eq!(hangar.start_after_backoff("web")["isError"], false);
    let first = read_pid(&hangar.path("web.pid"));
    std::fs::write(hangar.path("web.fail"), "").unwrap();
    poll("web to degrade", Duration::from_secs(10), || (hangar.details("web")["state"] != "ready").then_some(()));
    std::fs::remove_file(hangar.path("web.fail")).unwrap();
    poll("web to be recovered by a new process", Duration::from_secs(15), || {
        let details = hangar.details("web");
        (details["state"] == "ready" && details["meta"]["pid"] != json!(first)).then_some(())
    });
    assert_eq!(hangar.call("web", "echo", json!({"x": 1})), Some(json!({"x": 1})));
}

#[test]
fn a_held_endpoint_is_refused_and_the_leftover_never_proxied() {
    for (leftover_on, endpoint_host) in
        [("127.0.0.1", "127.0.0.1"), ("127.0.0.1", "localhost"), ("[::1]", "localhost"), ("[::1]", "[::1]")]
    {
        let port = free_port();
        let Some(_leftover) = try_leftover(&format!("{leftover_on}:{port}")) else {
            assert!(skip(&format!("the case on {leftover_on}: this machine cannot listen there")));
            continue;
        };
        let hangar = Hangar::start(&managed(port, endpoint_host, ""));
        let refused = hangar.tool("hangar_start", json!({"mcp_server": "web"}));
        assert_eq!(refused["isError"], true, "{leftover_on} vs {endpoint_host}: {refused}");
        let error = &refused["structuredContent"];
        assert_eq!(error["error_type"], "port_held", "{error}");
        let message = error["error"].as_str().unwrap();
        assert!(message.contains(&format!("http://{endpoint_host}:{port}/mcp")), "names the URL: {message}");
        assert!(message.contains("already in use") && message.contains("answered HTTP 200"), "says why: {message}");
        assert_eq!(hangar.details("web")["dead"]["reason"], "start_failed");
        let (error_type, _) = hangar.call_error("web", "add", json!({"a": 1, "b": 1}));
        assert_eq!(error_type, "retry_later", "a call inside the backoff neither starts nor proxies");
        assert!(!hangar.path("web.pid").exists(), "the managed command was never spawned");
        hangar.get("/api/mcp_servers/web");
        hangar.get("/api/mcp_servers/web/tools");
        hangar.assert_no_body_contains(SENTINEL);
    }
}

#[test]
fn a_leftover_on_another_address_of_the_host_is_not_a_conflict() {
    // Held on [::1] only; the endpoint names 127.0.0.1, which resolves to nothing else.
    let port = free_port();
    let Some(_leftover) = try_leftover(&format!("[::1]:{port}")) else {
        assert!(skip("this machine cannot listen on [::1]"));
        return;
    };
    let hangar = Hangar::start(&managed(port, "127.0.0.1", ""));
    assert_eq!(hangar.tool_ok("hangar_start", json!({"mcp_server": "web"}))["state"], "ready");
    assert_eq!(hangar.call("web", "add", json!({"a": 1, "b": 1})), Some(json!({"result": 2})));
}

#[test]
fn a_command_that_never_binds_fails_naming_the_url_and_a_stranger_is_never_graded() {
    let port = free_port();
    let hangar = Hangar::start(&managed(port, "127.0.0.1", r#", "--no-bind""#));
    let failed = hangar.tool("hangar_start", json!({"mcp_server": "web"}));
    let error = &failed["structuredContent"];
    assert_eq!(error["error_type"], "start_failed", "{failed}");
    assert!(
        error["error"].as_str().unwrap().contains(&format!("did not listen on http://127.0.0.1:{port}/mcp")),
        "{error}"
    );
    let pid = read_pid(&hangar.path("web.pid"));
    poll("the command that never bound to be stopped", Duration::from_secs(10), || {
        (!hangar_tests::alive(pid)).then_some(())
    });

    // Now a stranger grabs the port while our command is starting (and never binds): the
    // answer is not our child's, so the start fails instead of proxying the stranger.
    std::fs::remove_file(hangar.path("web.pid")).unwrap();
    let starting = std::thread::scope(|scope| {
        let start = scope.spawn(|| hangar.start_after_backoff("web"));
        read_pid(&hangar.path("web.pid"));
        let _stranger = leftover(&format!("127.0.0.1:{port}"));
        start.join().unwrap()
    });
    let error = &starting["structuredContent"];
    assert_eq!(error["error_type"], "port_held", "{starting}");
    assert!(error["error"].as_str().unwrap().contains("stranger"), "{error}");
    hangar.assert_no_body_contains(SENTINEL);
}

#[test]
fn a_remote_endpoint_is_served_without_spawning_anything() {
    let port = free_port();
    let _remote = Background::start(
        &bin("hangar-upstream-fake"),
        &["--http", &format!("127.0.0.1:{port}"), "--tools", "add", "--sse"],
        "listening on",
    );
    let hangar = Hangar::start(&format!(
        r#"
mcp_servers:
  far:
    mode: remote
    endpoint: http://127.0.0.1:{port}/mcp
"#
    ));
    assert_eq!(hangar.call("far", "add", json!({"a": 20, "b": 22})), Some(json!({"result": 42})));
    let details = hangar.details("far");
    assert_eq!((details["mode"].as_str(), &details["meta"]["pid"]), (Some("remote"), &Value::Null));
}

#[test]
fn a_real_python_mcp_server_is_managed_over_http() {
    let port = free_port();
    let hangar = Hangar::start(&format!(
        r#"
mcp_servers:
  py:
    mode: http
    command: ["{{python}}", "{{fixtures}}/py_http_server.py", "{port}"]
    endpoint: http://127.0.0.1:{port}/mcp
    handshake_timeout_s: 30
    health_check_interval_s: 0.2
"#
    ));
    let started = hangar.tool_ok("hangar_start", json!({"mcp_server": "py"}));
    assert_eq!(started["tools"], json!(["add", "shout"]));
    assert_eq!(hangar.call("py", "add", json!({"a": 2, "b": 3})), Some(json!({"result": 5})));
    assert_eq!(hangar.call("py", "shout", json!({"text": "hangar"})), Some(json!({"result": "HANGAR"})));
    poll("a health check of py", Duration::from_secs(10), || {
        hangar.details("py")["health"]["last_check_at"].as_str().map(str::to_owned)
    });
    assert_eq!(hangar.details("py")["health"]["consecutive_failures"], 0);
}

/// A leftover on `addr` (`HOST:PORT`, `[::1]:PORT`), or `None` where this machine cannot
/// listen on that address (no IPv6 loopback).
fn try_leftover(addr: &str) -> Option<Background> {
    std::net::TcpListener::bind(addr).ok()?;
    Some(leftover(addr))
}

#[test]
fn a_stalled_leftover_on_the_endpoint_is_refused() {
    let stalled = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = stalled.local_addr().unwrap().port();
    // Accepts (the kernel does, into the backlog) and never answers a byte.
    let hangar = Hangar::start(&managed(port, "127.0.0.1", ""));
    let refused = hangar.tool("hangar_start", json!({"mcp_server": "web"}));
    let error = &refused["structuredContent"];
    assert_eq!(error["error_type"], "port_held", "{refused}");
    assert!(error["error"].as_str().unwrap().contains("stalled"), "{error}");
    assert!(!hangar.path("web.pid").exists(), "nothing was spawned");
    drop(stalled);
}

#[test]
fn sse_answers_with_crlf_or_lone_cr_line_endings_are_read() {
    // The SSE spec allows CRLF, LF and a lone CR to end lines (and so events); a reader that
    // knew only LF would never see the end of these answers and time the calls out.
    let endings = ["crlf", "cr"];
    let upstreams: Vec<(u16, Background)> = endings
        .iter()
        .map(|ending| {
            let port = free_port();
            let args = ["--http", &format!("127.0.0.1:{port}"), "--tools", "add", "--sse", "--sse-line-end", ending];
            (port, Background::start(&bin("hangar-upstream-fake"), &args, "listening on"))
        })
        .collect();
    let servers: String = endings
        .iter()
        .zip(&upstreams)
        .map(|(ending, (port, _))| {
            format!(
                "  {ending}:\n    mode: remote\n    endpoint: http://127.0.0.1:{port}/mcp\n    handshake_timeout_s: 5\n"
            )
        })
        .collect();
    let hangar = Hangar::start(&format!("mcp_servers:\n{servers}"));
    for ending in endings {
        assert_eq!(hangar.call(ending, "add", json!({"a": 20, "b": 22})), Some(json!({"result": 42})), "{ending}");
        assert_eq!(hangar.details(ending)["meta"]["protocol_era"], "modern", "{ending}");
    }
}
