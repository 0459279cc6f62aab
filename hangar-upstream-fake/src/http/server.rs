//! Accepting connections and serving each on its own thread: requests are
//! read one after another (keep-alive) until the client closes.

use std::io::{self, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::sync::mpsc::Receiver;

use serde_json::Value;

use super::request::{self, HeadError, Reject};
use super::response::Response;
use super::route::{App, Reply};
use crate::log::log;
use crate::output::Output;

/// Pause after a failed accept (e.g. out of file descriptors), so the loop
/// does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// How long a closing connection keeps draining what the client still sends.
const LINGER: Duration = Duration::from_secs(2);

pub fn accept_loop(listener: &TcpListener, app: &Arc<App>, out: &Arc<Output>) -> ! {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                let (app, out) = (Arc::clone(app), Arc::clone(out));
                let spawned = std::thread::Builder::new()
                    .name("http-conn".into())
                    .spawn(move || serve_connection(stream, &app, &out));
                if let Err(e) = spawned {
                    log(&format!("cannot start a connection thread, dropping the connection: {e}"));
                }
            }
            Err(e) => {
                log(&format!("accept failed: {e}"));
                std::thread::sleep(ACCEPT_BACKOFF);
            }
        }
    }
}

fn serve_connection(stream: TcpStream, app: &App, out: &Output) {
    let _ = stream.set_nodelay(true);
    let Ok(mut writer) = stream.try_clone() else { return };
    let mut reader = BufReader::new(stream);
    loop {
        let head = match request::read_head(&mut reader) {
            Ok(head) => head,
            Err(HeadError::Closed | HeadError::Broken) => return,
            Err(HeadError::Reject(r)) => return refuse(&mut writer, &mut reader, app, &r),
        };
        let len = match head.body_len() {
            Ok(len) => len,
            Err(r) => return refuse(&mut writer, &mut reader, app, &r),
        };
        if len > 0 && head.expects_continue() && writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").is_err() {
            return;
        }
        let Ok(body) = request::read_body(&mut reader, len) else { return };
        let (resp, is_call) = match app.route(&head, &body) {
            Reply::Send { resp, is_call } => (resp, is_call),
            Reply::Hold => return hold(&mut reader),
            Reply::Stream { head, events } => return serve_events(&mut writer, &head, &events, app.sse_line_end),
        };
        let keep_alive = head.keep_alive() && !resp.closes();
        if resp.write_to(&mut writer, keep_alive).is_err() {
            return;
        }
        if is_call {
            out.call_answered_elsewhere();
        }
        if !keep_alive {
            return close(&writer, &mut reader);
        }
    }
}

/// Writes `head`, then each event as it comes, until the events end or the client goes.
fn serve_events(writer: &mut TcpStream, head: &Response, events: &Receiver<Value>, end: &str) {
    if head.write_to(writer, false).is_err() {
        return;
    }
    for message in events {
        let event = format!("event: message{end}data: {message}{end}{end}");
        if writer.write_all(event.as_bytes()).and_then(|()| writer.flush()).is_err() {
            return;
        }
    }
}

/// Answers a request we will not read to its end, then closes.
fn refuse(writer: &mut TcpStream, reader: &mut BufReader<TcpStream>, app: &App, reject: &Reject) {
    if app.rejected(reject).write_to(writer, false).is_ok() {
        close(writer, reader);
    }
}

/// Never answers: waits for the client to leave, discarding what it sends.
fn hold(reader: &mut BufReader<TcpStream>) {
    let _ = io::copy(reader, &mut io::sink());
}

/// Half-closes, then drains the client's leftovers for a bounded time:
/// closing with unread data makes the kernel send a reset, which can
/// destroy the response before the client reads it (e.g. a 413).
fn close(writer: &TcpStream, reader: &mut BufReader<TcpStream>) {
    let _ = writer.shutdown(Shutdown::Write);
    let deadline = Instant::now() + LINGER;
    let mut buf = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || reader.get_ref().set_read_timeout(Some(left)).is_err() {
            return;
        }
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}
