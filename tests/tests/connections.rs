//! One local process cannot exhaust the API's connections. Against a real hangar and an API run
//! with small limits (a cap of 1000, 2 s for headers, 5 s idle), a flood of thousands of
//! connections: the cap filled with event streams, thousands more past it, slow-header
//! connections dribbling their headers or bodies, and idle keep-alive ones. Normal requests (a read, readiness and
//! an operator's POST) are still answered through the reserve, connections past the cap are
//! refused with a 503 while those already open are still served, slow and idle connections are
//! closed by their deadlines, event streams are never cut, and the API's memory comes back down.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hangar_tests::{Hangar, MODERN, api_listening_address, bin, poll, proc_status_kib};

const CAP: usize = 1000;
const HEADER_TIMEOUT_S: &str = "2";
const IDLE_TIMEOUT_S: &str = "5";
/// Connections past the cap, sending nothing.
const PAST_CAP: usize = 2500;
/// Kept-alive connections that already made a request when the cap filled up.
const ALREADY_OPEN: usize = 10;
/// Connections that dribble their request headers a byte at a time.
const SLOW: usize = 300;
/// Connections that send their headers, then dribble the body.
const SLOW_BODY: usize = 50;
/// Kept-alive connections left idle after one request.
const IDLE: usize = 600;
/// Event streams kept open through the idle and slow phase.
const KEPT_STREAMS: usize = 10;
/// How far above its baseline the API's RSS may stay once the connections are gone.
const RSS_MARGIN_KIB: u64 = 8 * 1024;
/// A generous bound for anything the API should answer.
const ANSWER: Duration = Duration::from_secs(10);

struct Api(Child);

impl Drop for Api {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An API of our own on the hangar's socket, with the test's small limits, once it is ready.
fn api(hangar: &Hangar) -> (Api, String) {
    api_capped(hangar, CAP)
}

fn api_capped(hangar: &Hangar, cap: usize) -> (Api, String) {
    let log = std::fs::File::create(hangar.path("api.log")).unwrap();
    let mut child = Command::new(bin("hangar-api"))
        .arg("--socket")
        .arg(&hangar.socket)
        .args(["--listen", "127.0.0.1:0", "--max-connections", &cap.to_string()])
        .args(["--header-timeout-s", HEADER_TIMEOUT_S, "--idle-timeout-s", IDLE_TIMEOUT_S])
        .env("HANGAR_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap();
    let address = api_listening_address(&mut child);
    let api = Api(child);
    poll("our API to be ready", ANSWER, || (request(&address, "GET", "/health/ready", "")?.0 == 200).then_some(()));
    (api, address)
}

/// The test itself holds thousands of sockets.
fn raise_own_fd_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    }
    assert!(hard >= 5000, "the test needs ~4000 open files; the hard limit is {hard}");
}

fn connect(address: &str) -> TcpStream {
    let stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(ANSWER)).unwrap();
    stream.set_write_timeout(Some(ANSWER)).unwrap();
    stream
}

/// Reads one response (head and a `Content-Length` body): its status and body, or None if the
/// connection closed, reset or timed out first.
fn read_response(stream: &mut TcpStream) -> Option<(u16, String)> {
    let mut data = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&data).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|line| line.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if body.len() >= length {
                let status = head.split(' ').nth(1)?.parse().ok()?;
                return Some((status, body.to_owned()));
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => data.extend_from_slice(&chunk[..n]),
        }
    }
}

/// One request on a fresh connection that asks to be closed after it.
fn request(address: &str, method: &str, path: &str, body: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(ANSWER)).ok()?;
    let content_type = if body.is_empty() { "" } else { "Content-Type: application/json\r\n" };
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n{content_type}Content-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(format!("{head}{body}").as_bytes()).ok()?;
    read_response(&mut stream)
}

fn get_on(stream: &mut TcpStream, address: &str, path: &str) -> Option<(u16, String)> {
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: {address}\r\n\r\n").as_bytes()).ok()?;
    read_response(stream)
}

/// A 2026-07-28 `subscriptions/listen`: an event stream that stays open. Returns once the
/// acknowledgement arrived.
fn open_stream(address: &str) -> TcpStream {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"{MODERN}","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    let mut stream = connect(address);
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: {MODERN}\r\nMcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    stream
}

