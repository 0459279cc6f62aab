//! Connecting, the hello handshake, and the reader and writer of one live connection.
//!
//! The hello proves the control key, read from its file after the connect (the supervisor writes
//! a fresh one before it binds the socket, so a connection that works finds the current key).
//! The supervisor answers with its own hello, or refuses with an error frame (id 0) and closes.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hangar_core::access::Caller;
use hangar_core::ipc::{
    self, ClientFrame, ErrorKind, Hello, IpcError, MAX_FRAME_BYTES, Outcome, PROTOCOL_VERSION, ServerFrame,
};
use interprocess::local_socket::tokio::Stream;
use interprocess::local_socket::traits::tokio::Stream as _;
use interprocess::local_socket::{GenericFilePath, ToFsName as _};
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::{HEARTBEAT, Link, Shared, unreachable_error};
use crate::lines::{Line, read_line, write_batched};

const INITIAL_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// A peer that accepts but never greets is not a supervisor we can use.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
const WRITE_QUEUE: usize = 1024;

/// How one connection attempt ended.
enum Ended {
    /// Never got a connection (no socket yet, refused, ...).
    NotConnected(String),
    /// Connected, but cannot talk: the peer speaks another protocol version (or not ours at
    /// all), the control key cannot be read, or the supervisor refused the hello.
    Mismatch(IpcError),
    /// Was connected and handshaken; the connection then broke.
    Lost(String),
}

