//! Helpers for the CLI's unit tests: a one-shot HTTP server standing in for the hangar's API.

/// Serves one request with `status` and `body`; hands back the request's head.
pub fn answer_once(status: &str, body: &'static str) -> (String, std::thread::JoinHandle<String>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let status = status.to_owned();
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut head = String::new();
        while reader.read_line(&mut head).unwrap() > 2 && !head.ends_with("\r\n\r\n") {}
        let mut stream = stream;
        let reply = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(reply.as_bytes()).unwrap();
        head
    });
    (url, server)
}
