//! The port preflight (rule 4): nothing is started on a port that already answers.
//!
//! Only "connection refused" (or "that address is not reachable here") on every address a host
//! resolves to counts as free; an answer, a stall or a reset means something holds the port.
//! Plain blocking `std::net` connects with short timeouts; async callers run them on a blocking
//! thread.

use std::fmt;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use url::{Host, Url};

/// How long a connect may take before the address counts as held (something is there, slow).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long an accepted connection may stay silent before we call it a stall.
pub const STALL_TIMEOUT: Duration = Duration::from_millis(500);
/// Enough for `HTTP/1.1 200` and then some.
const PEEK_BYTES: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error("{url}: not a usable URL: {why}")]
    BadUrl { url: String, why: String },
    #[error("{url}: cannot resolve {host}: {source}")]
    Resolve { url: String, host: String, source: io::Error },
    #[error("{0}")]
    Held(PortHeld),
}

/// One address of the URL is taken, and how we could tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortHeld {
    pub url: String,
    pub address: SocketAddr,
    pub why: Held,
}

impl fmt::Display for PortHeld {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is already in use: {} {}", self.url, self.address, self.why)
    }
}

/// What the holder of an address did when we knocked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    /// `"HTTP 404"`, or `"with non-HTTP bytes"`.
    Answered(String),
    /// Accepted, then said nothing within [`STALL_TIMEOUT`].
    Stalled,
    Reset,
    /// Accepted and closed without a word.
    Closed,
    ConnectTimedOut,
    /// A rejection that is not one of the "nothing here" kinds (e.g. a firewall's EPERM).
    Refused(ErrorKind),
    Other(String),
}

impl fmt::Display for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Held::Answered(what) => write!(f, "answered {what}"),
            Held::Stalled => f.write_str("accepted the connection and then stalled"),
            Held::Reset => f.write_str("reset the connection"),
            Held::Closed => f.write_str("accepted the connection and closed it without a word"),
            Held::ConnectTimedOut => write!(f, "did not complete a connect within {CONNECT_TIMEOUT:?}"),
            Held::Refused(kind) => write!(f, "rejected the connection ({kind})"),
            Held::Other(text) => write!(f, "could not be checked: {text}"),
        }
    }
}

/// Ok when every address `url` (http or https) resolves to refuses a connection.
pub fn check_free(url: &str) -> Result<(), PreflightError> {
    let parsed = Url::parse(url).map_err(|e| bad(url, e.to_string()))?;
    check_parsed(url, &parsed)
}

/// [`check_free`] for `HOST:PORT` or `[::1]:PORT` (the form of `--listen`), as `http://HOST:PORT/`.
pub fn check_free_addr(addr: &str) -> Result<(), PreflightError> {
    let url = format!("http://{addr}");
    if addr.contains(['/', '?', '#', '@']) {
        return Err(bad(&url, "expected HOST:PORT".into()));
    }
    let parsed = Url::parse(&url).map_err(|e| bad(&url, e.to_string()))?;
    check_parsed(&url, &parsed)
}

fn bad(url: &str, why: String) -> PreflightError {
    PreflightError::BadUrl { url: url.to_owned(), why }
}

fn check_parsed(url: &str, parsed: &Url) -> Result<(), PreflightError> {
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad(url, format!("scheme `{}` is not http or https", parsed.scheme())));
    }
    let port = parsed.port_or_known_default().ok_or_else(|| bad(url, "no port".into()))?;
    if port == 0 {
        return Err(bad(url, "port 0 names no port".into()));
    }
    let host = parsed.host().ok_or_else(|| bad(url, "no host".into()))?;
    let host_header = format!("{host}:{port}");
    for address in resolve(url, &host, port)? {
        if let Some(why) = probe(address, &host_header) {
            return Err(PreflightError::Held(PortHeld { url: url.to_owned(), address, why }));
        }
    }
    Ok(())
}

