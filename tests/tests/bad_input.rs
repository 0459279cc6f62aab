//! Bad input from clients gets a clear 4xx and breaks nothing: never a 500, never a panic.

use hangar_tests::Hangar;
use hangar_tests::serde_json::json;

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
    for path in [
        "/api/mcp_servers/%ff%fe",
        "/api/mcp_servers/..%2f..%2fetc",
        "/api/mcp_servers/math/logs?lines=99999999999999999999",
    ] {
        let response = hangar.get(path);
        assert!((400..500).contains(&response.status), "{path}: {} {}", response.status, response.text);
        assert!(response.body["error"]["code"].is_string(), "{path}: the envelope: {}", response.text);
    }
    // And the hangar is fine afterwards.
    let listed = hangar.mcp("tools/list", json!({}));
    assert_eq!(listed.status, 200);
    assert_eq!(hangar.get("/health/ready").status, 200);
}

/// Sends a request head declaring `length` bytes of body and none of them; the status answered.
fn declared_only(hangar: &Hangar, path: &str, length: usize) -> u16 {
    use std::io::{Read, Write};
    let addr = hangar.base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    write!(stream, "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {length}\r\n\r\n").unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
}
