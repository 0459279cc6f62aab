use super::*;

fn head(raw: &str) -> Result<Head, HeadError> {
    read_head(&mut raw.as_bytes())
}

fn rejected(raw: &str) -> u16 {
    match head(raw) {
        Err(HeadError::Reject(r)) => r.status,
        other => panic!("expected a reject, got {other:?}"),
    }
}

#[test]
fn parses_a_post_with_headers_and_body() {
    let raw = "POST /mcp?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type:  application/json \r\nContent-Length: 2\r\n\r\n{}";
    let mut r = raw.as_bytes();
    let h = read_head(&mut r).unwrap();
    assert_eq!((h.method.as_str(), h.path.as_str()), ("POST", "/mcp"));
    assert_eq!(h.header("CONTENT-TYPE"), Some("application/json"));
    assert_eq!(h.body_len(), Ok(2));
    assert!(h.keep_alive());
    assert_eq!(read_body(&mut r, 2).unwrap(), b"{}");
    assert!(matches!(read_head(&mut r), Err(HeadError::Closed)));
}

#[test]
fn keep_alive_follows_version_and_connection() {
    assert!(!head("GET / HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n").unwrap().keep_alive());
    assert!(!head("GET / HTTP/1.0\r\n\r\n").unwrap().keep_alive());
    assert!(head("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").unwrap().keep_alive());
    assert!(head("\r\nGET / HTTP/1.1\n\n").unwrap().keep_alive());
}

#[test]
fn body_length_rules() {
    let len = |extra: &str| head(&format!("POST / HTTP/1.1\r\n{extra}\r\n")).unwrap().body_len();
    assert_eq!(len(""), Ok(0));
    assert_eq!(len("Content-Length: 5\r\nContent-Length: 5\r\n"), Ok(5));
    assert_eq!(len("Content-Length: 5\r\nContent-Length: 6\r\n").map_err(|r| r.status), Err(400));
    assert_eq!(len("Content-Length: +5\r\n").map_err(|r| r.status), Err(400));
    assert_eq!(len(&format!("Content-Length: {}\r\n", MAX_BODY)), Ok(MAX_BODY));
    assert_eq!(len(&format!("Content-Length: {}\r\n", MAX_BODY + 1)).map_err(|r| r.status), Err(413));
    assert_eq!(len("Transfer-Encoding: chunked\r\n").map_err(|r| r.status), Err(501));
}

#[test]
fn malformed_heads_are_rejected_not_panicked_on() {
    assert_eq!(rejected("GET /\r\n\r\n"), 400);
    assert_eq!(rejected("GET / HTTP/2\r\n\r\n"), 505);
    assert_eq!(rejected("GET / HTTP/1.1\r\nno colon\r\n\r\n"), 400);
    assert_eq!(rejected("GET / HTTP/1.1\r\nbad name: x\r\n\r\n"), 400);
    assert_eq!(rejected("G\u{0}T / HTTP/1.1\r\n\r\n"), 400);
    let not_utf8 = b"GET / HTTP/1.1\r\n\xff: x\r\n\r\n";
    assert!(matches!(read_head(&mut &not_utf8[..]), Err(HeadError::Reject(Reject { status: 400, .. }))));
    let huge = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(70 * 1024));
    assert_eq!(rejected(&huge), 431);
}

#[test]
fn truncated_input_is_broken() {
    assert!(matches!(head("GET / HTTP/1.1\r\nHost: a\r\n"), Err(HeadError::Broken)));
    assert!(matches!(head("GET / HT"), Err(HeadError::Broken)));
    assert!(read_body(&mut &b"ab"[..], 3).is_err());
}