/// Every address of `host`, in resolver order, without repeats. `localhost` always includes both
/// loopbacks: a leftover on either one would answer a client that picks it.
fn resolve(url: &str, host: &Host<&str>, port: u16) -> Result<Vec<SocketAddr>, PreflightError> {
    let name = match host {
        Host::Ipv4(ip) => return Ok(vec![SocketAddr::new(IpAddr::V4(*ip), port)]),
        Host::Ipv6(ip) => return Ok(vec![SocketAddr::new(IpAddr::V6(*ip), port)]),
        Host::Domain(name) => *name,
    };
    let localhost = name.eq_ignore_ascii_case("localhost");
    let fail = |source| PreflightError::Resolve { url: url.to_owned(), host: name.to_owned(), source };
    let mut found: Vec<SocketAddr> = match (name, port).to_socket_addrs() {
        Ok(addrs) => addrs.collect(),
        // The two loopbacks are known without a resolver.
        Err(_) if localhost => Vec::new(),
        Err(err) => return Err(fail(err)),
    };
    if localhost {
        found.push(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
        found.push(SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), port));
    }
    let mut unique = Vec::with_capacity(found.len());
    for addr in found {
        if !unique.contains(&addr) {
            unique.push(addr);
        }
    }
    if unique.is_empty() {
        return Err(fail(io::Error::new(ErrorKind::NotFound, "the name resolves to no address")));
    }
    Ok(unique)
}

/// None when `address` is free; else what the holder did.
fn probe(address: SocketAddr, host_header: &str) -> Option<Held> {
    match TcpStream::connect_timeout(&address, CONNECT_TIMEOUT) {
        Ok(stream) => Some(listen_to(stream, host_header)),
        Err(err) if is_free(&err) => None,
        Err(err) => Some(match err.kind() {
            ErrorKind::TimedOut | ErrorKind::WouldBlock => Held::ConnectTimedOut,
            ErrorKind::ConnectionReset => Held::Reset,
            kind @ (ErrorKind::PermissionDenied | ErrorKind::ConnectionAborted) => Held::Refused(kind),
            _ => Held::Other(err.to_string()),
        }),
    }
}

/// Refused, or an address this machine cannot reach at all (e.g. `::1` without IPv6): nobody
/// could be listening there.
fn is_free(err: &io::Error) -> bool {
    use ErrorKind::{AddrNotAvailable, ConnectionRefused, HostUnreachable, NetworkUnreachable};
    if matches!(err.kind(), ConnectionRefused | AddrNotAvailable | NetworkUnreachable | HostUnreachable) {
        return true;
    }
    // ECONNREFUSED, EADDRNOTAVAIL, ENETUNREACH, EHOSTUNREACH, in case std maps one differently.
    cfg!(target_os = "linux") && matches!(err.raw_os_error(), Some(111 | 99 | 101 | 113))
}

/// Something accepted: ask it a question and name what it did.
fn listen_to(mut stream: TcpStream, host_header: &str) -> Held {
    // A holder that never reads must not block us; a failed write still lets us read its answer.
    let _ = stream.set_write_timeout(Some(STALL_TIMEOUT));
    let _ = stream.write_all(format!("GET / HTTP/1.0\r\nHost: {host_header}\r\n\r\n").as_bytes());
    let deadline = Instant::now() + STALL_TIMEOUT;
    let mut got = Vec::with_capacity(PEEK_BYTES);
    let mut buf = [0u8; PEEK_BYTES];
    // Read until the status line is in, the bytes stop, or the stall deadline passes.
    while got.len() < PEEK_BYTES && !got.contains(&b'\n') {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match stream.read(&mut buf[..PEEK_BYTES - got.len()]) {
            Ok(0) => return if got.is_empty() { Held::Closed } else { answered(&got) },
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(err) if err.kind() == ErrorKind::Interrupted => continue,
            // What arrived before the error is the answer.
            Err(_) if !got.is_empty() => break,
            Err(err) => {
                return match err.kind() {
                    ErrorKind::TimedOut | ErrorKind::WouldBlock => Held::Stalled,
                    ErrorKind::ConnectionReset => Held::Reset,
                    _ => Held::Other(err.to_string()),
                };
            }
        }
    }
    if got.is_empty() { Held::Stalled } else { answered(&got) }
}

