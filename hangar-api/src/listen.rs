//! `--listen`: checking the address, refusing a port something already holds (rule 4),
//! resolving it and binding the first address that works; or, under systemd socket activation
//! (`hangar-api.socket`), the listening socket the service manager passed as fd 3.

use std::io;
use std::net::SocketAddr;

use hangar_runtime::exit::{EX_UNAVAILABLE, Sysexit};
use tokio::net::TcpListener;

/// Why the API cannot listen, as one line naming the address and the OS's reason.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on http://{address}: {reason}")]
pub struct ListenError {
    pub address: String,
    pub reason: String,
}

impl Sysexit for ListenError {
    fn exit_code(&self) -> u8 {
        EX_UNAVAILABLE
    }
}

/// clap's check of `--listen`: `HOST:PORT`, with an IPv6 host in brackets.
pub fn parse_addr(text: &str) -> Result<String, String> {
    let usage = || format!("`{text}` is not HOST:PORT (e.g. 127.0.0.1:8000, localhost:8000, [::1]:8000)");
    let (host, port) = text.rsplit_once(':').ok_or_else(usage)?;
    let bracketed = host.starts_with('[') && host.ends_with(']') && host.len() > 2;
    if host.is_empty() || ((host.contains(':') || host.starts_with('[')) && !bracketed) || port.parse::<u16>().is_err()
    {
        return Err(usage());
    }
    Ok(text.to_owned())
}

/// Rule 4 before binding: Err (the whole one-line reason) if anything answers, stalls or resets
/// on an address `address` resolves to. Port 0 is skipped: the kernel picks a free one.
pub async fn preflight(address: &str) -> Result<(), String> {
    if address.rsplit_once(':').and_then(|(_, port)| port.parse::<u16>().ok()) == Some(0) {
        return Ok(());
    }
    let owned = address.to_owned();
    // Blocking connects, up to ~1.5 s per address: keep them off the async workers.
    match tokio::task::spawn_blocking(move || hangar_core::preflight::check_free_addr(&owned)).await {
        Ok(checked) => checked.map_err(|err| err.to_string()),
        Err(join) => Err(format!("http://{address}: the port check failed: {join}")),
    }
}

/// Resolves `address` and binds the first resolved address that accepts (`localhost` may name
/// both 127.0.0.1 and ::1, and either may be unavailable). With `loopback_only`, only loopback
/// addresses are tried: an address judged loopback by its name is never bound beyond it.
pub async fn bind(address: &str, loopback_only: bool) -> Result<TcpListener, ListenError> {
    let fail = |reason: String| ListenError { address: address.to_owned(), reason };
    let resolved: Vec<SocketAddr> = tokio::net::lookup_host(address)
        .await
        .map_err(|e| fail(reason(&e)))?
        .filter(|addr| !loopback_only || addr.ip().is_loopback())
        .collect();
    let mut last = None;
    for addr in resolved {
        match TcpListener::bind(addr).await {
            Ok(listener) => return Ok(listener),
            Err(err) => last = Some(err),
        }
    }
    let nothing =
        if loopback_only { "the name resolves to no loopback address" } else { "the name resolves to no address" };
    Err(fail(last.map_or_else(|| nothing.to_owned(), |e| reason(&e))))
}

/// The address `listener` listens on; `address` names it in the error.
pub fn local_addr(listener: &TcpListener, address: &str) -> Result<SocketAddr, ListenError> {
    listener.local_addr().map_err(|err| ListenError { address: address.to_owned(), reason: reason(&err) })
}

/// What a socket-activated API says instead of an address (the listener is not ours to name).
pub const INHERITED: &str = "the socket passed in LISTEN_FDS (fd 3)";

/// Whether systemd passed us listening sockets: `LISTEN_FDS` is a positive count and
/// `LISTEN_PID` names this very process (a variable inherited from a parent is not for us).
fn activated(listen_fds: Option<&str>, listen_pid: Option<&str>, pid: u32) -> bool {
    listen_fds.and_then(|n| n.parse::<u32>().ok()).is_some_and(|n| n > 0)
        && listen_pid.and_then(|p| p.parse::<u32>().ok()) == Some(pid)
}

