//! Bad input gets a clear error and breaks nothing: malformed requests get a 4xx (never a 500,
//! never a panic), unknown ids a 404, bad log-line counts a 400, a command that cannot run is
//! `start_failed`, and a bad config exits 78 naming the file and key.

use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

use hangar_tests::serde_json::{self, json};
use hangar_tests::{Hangar, bin};

const CONFIG: &str = r#"
mcp_servers:
  math:
    command: ["{fake}", "--tools", "add"]
  broken:
    command: ["/nonexistent/hangar-test-binary"]
"#;

/// What is wrong, the request headers, the body.
type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, Vec<u8>);

#[test]
fn malformed_requests_get_clear_client_errors() {
    let hangar = Hangar::start(
        "tool_access: {mode: front_door}\nmcp_servers:\n  math:\n    command: [\"{fake}\", \"--tools\", \"add\"]\n",
    );
    let json_headers = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let cases: Vec<Case> = vec![
        ("malformed JSON", json_headers.to_vec(), b"{\"jsonrpc\": \"2.0\", ".to_vec()),
        ("invalid UTF-8", json_headers.to_vec(), vec![b'{', 0xff, 0xfe, b'}']),
        ("deep nesting", json_headers.to_vec(), deep.into_bytes()),
        (
            "the wrong content type",
            vec![("Content-Type", "text/plain"), ("Accept", "application/json")],
            b"{}".to_vec(),
        ),
        ("no content type", vec![("Accept", "application/json")], b"{}".to_vec()),
        ("a batch", json_headers.to_vec(), b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]".to_vec()),
        ("not JSON-RPC", json_headers.to_vec(), b"{\"hello\": 1}".to_vec()),
        ("a string id with no method", json_headers.to_vec(), b"{\"jsonrpc\":\"2.0\",\"id\":\"x\"}".to_vec()),
    ];
    for (what, headers, body) in cases {
        let response = hangar.post_raw("/mcp", &headers, &body);
        assert!((400..500).contains(&response.status), "{what}: {} {}", response.status, response.text);
        if response.status != 413 {
            assert!(response.body.get("error").is_some(), "{what}: a JSON-RPC error body: {}", response.text);
        }
    }
    let response =
        hangar.post_raw("/api/mcp_servers/math/stop", &[("Content-Type", "application/json")], &[0xff, 0, 1]);
    assert!(response.status < 500, "REST with garbage: {} {}", response.status, response.text);
    // A huge body is refused from its declared length, before it is read (the server answers
    // and closes while a client would still be sending, so only the head is sent here).
    for path in ["/mcp", "/api/mcp_servers/math/start"] {
        assert_eq!(declared_only(&hangar, path, 64 << 20), 413, "{path}");
    }
    for path in ["/api/mcp_servers/%ff%fe", "/api/mcp_servers/..%2f..%2fetc"] {
        let response = hangar.get(path);
        assert!((400..500).contains(&response.status), "{path}: {} {}", response.status, response.text);
        assert!(response.body["error"]["code"].is_string(), "{path}: the envelope: {}", response.text);
    }
    // And the hangar is fine afterwards.
    let listed = hangar.mcp("tools/list", json!({}));
    assert_eq!(listed.status, 200);
    assert_eq!(hangar.get("/health/ready").status, 200);
}

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
    let error: serde_json::Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(error["error_type"], "not_found");
}

#[test]
fn bad_log_line_counts_are_refused_clearly() {
    let hangar = Hangar::start(CONFIG);
    for lines in ["0", "1001", "abc", "-1", "99999999999999999999"] {
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
            .env("STATE_DIRECTORY", dir.join("state"))
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(78), "{yaml}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(&path.display().to_string()), "names the file: {stderr}");
        assert!(stderr.contains(key), "names {key}: {stderr}");
        assert!(!dir.join("s.sock").exists(), "nothing was started");
    }
    let missing = Command::new(bin("hangar-supervisor"))
        .args(["--config", "/nonexistent/hangar.yaml"])
        .env("STATE_DIRECTORY", dir.join("state"))
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(78));
    let usage = Command::new(bin("hangar-supervisor"))
        .arg("--bogus")
        .env("STATE_DIRECTORY", dir.join("state"))
        .output()
        .unwrap();
    assert_eq!(usage.status.code(), Some(64), "usage errors exit 64: {}", String::from_utf8_lossy(&usage.stderr));
}

/// Sends a request head declaring `length` bytes of body and none of them; the status answered.
fn declared_only(hangar: &Hangar, path: &str, length: usize) -> u16 {
    let addr = hangar.base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(stream, "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {length}\r\n\r\n").unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
}