fn answered(bytes: &[u8]) -> Held {
    let Some(rest) = bytes.strip_prefix(b"HTTP/") else {
        return Held::Answered("with non-HTTP bytes".into());
    };
    let text = String::from_utf8_lossy(rest);
    let status = text.split_ascii_whitespace().nth(1).filter(|s| s.len() == 3 && s.bytes().all(|b| b.is_ascii_digit()));
    Held::Answered(match status {
        Some(code) => format!("HTTP {code}"),
        None => "HTTP without a readable status".into(),
    })
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::sync::mpsc;
    use std::thread;

    use super::*;

    fn port_of(listener: &TcpListener) -> u16 {
        listener.local_addr().unwrap().port()
    }

    /// A loopback listener on `[::1]:0`, or None (with a note) on a machine without IPv6.
    ///
    /// The rule of `hangar_tests::skip` (which this crate cannot use: that one depends on it):
    /// under `CI=true` a skip fails the test unless `HANGAR_TEST_SKIP` names it (comma-separated
    /// test names or prefixes).
    fn v6_listener() -> Option<TcpListener> {
        let err = match TcpListener::bind("[::1]:0") {
            Ok(listener) => return Some(listener),
            Err(err) => err,
        };
        let thread = thread::current();
        let test = thread.name().unwrap_or_default();
        let allowed = std::env::var("HANGAR_TEST_SKIP").unwrap_or_default();
        let named = allowed.split(',').map(str::trim).any(|name| !name.is_empty() && test.starts_with(name));
        let ci = std::env::var("CI").is_ok_and(|ci| ci == "true");
        assert!(!ci || named, "{test}: cannot bind [::1]:0 ({err}); under CI=true name it in HANGAR_TEST_SKIP");
        println!("note: skipping the IPv6 cases of {test}, cannot bind [::1]:0: {err}");
        None
    }

    /// Accepts one connection on a thread and does `then` with it; the returned receiver yields
    /// the stream afterwards, so a test can keep it open until it ends.
    fn accept_once(listener: TcpListener, then: fn(&mut TcpStream)) -> mpsc::Receiver<TcpStream> {
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            then(&mut stream);
            let _ = tx.send(stream);
        });
        rx
    }

    fn held(result: Result<(), PreflightError>) -> PortHeld {
        match result {
            Err(PreflightError::Held(held)) => held,
            other => panic!("expected Held, got {other:?}"),
        }
    }

    #[test]
    fn a_port_nobody_holds_is_free() {
        let port = port_of(&TcpListener::bind("127.0.0.1:0").unwrap());
        check_free(&format!("http://127.0.0.1:{port}/mcp")).unwrap();
        check_free_addr(&format!("127.0.0.1:{port}")).unwrap();
    }

    #[test]
    fn an_http_answer_is_held_and_named() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = port_of(&listener);
        let _served = accept_once(listener, |stream| {
            let _ = stream.read(&mut [0u8; 256]);
            stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").unwrap();
        });
        let url = format!("http://127.0.0.1:{port}/mcp");
        let held = held(check_free(&url));
        assert_eq!(held.why, Held::Answered("HTTP 200".into()));
        assert_eq!(held.to_string(), format!("{url} is already in use: 127.0.0.1:{port} answered HTTP 200"));
    }

    #[test]
    fn non_http_bytes_are_an_answer_too() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = port_of(&listener);
        let _served = accept_once(listener, |stream| stream.write_all(b"+OK redis\r\n").unwrap());
        let held = held(check_free_addr(&format!("127.0.0.1:{port}")));
        assert_eq!(held.why, Held::Answered("with non-HTTP bytes".into()));
        assert_eq!(held.url, format!("http://127.0.0.1:{port}"));
    }

    #[test]
    fn an_accepted_silent_connection_is_a_stall() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = port_of(&listener);
        let kept = accept_once(listener, |_| {});
        let held = held(check_free(&format!("http://127.0.0.1:{port}/")));
        assert_eq!(held.why, Held::Stalled);
        assert!(held.to_string().contains("accepted the connection and then stalled"), "{held}");
        drop(kept);
    }

    #[test]
    fn accepting_and_closing_is_held() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = port_of(&listener);
        let _closed = accept_once(listener, |stream| stream.shutdown(std::net::Shutdown::Both).unwrap());
        let held = held(check_free(&format!("http://127.0.0.1:{port}/")));
        // Closing with our request unread may send a reset instead of a FIN.
        assert!(matches!(held.why, Held::Closed | Held::Reset), "{held}");
    }

    /// A leftover on one loopback holds exactly the URLs that resolve to that loopback.
    #[test]
    fn leftovers_hold_the_addresses_they_are_on() {
        let Some(v6) = v6_listener() else { return };
        // Leftovers that accept (in the kernel's backlog) and never answer.
        let v4 = TcpListener::bind("127.0.0.1:0").unwrap();
        let cases = [(&v4, "127.0.0.1", [true, true, false]), (&v6, "::1", [true, false, true])];
        for (leftover, on, expect) in cases {
            let port = port_of(leftover);
            let held_on = SocketAddr::new(on.parse().unwrap(), port);
            for (host, held) in ["localhost", "127.0.0.1", "[::1]"].into_iter().zip(expect) {
                let url = format!("http://{host}:{port}/");
                match check_free(&url) {
                    Err(PreflightError::Held(h)) if held => {
                        assert_eq!((h.url.as_str(), h.address), (url.as_str(), held_on));
                        assert!(h.to_string().starts_with(&format!("{url} is already in use: {held_on} ")), "{h}");
                    }
                    Ok(()) if !held => {}
                    other => panic!("leftover on {held_on}, {url}: expected held={held}, got {other:?}"),
                }
            }
        }
    }

    #[test]
    fn unusable_urls_are_named() {
        for (url, why) in [
            ("ftp://127.0.0.1:21/", "scheme `ftp` is not http or https"),
            ("http://127.0.0.1:0/", "port 0 names no port"),
        ] {
            match check_free(url) {
                Err(err @ PreflightError::BadUrl { .. }) => {
                    assert_eq!(err.to_string(), format!("{url}: not a usable URL: {why}"))
                }
                other => panic!("{url}: {other:?}"),
            }
        }
        for bad in ["not a url", "http://", "localhost:8000/mcp", "[::1:80"] {
            assert!(matches!(check_free_addr(bad), Err(PreflightError::BadUrl { .. })), "{bad}");
        }
        assert!(matches!(check_free("not a url"), Err(PreflightError::BadUrl { .. })));
    }

    #[test]
    fn localhost_always_means_both_loopbacks() {
        let addrs = resolve("u", &Host::Domain("localhost"), 8000).unwrap();
        for want in ["127.0.0.1:8000", "[::1]:8000"] {
            assert_eq!(addrs.iter().filter(|a| a.to_string() == want).count(), 1, "{addrs:?}");
        }
        let literal = resolve("u", &Host::Ipv6(Ipv6Addr::LOCALHOST), 8000).unwrap();
        assert_eq!(literal, vec!["[::1]:8000".parse().unwrap()]);
    }

    #[test]
    fn status_lines_are_read() {
        assert_eq!(answered(b"HTTP/1.1 404 Not Found\r\n"), Held::Answered("HTTP 404".into()));
        assert_eq!(answered(b"HTTP/1.0 2"), Held::Answered("HTTP without a readable status".into()));
        assert_eq!(answered(b"SSH-2.0-OpenSSH\r\n"), Held::Answered("with non-HTTP bytes".into()));
    }
}