fn await_acknowledgement(stream: &mut TcpStream) {
    let mut seen = Vec::new();
    let mut chunk = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("notifications/subscriptions/acknowledged") {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => {
                panic!("an event stream ended before its acknowledgement: {:?}", String::from_utf8_lossy(&seen))
            }
            Ok(n) => seen.extend_from_slice(&chunk[..n]),
        }
    }
    assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&seen));
}

/// Whether the peer closed (EOF or reset), without waiting; data that arrives is skipped.
fn closed(stream: &mut TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut chunk = [0u8; 4096];
    let closed = loop {
        match stream.read(&mut chunk) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(err) if err.kind() == ErrorKind::WouldBlock => break false,
            Err(_) => break true,
        }
    };
    stream.set_nonblocking(false).unwrap();
    closed
}

fn open_files(pid: u32) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

fn rss_kib(pid: u32) -> u64 {
    proc_status_kib(pid, "VmRSS").unwrap()
}

fn assert_normal_requests_answered(address: &str) {
    for (method, path, body) in
        [("GET", "/api/mcp_servers", ""), ("GET", "/health/ready", ""), ("POST", "/api/mcp_servers/math/start", "{}")]
    {
        let (status, text) = poll(&format!("{method} {path} to be answered"), Duration::from_secs(30), || {
            request(address, method, path, body).filter(|(status, _)| *status != 503)
        });
        assert_eq!(status, 200, "{method} {path}: {text}");
    }
}