/// Socket activation (`sd_listen_fds(3)`): the listening TCP socket systemd passed as fd 3, when
/// `LISTEN_FDS`/`LISTEN_PID` say it is ours; `Ok(None)` to bind `--listen` as usual. Several
/// instances may hold the same socket and accept on it side by side. There is no port
/// preflight here: the service manager owns that socket, and connections to it are ours.
///
/// Call it before any thread starts: it unsets `LISTEN_FDS` and `LISTEN_PID`.
pub fn from_systemd() -> Result<Option<std::net::TcpListener>, ListenError> {
    let var = |name| std::env::var(name).ok();
    if !activated(var("LISTEN_FDS").as_deref(), var("LISTEN_PID").as_deref(), std::process::id()) {
        return Ok(None);
    }
    let fail = |reason: String| ListenError { address: INHERITED.to_owned(), reason };
    match listenfd::ListenFd::from_env().take_tcp_listener(0) {
        Ok(Some(listener)) => Ok(Some(listener)),
        Ok(None) => Err(fail("no socket was passed".to_owned())),
        Err(err) => Err(fail(reason(&err))),
    }
}

/// `--listen-stdin`: the listening TCP socket passed as standard input (inetd's "wait" style),
/// as the supervisor passes on the one `hangar run` bound. Anything else there is refused.
pub fn from_stdin() -> Result<std::net::TcpListener, ListenError> {
    use std::os::fd::AsFd;
    let fail = |reason: String| ListenError { address: STDIN.to_owned(), reason };
    let fd = io::stdin().as_fd().try_clone_to_owned().map_err(|err| fail(reason(&err)))?;
    let listener = std::net::TcpListener::from(fd);
    // A listening TCP socket has a local address and takes no data; anything else is refused.
    match listener.local_addr() {
        Ok(_) if listener.take_error().is_ok() => Ok(listener),
        Ok(_) => Err(fail("it is not a usable socket".to_owned())),
        Err(_) => Err(fail("it is not a listening TCP socket".to_owned())),
    }
}

/// What an API serving on its standard input says instead of an address.
pub const STDIN: &str = "the socket passed as standard input";

/// The inherited listener, made ready for tokio (non-blocking, on this runtime).
pub fn adopt(listener: std::net::TcpListener) -> Result<TcpListener, ListenError> {
    let fail = |err: io::Error| ListenError { address: INHERITED.to_owned(), reason: reason(&err) };
    listener.set_nonblocking(true).map_err(fail)?;
    TcpListener::from_std(listener).map_err(fail)
}

/// The OS's words without the `(os error N)` suffix, starting lower-case to read as one sentence.
pub fn reason(err: &io::Error) -> String {
    let text = err.to_string();
    let text = match text.rfind(" (os error ") {
        Some(at) => &text[..at],
        None => &text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn accepts_host_port_forms() {
        for ok in ["127.0.0.1:8000", "localhost:0", "[::1]:8000", "0.0.0.0:65535"] {
            assert_eq!(parse_addr(ok).as_deref(), Ok(ok));
        }
        for bad in ["8000", "localhost", "::1:8000", ":8000", "127.0.0.1:70000", "[]:80", "localhost:http"] {
            assert!(parse_addr(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_listen_fds_addressed_to_this_pid_count() {
        assert!(activated(Some("1"), Some("42"), 42));
        assert!(activated(Some("2"), Some("42"), 42));
        assert!(!activated(Some("1"), Some("41"), 42), "another process's fds");
        assert!(!activated(Some("1"), None, 42), "no LISTEN_PID");
        assert!(!activated(None, Some("42"), 42), "no LISTEN_FDS");
        assert!(!activated(Some("0"), Some("42"), 42), "zero fds");
        assert!(!activated(Some("x"), Some("42"), 42));
        assert!(!activated(Some("1"), Some(""), 42));
    }

    #[test]
    fn without_listen_fds_it_binds_as_usual() {
        // The test runner is not socket-activated: LISTEN_PID (if any) is not this process.
        assert!(from_systemd().unwrap().is_none());
    }

    #[test]
    fn os_reasons_read_as_one_line() {
        let err = io::Error::from_raw_os_error(98);
        assert_eq!(reason(&err), "address already in use");
    }

    #[tokio::test]
    async fn port_zero_skips_the_preflight_and_a_held_port_is_refused() {
        let held = bind("127.0.0.1:0", true).await.unwrap();
        let taken = held.local_addr().unwrap().to_string();
        preflight("127.0.0.1:0").await.unwrap();
        let why = preflight(&taken).await.unwrap_err();
        assert!(why.starts_with(&format!("http://{taken} is already in use: {taken} ")), "{why}");
    }

    #[tokio::test]
    async fn a_name_judged_loopback_is_bound_on_loopback_only() {
        let listener = bind("localhost:0", true).await.unwrap();
        assert!(listener.local_addr().unwrap().ip().is_loopback());
    }

    #[tokio::test]
    async fn a_taken_port_names_address_and_reason() {
        let first = bind("127.0.0.1:0", true).await.unwrap();
        let taken = first.local_addr().unwrap().to_string();
        let err = bind(&taken, true).await.unwrap_err();
        assert_eq!(err.to_string(), format!("cannot listen on http://{taken}: address already in use"));
    }
}