/// Keeps a connection up for as long as the client lives: connect, serve, and on any end
/// retry with a backoff of 50 ms doubling to 1 s (reset by every successful handshake).
pub(super) async fn maintain(shared: Arc<Shared>) {
    let mut backoff = INITIAL_BACKOFF;
    // Log the first failure of a run loudly and the retries quietly, so a long outage is one line.
    let mut quiet = false;
    loop {
        match session(&shared).await {
            Ended::Lost(reason) => {
                backoff = INITIAL_BACKOFF;
                quiet = false;
                tracing::warn!(socket = %shared.path.display(), %reason, "lost the connection to the supervisor");
            }
            Ended::NotConnected(reason) => {
                if quiet {
                    tracing::debug!(socket = %shared.path.display(), %reason, "supervisor still not reachable");
                } else {
                    tracing::warn!(socket = %shared.path.display(), %reason, "supervisor not reachable; retrying");
                    quiet = true;
                }
            }
            Ended::Mismatch(err) => {
                if !quiet {
                    tracing::error!(socket = %shared.path.display(), reason = %err.message, "cannot talk to the supervisor");
                    quiet = true;
                }
                shared.set_down_error(err);
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// One connection, from connect to its end.
async fn session(shared: &Shared) -> Ended {
    let stream = match connect(&shared.path).await {
        Ok(stream) => stream,
        Err(err) => return Ended::NotConnected(err.to_string()),
    };
    let mut reader = BufReader::new(&stream);
    let mut writer = &stream;
    let key = match crate::control_key::ControlKey::read(&shared.key_file) {
        Ok(key) => key,
        Err(err) => return Ended::Mismatch(IpcError::new(ErrorKind::SupervisorUnavailable, err.to_string())),
    };
    let hello = Hello::with_key(shared.role, key.proof());
    if let Err(ended) = handshake(&shared.path, hello, &mut reader, &mut writer).await {
        return ended;
    }
    tracing::info!(socket = %shared.path.display(), "connected to the supervisor");
    shared.heard();

    let (tx, rx) = mpsc::channel(WRITE_QUEUE);
    if shared.follow.is_some() {
        // Nobody waits for its reply; what matters is the events that follow it.
        let _ = tx.try_send(ipc::encode(&ClientFrame::Request {
            id: UNAWAITED_ID,
            op: ipc::Request::Subscribe,
            caller: Caller::hangar(),
        }));
    }
    let pings = tx.clone();
    shared.link_up(tx);
    shared.tell(Link::Up);
    let reason = tokio::select! {
        reason = read_loop(shared, &mut reader) => reason,
        () = heartbeat(shared, pings) => "the request queue closed".into(),
        written = write_batched(writer, rx) => match written {
            Ok(()) => "the request queue closed".into(),
            Err(err) => err.to_string(),
        },
    };
    shared.link_down(unreachable_error(&shared.path));
    shared.tell(Link::Down);
    Ended::Lost(reason)
}

async fn connect(path: &Path) -> std::io::Result<Stream> {
    let name = path.to_fs_name::<GenericFilePath>()?;
    Stream::connect(name).await
}

async fn handshake<R, W>(path: &Path, hello: Hello, reader: &mut R, writer: &mut W) -> Result<(), Ended>
where
    R: AsyncBufRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let hello = ipc::encode(&ClientFrame::Hello(hello));
    let sent = async {
        writer.write_all(&hello).await?;
        writer.flush().await
    };
    if let Err(err) = sent.await {
        return Err(Ended::NotConnected(err.to_string()));
    }
    let mut line = Vec::new();
    match tokio::time::timeout(HELLO_TIMEOUT, read_line(reader, &mut line, MAX_FRAME_BYTES)).await {
        Ok(Ok(Line::Complete)) => {}
        Ok(Ok(Line::Eof)) => return Err(Ended::NotConnected("the supervisor closed the connection at once".into())),
        Ok(Ok(Line::TooLong(len))) => return Err(Ended::NotConnected(format!("a {len}-byte hello is not a hello"))),
        Ok(Err(err)) => return Err(Ended::NotConnected(err.to_string())),
        Err(_) => return Err(Ended::NotConnected("the supervisor sent no hello".into())),
    }
    match ipc::decode::<ServerFrame>(&line) {
        Ok(ServerFrame::Hello(hello)) if hello.protocol == PROTOCOL_VERSION => Ok(()),
        Ok(ServerFrame::Hello(hello)) => Err(Ended::Mismatch(IpcError::new(
            ErrorKind::ProtocolMismatch,
            format!(
                "the supervisor at {} speaks control protocol {}; this API speaks {PROTOCOL_VERSION}",
                path.display(),
                hello.protocol
            ),
        ))),
        // The supervisor refused the hello (the key, the role, the version): it says why.
        Ok(ServerFrame::Reply { id: 0, outcome: Outcome::Err(err) }) => Err(Ended::Mismatch(IpcError::new(
            ErrorKind::SupervisorUnavailable,
            format!("the supervisor at {} refused this client: {}", path.display(), err.message),
        ))),
        _ => Err(Ended::Mismatch(IpcError::new(
            ErrorKind::ProtocolMismatch,
            format!("the peer at {} did not greet as a hangar supervisor", path.display()),
        ))),
    }
}

/// Pings the supervisor whenever nothing came from it for [`HEARTBEAT`], so that a silent one
/// shows (see `Client::readiness`). Ends only if the write queue closes.
async fn heartbeat(shared: &Shared, writer: mpsc::Sender<Vec<u8>>) {
    // Checked twice per heartbeat, so silence is noticed within one and a half of them.
    let mut tick = tokio::time::interval(HEARTBEAT / 2);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let ping =
        ipc::encode(&ClientFrame::Request { id: UNAWAITED_ID, op: ipc::Request::Ping, caller: Caller::hangar() });
    loop {
        tick.tick().await;
        if shared.silent_for() < HEARTBEAT {
            continue;
        }
        // A full queue means the supervisor is not reading: the silence shows on its own.
        if let Err(mpsc::error::TrySendError::Closed(_)) = writer.try_send(ping.clone()) {
            return;
        }
    }
}

/// Requests nobody waits for (the subscription, heartbeats) carry id 0; real ones start at 1.
const UNAWAITED_ID: u64 = 0;

async fn read_loop<R: AsyncBufRead + Unpin>(shared: &Shared, reader: &mut R) -> String {
    let mut line = Vec::new();
    loop {
        match read_line(reader, &mut line, MAX_FRAME_BYTES).await {
            Ok(Line::Complete) => {
                shared.heard();
                route(shared, &line);
            }
            Ok(Line::TooLong(len)) => return format!("the supervisor sent a {len}-byte frame, over the limit"),
            Ok(Line::Eof) => return "the supervisor closed the connection".into(),
            Err(err) => return err.to_string(),
        }
    }
}

fn route(shared: &Shared, line: &[u8]) {
    match ipc::decode::<ServerFrame>(line) {
        Ok(ServerFrame::Reply { id, outcome }) => {
            let result = match outcome {
                Outcome::Ok(reply) => Ok(reply),
                Outcome::Err(err) => Err(err),
            };
            if id != UNAWAITED_ID && !shared.deliver(id, result) {
                tracing::debug!(id, "reply for a request nobody waits for (it timed out or was dropped)");
            }
        }
        Ok(ServerFrame::Event(change)) => shared.tell(Link::Changed(change)),
        Ok(ServerFrame::Notice { id, message }) => shared.relay(id, message),
        Ok(ServerFrame::ToolsChanged { mcp_server_id }) => shared.tell(Link::ToolsChanged(mcp_server_id)),
        Ok(ServerFrame::AuthChanged) => shared.tell(Link::AuthChanged),
        Ok(ServerFrame::Hello(_)) => {}
        Err(err) => {
            // Likely a reply of a kind this build does not know: fail its waiter now rather than
            // let it sit until its timeout.
            let id =
                serde_json::from_slice::<Value>(line).ok().and_then(|frame| frame.get("reply")?.get("id")?.as_u64());
            if let Some(id) = id {
                let err = IpcError::new(ErrorKind::Internal, "the supervisor sent a reply this API cannot read");
                shared.deliver(id, Err(err));
            }
            tracing::warn!(error = %err, "unreadable frame from the supervisor");
        }
    }
}
