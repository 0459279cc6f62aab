//! Connecting, the hello handshake, and the reader and writer of one live connection.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hangar_core::ipc::{
    self, ClientFrame, ErrorKind, Hello, IpcError, MAX_FRAME_BYTES, Outcome, PROTOCOL_VERSION, ServerFrame,
};
use interprocess::local_socket::tokio::Stream;
use interprocess::local_socket::traits::tokio::Stream as _;
use interprocess::local_socket::{GenericFilePath, ToFsName as _};
use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;

use super::lines::LineReader;
use super::{Shared, unreachable_error};

const INITIAL_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// A peer that accepts but never greets is not a supervisor we can use.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
const WRITE_QUEUE: usize = 1024;

/// How one connection attempt ended.
enum Ended {
    /// Never got a connection (no socket yet, refused, ...).
    NotConnected(String),
    /// Connected, but the peer speaks another protocol version (or not ours at all).
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
    let mut reader = LineReader::new(&stream, MAX_FRAME_BYTES);
    let mut writer = BufWriter::new(&stream);
    if let Err(ended) = handshake(&shared.path, &mut reader, &mut writer).await {
        return ended;
    }
    tracing::info!(socket = %shared.path.display(), "connected to the supervisor");

    let (tx, rx) = mpsc::channel(WRITE_QUEUE);
    shared.link_up(tx);
    let reason = tokio::select! {
        reason = read_loop(shared, &mut reader) => reason,
        reason = write_loop(rx, &mut writer) => reason,
    };
    shared.link_down(unreachable_error(&shared.path));
    Ended::Lost(reason)
}

async fn connect(path: &Path) -> std::io::Result<Stream> {
    let name = path.to_fs_name::<GenericFilePath>()?;
    Stream::connect(name).await
}

async fn handshake<R, W>(path: &Path, reader: &mut LineReader<R>, writer: &mut W) -> Result<(), Ended>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let hello = ipc::encode(&ClientFrame::Hello(Hello::new("api")));
    let sent = async {
        writer.write_all(&hello).await?;
        writer.flush().await
    };
    if let Err(err) = sent.await {
        return Err(Ended::NotConnected(err.to_string()));
    }
    let mut line = Vec::new();
    match tokio::time::timeout(HELLO_TIMEOUT, reader.next_line(&mut line)).await {
        Ok(Ok(true)) => {}
        Ok(Ok(false)) => return Err(Ended::NotConnected("the supervisor closed the connection at once".into())),
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
        _ => Err(Ended::Mismatch(IpcError::new(
            ErrorKind::ProtocolMismatch,
            format!("the peer at {} did not greet as a hangar supervisor", path.display()),
        ))),
    }
}

async fn read_loop<R: tokio::io::AsyncRead + Unpin>(shared: &Shared, reader: &mut LineReader<R>) -> String {
    let mut line = Vec::new();
    loop {
        match reader.next_line(&mut line).await {
            Ok(true) => route(shared, &line),
            Ok(false) => return "the supervisor closed the connection".into(),
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
            if !shared.deliver(id, result) {
                tracing::debug!(id, "reply for a request nobody waits for (it timed out or was dropped)");
            }
        }
        // We never subscribe; a stray event is harmless.
        Ok(ServerFrame::Event(_)) | Ok(ServerFrame::Hello(_)) => {}
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

/// Writes queued lines, flushing only when the queue is momentarily empty so a burst of
/// requests goes out in few writes.
async fn write_loop<W: tokio::io::AsyncWrite + Unpin>(mut rx: mpsc::Receiver<Vec<u8>>, writer: &mut W) -> String {
    while let Some(line) = rx.recv().await {
        let written = async {
            writer.write_all(&line).await?;
            while let Ok(more) = rx.try_recv() {
                writer.write_all(&more).await?;
            }
            writer.flush().await
        };
        if let Err(err) = written.await {
            return err.to_string();
        }
    }
    "the request queue closed".into()
}
