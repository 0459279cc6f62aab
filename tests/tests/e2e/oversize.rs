//! A 20 MB POST is answered 413, and the client reads that 413 even when it sends its whole body
//! before reading (Python's `http.client`, a raw socket): the hangar reads and discards the
//! rest of a refused body (a bounded lingering close) instead of closing on a client that is
//! still sending, which would reset the connection. Declared and chunked bodies alike, on `/mcp`
//! (JSON-RPC error) and REST (the envelope), and the refused request does nothing.

use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

use hangar_tests::serde_json::{self, Value};
use hangar_tests::{Hangar, python, raw_http};

const CONFIG: &str = r#"
mcp_servers:
  math:
    command: ["{fake}", "--tools", "add"]
"#;

const BIG: usize = 20 << 20;
const PATHS: [&str; 2] = ["/mcp", "/api/mcp_servers/math/start"];

/// Sends the whole body, then reads: what `http.client` does. Prints the status, the
/// `Connection` header and the JSON body, or the error it got instead.
const PY_CLIENT: &str = r#"
import http.client, json, sys
host, port, path, size = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
body = b'{"pad":"' + b'x' * size + b'"}'
conn = http.client.HTTPConnection(host, port, timeout=30)
try:
    conn.request("POST", path, body, {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    response = conn.getresponse()
    print(json.dumps({"status": response.status, "connection": response.getheader("connection"), "body": json.loads(response.read())}))
except OSError as err:
    print(json.dumps({"error": repr(err)}))
"#;

fn assert_413_shape(path: &str, body: &Value, context: &str) {
    if path == "/mcp" {
        assert_eq!(body["error"]["code"], -32600, "{context}: the JSON-RPC shape: {body}");
    } else {
        assert_eq!(body["error"]["code"], "PayloadTooLarge", "{context}: the envelope: {body}");
    }
}

fn json_body(answer: &str) -> Value {
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    serde_json::from_str(body).unwrap_or(Value::Null)
}

/// Sends `size` bytes as a chunked body, then reads; the status and the answer's text.
fn chunked(addr: &str, path: &str, size: usize) -> std::io::Result<(u16, String)> {
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n"
    )?;
    let chunk = vec![b' '; 64 << 10];
    for _ in 0..size / chunk.len() {
        write!(stream, "{:x}\r\n", chunk.len())?;
        stream.write_all(&chunk)?;
        stream.write_all(b"\r\n")?;
    }
    stream.write_all(b"0\r\n\r\n")?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let text = String::from_utf8_lossy(&answer).into_owned();
    Ok((text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0), text))
}

#[test]
fn a_client_that_sends_a_20_mb_body_before_reading_reads_the_413() {
    let hangar = Hangar::start(CONFIG);
    let addr = hangar.base.trim_start_matches("http://").to_owned();
    let (host, port) = addr.rsplit_once(':').unwrap();

    for path in PATHS {
        let output =
            Command::new(python()).args(["-c", PY_CLIENT, host, port, path, &BIG.to_string()]).output().unwrap();
        let said = String::from_utf8_lossy(&output.stdout);
        let answer: Value = serde_json::from_str(said.trim())
            .unwrap_or_else(|e| panic!("{path}: {e}: {said}\n{}", String::from_utf8_lossy(&output.stderr)));
        let context = format!("http.client POST {path}");
        assert_eq!(answer["status"], 413, "{context}: {answer}");
        assert_eq!(answer["connection"], "close", "{context}: {answer}");
        assert_413_shape(path, &answer["body"], &context);

        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
        );
        let (status, text) = raw_http(&addr, &head, &vec![b' '; BIG]).unwrap_or_else(|e| panic!("raw {path}: {e}"));
        assert_eq!(status, 413, "raw {path}: {text:.300}");
        assert_413_shape(path, &json_body(&text), &format!("raw {path}"));

        // A chunked body declares no length: it is refused once it goes over the limit, also on
        // a route that never reads its body.
        let (status, text) = chunked(&addr, path, BIG).unwrap_or_else(|e| panic!("chunked {path}: {e}"));
        assert_eq!(status, 413, "chunked {path}: {text:.300}");
    }
    assert_eq!(hangar.details("math")["state"], "cold", "no refused start ran");
    assert_eq!(hangar.get("/health/ready").status, 200);
    // A body within the limit is served as before.
    assert_eq!(hangar.post_raw(PATHS[1], &[("Content-Type", "application/json")], b"{}").status, 200);
}
