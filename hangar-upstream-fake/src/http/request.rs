//! Reading one HTTP/1.1 request: the head, then a Content-Length body.
//! Pure over `BufRead`, so it is unit-tested on byte slices.

use std::io::{self, BufRead, Read};

/// Largest request body we accept.
pub const MAX_BODY: u64 = 4 * 1024 * 1024;
/// Largest request head (request line plus headers) we accept.
const MAX_HEAD: u64 = 64 * 1024;

#[derive(Debug)]
pub struct Head {
    pub method: String,
    /// The request target without its query string.
    pub path: String,
    /// Names lower-cased, values trimmed, in arrival order.
    pub headers: Vec<(String, String)>,
    http10: bool,
}

/// A request we refuse: answer with this status, then close.
#[derive(Debug, PartialEq, Eq)]
pub struct Reject {
    pub status: u16,
    pub why: &'static str,
}

#[derive(Debug)]
pub enum HeadError {
    /// The client closed the connection between requests.
    Closed,
    /// Closed midway through a head, or the socket failed: nothing to answer.
    Broken,
    Reject(Reject),
}

const fn reject(status: u16, why: &'static str) -> HeadError {
    HeadError::Reject(Reject { status, why })
}

impl Head {
    /// The first value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn connection_has(&self, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n == "connection")
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    /// HTTP/1.1 keeps the connection unless told to close; 1.0 only if asked.
    pub fn keep_alive(&self) -> bool {
        if self.http10 { self.connection_has("keep-alive") } else { !self.connection_has("close") }
    }

    pub fn expects_continue(&self) -> bool {
        self.header("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    }

    /// The body length from Content-Length (0 when absent).
    pub fn body_len(&self) -> Result<u64, Reject> {
        if self.header("transfer-encoding").is_some() {
            return Err(Reject { status: 501, why: "only Content-Length bodies are supported" });
        }
        let mut len = None;
        for (_, v) in self.headers.iter().filter(|(n, _)| n == "content-length") {
            let parsed = v.parse::<u64>().ok().filter(|_| v.bytes().all(|b| b.is_ascii_digit()));
            match (parsed, len) {
                (None, _) => return Err(Reject { status: 400, why: "malformed Content-Length" }),
                (Some(n), Some(prev)) if n != prev => {
                    return Err(Reject { status: 400, why: "conflicting Content-Length headers" });
                }
                (Some(n), _) => len = Some(n),
            }
        }
        let len = len.unwrap_or(0);
        if len > MAX_BODY {
            return Err(Reject { status: 413, why: "request body too large" });
        }
        Ok(len)
    }
}

/// Reads one line of the head, within what is left of the head budget.
fn read_line(r: &mut impl BufRead, budget: &mut u64) -> Result<Vec<u8>, HeadError> {
    let mut line = Vec::new();
    let n = r.by_ref().take(*budget).read_until(b'\n', &mut line).map_err(|_| HeadError::Broken)?;
    *budget -= n as u64;
    if line.last() != Some(&b'\n') {
        return Err(if *budget == 0 {
            reject(431, "request head too large")
        } else if n == 0 {
            HeadError::Closed
        } else {
            HeadError::Broken
        });
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(line)
}

/// Reads a request head. A connection closed before its first byte is
/// `Closed`; one closed midway is `Broken`.
pub fn read_head(r: &mut impl BufRead) -> Result<Head, HeadError> {
    let mut budget = MAX_HEAD;
    // Empty lines before the request line are tolerated (RFC 9112 §2.2).
    let mut line = read_line(r, &mut budget)?;
    while line.is_empty() {
        line = read_line(r, &mut budget)?;
    }
    let bad = || reject(400, "malformed request line");
    let text = std::str::from_utf8(&line).map_err(|_| bad())?;
    let mut parts = text.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    let http10 = match version {
        "HTTP/1.1" => false,
        "HTTP/1.0" => true,
        _ => return Err(reject(505, "only HTTP/1.0 and HTTP/1.1 are served")),
    };
    let token = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic());
    if !token(method) || !token(target) {
        return Err(bad());
    }
    let path = target.split_once('?').map_or(target, |(p, _)| p).to_owned();
    let mut head = Head { method: method.to_owned(), path, headers: Vec::new(), http10 };
    loop {
        let line = read_line(r, &mut budget).map_err(|e| match e {
            HeadError::Closed => HeadError::Broken,
            e => e,
        })?;
        if line.is_empty() {
            return Ok(head);
        }
        let text = std::str::from_utf8(&line).map_err(|_| reject(400, "header is not UTF-8"))?;
        let Some((name, value)) = text.split_once(':') else {
            return Err(reject(400, "malformed header"));
        };
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
            return Err(reject(400, "malformed header name"));
        }
        head.headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
    }
}

/// Reads exactly `len` body bytes (`len` is already capped at `MAX_BODY`).
pub fn read_body(r: &mut impl Read, len: u64) -> io::Result<Vec<u8>> {
    let mut body = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    r.take(len).read_to_end(&mut body)?;
    if (body.len() as u64) < len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(body)
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
