//! Bad input gets a clear error and breaks nothing: unknown ids, bad configs, bad requests.

use std::process::Command;

use hangar_tests::{Hangar, bin, serde_json::json};

const CONFIG: &str = r#"
mcp_servers:
  math:
    command: ["{fake}", "--tools", "add"]
  broken:
    command: ["/nonexistent/hangar-test-binary"]
"#;

#[test]
fn unknown_server_is_a_404_with_the_error_envelope() {
    let hangar = Hangar::start(CONFIG);
    for (method, path) in [
        ("GET", "/api/mcp_servers/nope"),
        ("GET", "/api/mcp_servers/nope/tools"),
        ("GET", "/api/mcp_servers/nope/logs"),
        ("POST", "/api/mcp_servers/nope/start"),
        ("POST", "/api/mcp_servers/nope/stop"),
    ] {
        let response = if method == "GET" { hangar.get(path) } else { hangar.post(path, None) };
        assert_eq!(response.status, 404, "{method} {path}: {}", response.text);
        assert_eq!(response.body["error"]["code"], "McpServerNotFound", "{method} {path}");
        assert!(response.body["error"]["message"].as_str().unwrap().contains("nope"));
        assert!(response.body["error"].get("details").is_some(), "the envelope always has details");
    }
    let result = hangar.tool("hangar_details", json!({"mcp_server": "nope"}));
    assert_eq!(result["isError"], true);
    let error: hangar_tests::serde_json::Value =
        hangar_tests::serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(error["error_type"], "not_found");
}

#[test]
fn bad_log_line_counts_are_refused_clearly() {
    let hangar = Hangar::start(CONFIG);
    for lines in ["0", "1001", "abc", "-1"] {
        let response = hangar.get(&format!("/api/mcp_servers/math/logs?lines={lines}"));
        assert_eq!(response.status, 400, "lines={lines}: {}", response.text);
        assert!(response.body["error"]["code"].is_string(), "envelope for lines={lines}");
    }
    assert_eq!(hangar.get("/api/mcp_servers/math/logs?lines=1000").status, 200);
}

#[test]
fn a_command_that_cannot_run_is_start_failed() {
    let hangar = Hangar::start(CONFIG);
    let response = hangar.post("/api/mcp_servers/broken/start", None);
    assert_eq!(response.status, 502, "{}", response.text);
    assert_eq!(response.body["error"]["code"], "StartFailed");
    let details = hangar.details("broken");
    assert_eq!(details["dead"]["reason"], "start_failed");
    assert_eq!(hangar.details("math")["state"], "cold", "the others are untouched");
}

#[test]
fn a_bad_config_exits_78_naming_the_file_and_key() {
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path();
    let cases = [
        ("mcp_servers:\n  math:\n    command: [x]\n    comand: [y]\n", "mcp_servers.math.comand"),
        ("mcp_servers:\n  math:\n    command: [x]\n    idle_ttl_s: soon\n", "mcp_servers.math.idle_ttl_s"),
        ("mcp_servers:\n  math:\n    mode: subprocess\n", "mcp_servers.math.command"),
        ("mcp_servers:\n\tmath: 1\n", "line 2 column 1"),
        ("mcp_servers: [x]\n", "mcp_servers: invalid type: sequence, expected a map"),
        ("limits: {rate_limit: {calls_per_s: 0}}\n", "limits.rate_limit.calls_per_s: must be a number above 0"),
    ];
    for (yaml, key) in cases {
        let path = dir.join("bad.yaml");
        std::fs::write(&path, yaml).unwrap();
        let output = Command::new(bin("hangar-supervisor"))
            .arg("--config")
            .arg(&path)
            .arg("--socket")
            .arg(dir.join("s.sock"))
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(78), "{yaml}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(&path.display().to_string()), "names the file: {stderr}");
        assert!(stderr.contains(key), "names {key}: {stderr}");
        assert!(!dir.join("s.sock").exists(), "nothing was started");
    }
    let missing =
        Command::new(bin("hangar-supervisor")).args(["--config", "/nonexistent/hangar.yaml"]).output().unwrap();
    assert_eq!(missing.status.code(), Some(78));
    let usage = Command::new(bin("hangar-supervisor")).arg("--bogus").output().unwrap();
    assert_eq!(usage.status.code(), Some(64), "usage errors exit 64: {}", String::from_utf8_lossy(&usage.stderr));
}