#[test]
fn a_flood_of_connections_neither_starves_the_api_nor_keeps_its_memory() {
    raise_own_fd_limit();
    let hangar = Hangar::start("mcp_servers:\n  math:\n    command: [\"{fake}\", \"--tools\", \"add\"]\n");
    let (api, address) = api(&hangar);
    let pid = api.0.id();
    // Warm up every path the test takes once, so the baseline includes what is allocated once.
    assert_normal_requests_answered(&address);
    let mut warm = open_stream(&address);
    await_acknowledgement(&mut warm);
    drop(warm);
    poll("the warm-up to settle", ANSWER, || (request(&address, "GET", "/health/live", "")?.0 == 200).then_some(()));
    let baseline = rss_kib(pid);

    // Fill the cap: event streams (never idle), then kept-alive connections that made a request.
    let mut streams: Vec<TcpStream> = (0..CAP - ALREADY_OPEN).map(|_| open_stream(&address)).collect();
    for stream in &mut streams {
        await_acknowledgement(stream);
    }
    let mut already_open: Vec<TcpStream> = (0..ALREADY_OPEN).map(|_| connect(&address)).collect();
    for stream in &mut already_open {
        assert_eq!(get_on(stream, &address, "/health/live").map(|r| r.0), Some(200));
    }

    // Past the cap: a 503 and a close, but for the few the reserve takes (closed at their header
    // deadline); those already open are still served.
    let mut past_cap = Vec::new();
    while past_cap.len() < PAST_CAP {
        past_cap.extend((0..PAST_CAP / 10).map(|_| connect(&address)));
        // Well within their idle timeout, so they stay open.
        for stream in &mut already_open {
            assert_eq!(
                get_on(stream, &address, "/health/live").map(|r| r.0),
                Some(200),
                "an open connection is served"
            );
        }
    }
    let mut refused_with_503 = 0;
    for stream in &mut past_cap {
        let mut text = String::new();
        match stream.read_to_string(&mut text) {
            Ok(_) => {}
            Err(err) if err.kind() == ErrorKind::ConnectionReset => {}
            Err(err) => panic!("a connection past the cap was left open: {err}"),
        }
        if text.starts_with("HTTP/1.1 503") {
            refused_with_503 += 1;
        } else {
            assert_eq!(text, "", "a connection past the cap that sent nothing got an answer");
        }
    }
    drop(past_cap);
    assert!(refused_with_503 >= PAST_CAP / 2, "only {refused_with_503} of {PAST_CAP} past the cap read a 503");

    // The cap is still full of streams: the reserve answers a read, readiness and an admin POST.
    assert_normal_requests_answered(&address);

    // Slow headers and idle keep-alives, with a few streams kept open.
    let mut kept_streams = streams.split_off(streams.len() - KEPT_STREAMS);
    drop(streams);
    drop(already_open);
    poll("the closed streams' connections to be gone", ANSWER, || (open_files(pid)? < KEPT_STREAMS + 64).then_some(()));
    let idle: Vec<TcpStream> = (0..IDLE)
        .map(|_| {
            let mut stream = connect(&address);
            assert_eq!(get_on(&mut stream, &address, "/health/live").map(|r| r.0), Some(200));
            stream
        })
        .collect();
    let mut idle = idle;
    let mut slow: Vec<TcpStream> = (0..SLOW)
        .map(|_| {
            let mut stream = connect(&address);
            let partial = format!("GET /api/mcp_servers HTTP/1.1\r\nHost: {address}\r\nX-Slow: ");
            stream.write_all(partial.as_bytes()).unwrap();
            stream
        })
        .collect();
    // And a few that send their headers but then dribble the body.
    slow.extend((0..SLOW_BODY).map(|_| {
        let mut stream = connect(&address);
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             MCP-Protocol-Version: {MODERN}\r\nMcp-Method: tools/list\r\nContent-Length: 100000\r\n\r\n{{"
        )
        .unwrap();
        stream
    }));
    let mut round = 0u32;
    poll("every slow-header and slow-body connection to be closed at its deadline", Duration::from_secs(30), || {
        round += 1;
        let open: Vec<&mut TcpStream> = slow.iter_mut().filter_map(|s| (!closed(s)).then_some(s)).collect();
        if open.is_empty() {
            return Some(());
        }
        // One more byte each every ~200 ms: a slowloris that keeps the headers coming.
        if round.is_multiple_of(10) {
            for stream in open {
                let _ = stream.write(b"a");
            }
        }
        None
    });
    poll("every idle keep-alive connection to be closed", Duration::from_secs(30), || {
        idle.iter_mut().all(closed).then_some(())
    });
    for stream in &mut kept_streams {
        assert!(!closed(stream), "an event stream was cut as if it were idle");
    }
    drop((kept_streams, slow, idle));
    poll("the API's connections to be gone", ANSWER, || (open_files(pid)? < 64).then_some(()));

    // Memory comes back down.
    let peak = proc_status_kib(pid, "VmHWM").unwrap();
    let after = poll("the API's RSS to come back near its baseline", Duration::from_secs(30), || {
        let now = rss_kib(pid);
        (now <= baseline + RSS_MARGIN_KIB).then_some(now)
    });
    eprintln!(
        "connections: {} streams, {PAST_CAP} past the cap ({refused_with_503} refused with 503), {IDLE} idle, {SLOW} slow headers, {SLOW_BODY} slow bodies; \
         hangar-api RSS baseline {baseline} KiB, peak {peak} KiB, after {after} KiB",
        CAP - ALREADY_OPEN
    );
    assert_normal_requests_answered(&address);
    // Refusals are summarised in the log, not a line per connection.
    let log = poll("the refusals to be summarised in the API's log", Duration::from_secs(20), || {
        let log = std::fs::read_to_string(hangar.path("api.log")).ok()?;
        log.contains("connection limit reached").then_some(log)
    });
    assert!(log.lines().count() < 100, "one line per connection?\n{log}");
    drop(api);
}

/// A flood that never lets up: the cap is full of event streams and one local process keeps
/// opening connections that send nothing, as fast as the API closes them. The reserve alone
/// would be held by the flood; a new connection instead evicts the one that has waited longest
/// without a request, so readiness, a read and an operator's POST, sent at once on connecting,
/// are still answered while the flood goes on, and the streams are never cut.
#[test]
fn a_flood_renewed_as_fast_as_it_is_closed_cannot_starve_probes_or_operators() {
    const SMALL_CAP: usize = 100;
    /// Silent connections the flood holds open at once (the oldest is closed for each new one).
    const FLOOD_HELD: usize = 300;
    raise_own_fd_limit();
    let hangar = Hangar::start("mcp_servers:\n  math:\n    command: [\"{fake}\", \"--tools\", \"add\"]\n");
    let (api, address) = api_capped(&hangar, SMALL_CAP);
    let mut streams: Vec<TcpStream> = (0..SMALL_CAP).map(|_| open_stream(&address)).collect();
    for stream in &mut streams {
        await_acknowledgement(stream);
    }
    let flooding = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let flood = {
        let (flooding, address) = (flooding.clone(), address.clone());
        std::thread::spawn(move || {
            let mut held = std::collections::VecDeque::new();
            let mut opened = 0usize;
            while flooding.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok(stream) = TcpStream::connect(&address) {
                    held.push_back(stream);
                    opened += 1;
                }
                if held.len() > FLOOD_HELD {
                    held.pop_front();
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            opened
        })
    };
    // The flood has taken the reserve many times over before the first request.
    poll("the flood to be refused", ANSWER, || {
        let log = std::fs::read_to_string(hangar.path("api.log")).ok()?;
        log.contains("connection limit reached").then_some(())
    });
    let mut answered = 0;
    let mut asked = 0;
    for _ in 0..5 {
        for (method, path, body) in [
            ("GET", "/health/ready", ""),
            ("GET", "/api/mcp_servers", ""),
            ("POST", "/api/mcp_servers/math/start", "{}"),
        ] {
            asked += 1;
            // One retry: a connection that arrives while every waiting one is being evicted is
            // refused with a 503 (and `retry-after: 1`).
            let status = (0..2)
                .map(|_| request(&address, method, path, body).map_or(0, |(status, _)| status))
                .find(|status| *status != 503)
                .unwrap_or(503);
            if status == 200 {
                answered += 1;
            }
        }
    }
    flooding.store(false, std::sync::atomic::Ordering::Relaxed);
    let opened = flood.join().unwrap();
    for stream in &mut streams {
        assert!(!closed(stream), "an event stream was cut to make room");
    }
    eprintln!("flood: {opened} connections opened; {answered} of {asked} requests answered 200");
    assert!(opened > 2 * FLOOD_HELD, "the flood did not run: {opened} connections");
    assert!(answered >= asked - 1, "only {answered} of {asked} requests got through the flood");
    drop(api);
}

/// Bodies that stall: hundreds of connections each send most of a megabyte of request body (the
/// limit) and then nothing more. Beyond a small free part, the bodies being received share a
/// budget, so the API's memory does not grow by what they sent, a normal request is still
/// answered, and each stalled body is closed at its deadline.
#[test]
fn stalled_large_bodies_do_not_grow_the_api_by_their_size() {
    const STALLED: usize = 600;
    /// What the stalled bodies sent in all, ~600 MiB, is far above what the API may hold.
    const PEAK_GROWTH_KIB: u64 = 300 * 1024;
    raise_own_fd_limit();
    let hangar = Hangar::start("mcp_servers:\n  math:\n    command: [\"{fake}\", \"--tools\", \"add\"]\n");
    let (api, address) = api(&hangar);
    let pid = api.0.id();
    assert_normal_requests_answered(&address);
    let baseline = rss_kib(pid);
    let almost_all = vec![b' '; (1 << 20) - 1];
    let mut stalled: Vec<TcpStream> = (0..STALLED)
        .map(|_| {
            let mut stream = connect(&address);
            write!(
                stream,
                "POST /api/mcp_servers/math/start HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                1 << 20
            )
            .unwrap();
            // As much as the socket takes at once: the rest waits in this process's buffers or is dropped.
            stream.set_nonblocking(true).unwrap();
            let _ = stream.write(&almost_all);
            stream.set_nonblocking(false).unwrap();
            stream
        })
        .collect();
    assert_normal_requests_answered(&address);
    poll("every stalled body to be closed at its deadline", Duration::from_secs(30), || {
        stalled.iter_mut().all(closed).then_some(())
    });
    drop(stalled);
    let peak = proc_status_kib(pid, "VmHWM").unwrap();
    eprintln!("stalled bodies: hangar-api RSS baseline {baseline} KiB, peak {peak} KiB");
    assert!(peak < baseline + PEAK_GROWTH_KIB, "the API grew from {baseline} KiB to {peak} KiB");
    poll("the API's RSS to come back near its baseline", Duration::from_secs(30), || {
        (rss_kib(pid) <= baseline + RSS_MARGIN_KIB).then_some(())
    });
    drop(api);
}
