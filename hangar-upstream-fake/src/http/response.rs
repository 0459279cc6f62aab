//! Building and writing one HTTP/1.1 response.

use std::io::{self, Write};

use serde_json::Value;

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    /// The body runs until the connection closes (SSE), so no Content-Length.
    until_close: bool,
}

impl Response {
    pub fn empty(status: u16) -> Self {
        Self { status, headers: Vec::new(), body: Vec::new(), until_close: false }
    }

    pub fn json(status: u16, msg: &Value) -> Self {
        let mut r = Self::empty(status).header("Content-Type", "application/json");
        r.body = msg.to_string().into_bytes();
        r
    }

    /// One SSE `message` event carrying `msg`, each line ended by `end`; the connection closes after it.
    pub fn sse(msg: &Value, end: &str) -> Self {
        Self::sse_events(std::slice::from_ref(msg), end)
    }

    /// One SSE `message` event per message, in order, each line ended by `end`; then the
    /// connection closes.
    pub fn sse_events(msgs: &[Value], end: &str) -> Self {
        let mut r = Self::empty(200)
            .header("Content-Type", "text/event-stream")
            .header("Cache-Control", "no-cache")
            .header("X-Accel-Buffering", "no");
        r.body = msgs.iter().flat_map(|msg| format!("event: message{end}data: {msg}{end}{end}").into_bytes()).collect();
        r.until_close = true;
        r
    }

    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// True when the connection cannot carry another request after this.
    pub fn closes(&self) -> bool {
        self.until_close
    }

    /// Serializes the whole response; `keep_alive` is ignored for bodies
    /// that run until close.
    pub fn to_bytes(&self, keep_alive: bool) -> Vec<u8> {
        let mut out = format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status)).into_bytes();
        for (name, value) in &self.headers {
            out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        if !self.until_close {
            out.extend_from_slice(format!("Content-Length: {}\r\n", self.body.len()).as_bytes());
        }
        if self.until_close || !keep_alive {
            out.extend_from_slice(b"Connection: close\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.body);
        out
    }

    /// Writes the response in one go and flushes it.
    pub fn write_to(&self, w: &mut impl Write, keep_alive: bool) -> io::Result<()> {
        w.write_all(&self.to_bytes(keep_alive))?;
        w.flush()
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(r: &Response, keep_alive: bool) -> String {
        String::from_utf8_lossy(&r.to_bytes(keep_alive)).into_owned()
    }

    #[test]
    fn json_has_length_and_keeps_the_connection() {
        let r = Response::json(200, &json!({"a": 1})).header("Mcp-Session-Id", "fake-1");
        assert_eq!(
            text(&r, true),
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: fake-1\r\n\
             Content-Length: 7\r\n\r\n{\"a\":1}"
        );
        assert!(text(&r, false).contains("Connection: close\r\n"));
    }

    #[test]
    fn sse_is_one_event_then_close() {
        let r = Response::sse(&json!({"id": 1}), "\n");
        let t = text(&r, true);
        assert!(t.starts_with("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"));
        assert!(!t.contains("Content-Length"));
        assert!(t.contains("Connection: close\r\n"));
        assert!(t.ends_with("\r\n\r\nevent: message\ndata: {\"id\":1}\n\n"));
        assert!(r.closes());
    }

    #[test]
    fn sse_events_keep_their_order() {
        let r = Response::sse_events(&[json!({"n": 1}), json!({"id": 2})], "\n");
        assert!(text(&r, true).ends_with("event: message\ndata: {\"n\":1}\n\nevent: message\ndata: {\"id\":2}\n\n"));
        let cr = Response::sse_events(&[json!({"id": 3})], "\r");
        assert!(text(&cr, true).ends_with("\r\n\r\nevent: message\rdata: {\"id\":3}\r\r"));
    }

    #[test]
    fn empty_responses_say_zero_length() {
        assert_eq!(text(&Response::empty(202), true), "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n");
    }
}
