//! The harness itself never grades a stranger: starting a hangar on a held port is refused
//! before anything runs against it.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};

use hangar_tests::{Hangar, free_port};

const CONFIG: &str = "mcp_servers:\n  math:\n    command: [\"{fake}\", \"--tools\", \"add\"]\n";

#[test]
fn a_held_port_is_refused_and_nothing_is_graded_against_it() {
    let leftover = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = leftover.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in leftover.incoming().flatten() {
            let mut stream = stream;
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        }
    });
    let graded = AtomicUsize::new(0);
    let grade = |hangar: &Hangar| {
        graded.fetch_add(1, Ordering::SeqCst);
        hangar.get("/api/mcp_servers").status
    };
    match Hangar::start_on(CONFIG, &addr.to_string()) {
        Ok(hangar) => panic!("started on a held port; graded {}", grade(&hangar)),
        Err(err) => {
            let message = err.to_string();
            assert!(message.contains(&format!("http://{addr}")), "{message}");
            assert!(message.contains("answered HTTP 200"), "{message}");
        }
    }
    assert_eq!(graded.load(Ordering::SeqCst), 0, "the graded function never ran");
}

#[test]
fn a_free_port_starts_and_serves() {
    let port = free_port();
    let hangar = Hangar::start_on(CONFIG, &format!("127.0.0.1:{port}")).expect("a free port is not refused");
    assert_eq!(hangar.base, format!("http://127.0.0.1:{port}"));
    assert_eq!(hangar.get("/api/mcp_servers").status, 200);
}
