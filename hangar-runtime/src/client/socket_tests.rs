//! The client against a scripted supervisor on a real Unix socket.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use hangar_core::access::Caller;
use hangar_core::ipc::{self, ClientFrame, ErrorKind, Hello, Logs, Outcome, Reply, Request, ServerFrame};
use hangar_core::record::LogLine;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use super::Client;
use crate::control_key::{ControlKey, default_path};

/// A fresh socket path, with a control key beside it as the supervisor writes one.
fn socket_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hangar-client-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("supervisor.sock");
    std::fs::write(default_path(&path), ControlKey::generate().unwrap().file_text()).unwrap();
    path
}

/// The key beside `path`.
fn key_of(path: &std::path::Path) -> ControlKey {
    ControlKey::read(&default_path(path)).unwrap()
}

/// One accepted connection, seen from the supervisor's side.
struct Peer {
    reader: BufReader<tokio::net::unix::OwnedReadHalf>,
    writer: tokio::net::unix::OwnedWriteHalf,
}

impl Peer {
    async fn accept(listener: &UnixListener, protocol: u32) -> Peer {
        let (stream, _) = listener.accept().await.unwrap();
        let (read, writer) = stream.into_split();
        let mut peer = Peer { reader: BufReader::new(read), writer };
        match peer.read().await {
            ClientFrame::Hello(hello) => {
                assert_eq!(hello.role, "api");
                assert!(hello.key.is_some(), "the hello proves a key");
            }
            other => panic!("expected a hello first, got {other:?}"),
        }
        let mut hello = Hello::new("supervisor");
        hello.protocol = protocol;
        peer.write(&ServerFrame::Hello(hello)).await;
        peer
    }

    async fn read(&mut self) -> ClientFrame {
        let mut line = String::new();
        self.reader.read_line(&mut line).await.unwrap();
        ipc::decode(line.as_bytes()).unwrap()
    }

    /// The next request, skipping heartbeats (they come whenever the peer is quiet).
    async fn read_request(&mut self) -> (u64, Request) {
        loop {
            match self.read().await {
                ClientFrame::Request { op: Request::Ping, .. } => continue,
                ClientFrame::Request { id, op, .. } => return (id, op),
                other => panic!("expected a request, got {other:?}"),
            }
        }
    }

    async fn write(&mut self, frame: &ServerFrame) {
        self.writer.write_all(&ipc::encode(frame)).await.unwrap();
    }

    async fn reply(&mut self, id: u64, reply: Reply) {
        self.write(&ServerFrame::Reply { id, outcome: Outcome::Ok(reply) }).await;
    }
}

async fn until_connected(client: &Client, connected: bool) {
    for _ in 0..200 {
        if client.is_connected() == connected {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("is_connected never became {connected}");
}

fn logs_reply(n: usize) -> Reply {
    Reply::Logs(
        (0..n)
            .map(|i| LogLine {
                mcp_server_id: "m".into(),
                stream: "stderr".into(),
                content: format!("{i}"),
                recorded_at: "t".into(),
            })
            .collect(),
    )
}

#[tokio::test]
async fn multiplexes_out_of_order_replies_fails_pending_on_drop_and_reconnects() {
    let path = socket_path("mux");
    let listener = UnixListener::bind(&path).unwrap();
    let client = Client::spawn(path.clone(), "api");
    let mut peer = Peer::accept(&listener, ipc::PROTOCOL_VERSION).await;
    until_connected(&client, true).await;

    // Two requests in flight; answered in reverse order, each reaches its own caller.
    let (a, b) = (client.clone(), client.clone());
    let first = tokio::spawn(async move {
        a.request(&Caller::hangar(), Request::Logs(Logs { mcp_server: "m".into(), lines: 1 })).await
    });
    let (id1, _) = peer.read_request().await;
    let second = tokio::spawn(async move {
        b.request(&Caller::hangar(), Request::Logs(Logs { mcp_server: "m".into(), lines: 2 })).await
    });
    let (id2, _) = peer.read_request().await;
    assert_ne!(id1, id2);
    peer.reply(id2, logs_reply(2)).await;
    peer.reply(id1, logs_reply(1)).await;
    assert_eq!(first.await.unwrap().unwrap(), logs_reply(1));
    assert_eq!(second.await.unwrap().unwrap(), logs_reply(2));

    // An unreadable reply fails its waiter at once instead of leaving it to time out.
    let c = client.clone();
    let odd = tokio::spawn(async move { c.request(&Caller::hangar(), Request::List).await });
    let (id, _) = peer.read_request().await;
    peer.writer
        .write_all(format!("{{\"reply\":{{\"id\":{id},\"outcome\":{{\"ok\":{{\"novel\":1}}}}}}}}\n").as_bytes())
        .await
        .unwrap();
    assert_eq!(odd.await.unwrap().unwrap_err().kind, ErrorKind::Internal);

    // The connection drops with a request pending: it fails as unavailable.
    let c = client.clone();
    let pending = tokio::spawn(async move { c.request(&Caller::hangar(), Request::List).await });
    let _ = peer.read_request().await;
    drop(peer);
    let err = pending.await.unwrap().unwrap_err();
    assert_eq!(err.kind, ErrorKind::SupervisorUnavailable);
    assert_eq!(err.message, format!("the supervisor is not reachable at {}", path.display()));

    // It comes back by itself.
    let mut peer = Peer::accept(&listener, ipc::PROTOCOL_VERSION).await;
    until_connected(&client, true).await;
    let c = client.clone();
    let again = tokio::spawn(async move { c.request(&Caller::hangar(), Request::List).await });
    let (id, op) = peer.read_request().await;
    assert_eq!(op, Request::List);
    peer.reply(id, Reply::Servers(vec![])).await;
    assert_eq!(again.await.unwrap().unwrap(), Reply::Servers(vec![]));
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[tokio::test]
async fn a_protocol_mismatch_is_reported_as_such() {
    let path = socket_path("mismatch");
    let listener = UnixListener::bind(&path).unwrap();
    let client = Client::spawn(path.clone(), "api");
    let _peer = Peer::accept(&listener, ipc::PROTOCOL_VERSION + 1).await;
    let mut kind = None;
    for _ in 0..200 {
        let err = client.request(&Caller::hangar(), Request::List).await.unwrap_err();
        if err.kind == ErrorKind::ProtocolMismatch {
            kind = Some(err.kind);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(kind, Some(ErrorKind::ProtocolMismatch));
    assert!(!client.is_connected());
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[tokio::test]
async fn the_hello_proves_the_key_read_at_each_connect_and_a_refusal_says_why() {
    let path = socket_path("key");
    let listener = UnixListener::bind(&path).unwrap();
    let client = Client::spawn(path.clone(), "api");
    let (stream, _) = listener.accept().await.unwrap();
    let (read, mut writer) = stream.into_split();
    let mut line = String::new();
    BufReader::new(read).read_line(&mut line).await.unwrap();
    match ipc::decode::<ClientFrame>(line.as_bytes()).unwrap() {
        ClientFrame::Hello(hello) => assert!(key_of(&path).proves(&hello.key.unwrap())),
        other => panic!("expected a hello, got {other:?}"),
    }
    // Refused: the client is not connected, and its requests fail with the supervisor's reason.
    let refusal = ipc::IpcError::new(ErrorKind::Forbidden, "the hello did not prove the control key");
    writer.write_all(&ipc::encode(&ServerFrame::Reply { id: 0, outcome: Outcome::Err(refusal) })).await.unwrap();
    drop(writer);
    let mut message = String::new();
    for _ in 0..200 {
        message = client.request(&Caller::hangar(), Request::List).await.unwrap_err().message;
        if message.contains("refused") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(message.contains("refused this client: the hello did not prove the control key"), "{message}");
    assert!(!client.is_connected());

    // A new key (a restarted supervisor) is read at the next connect.
    std::fs::write(default_path(&path), ControlKey::generate().unwrap().file_text()).unwrap();
    let (stream, _) = listener.accept().await.unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).await.unwrap();
    match ipc::decode::<ClientFrame>(line.as_bytes()).unwrap() {
        ClientFrame::Hello(hello) => assert!(key_of(&path).proves(&hello.key.unwrap()), "the new key"),
        other => panic!("expected a hello, got {other:?}"),
    }

    // No key file: it never says hello, and says why.
    std::fs::remove_file(default_path(&path)).unwrap();
    let (mut stream, _) = listener.accept().await.unwrap();
    let mut said = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tokio::io::AsyncReadExt::read_to_end(&mut stream, &mut said))
        .await;
    assert!(said.is_empty(), "{}", String::from_utf8_lossy(&said));
    let err = client.request(&Caller::hangar(), Request::List).await.unwrap_err();
    assert!(err.message.contains("cannot read the control key"), "{}", err.message);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[tokio::test]
async fn a_silent_or_garbage_peer_is_not_a_connection() {
    let path = socket_path("garbage");
    let listener = UnixListener::bind(&path).unwrap();
    let client = Client::spawn(path.clone(), "api");
    let (mut stream, _): (UnixStream, _) = listener.accept().await.unwrap();
    stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!client.is_connected());
    assert!(client.request(&Caller::hangar(), Request::List).await.is_err());
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[tokio::test]
async fn a_following_client_subscribes_on_every_connection_and_reports_its_link() {
    use super::Link;
    use hangar_core::lifecycle::State;
    use hangar_core::record::StateChange;

    let path = socket_path("follow");
    let listener = UnixListener::bind(&path).unwrap();
    let (_client, mut links) = Client::following(path.clone(), "api");
    let change = StateChange {
        mcp_server_id: "m".into(),
        from: State::Cold,
        to: State::Initializing,
        at: "t".into(),
        dead: None,
    };

    for _ in 0..2 {
        let mut peer = Peer::accept(&listener, ipc::PROTOCOL_VERSION).await;
        assert_eq!(peer.read_request().await.1, Request::Subscribe, "subscribes first thing");
        assert_eq!(links.recv().await, Some(Link::Up));
        peer.write(&ServerFrame::Event(change.clone())).await;
        assert_eq!(links.recv().await, Some(Link::Changed(change.clone())));
        drop(peer);
        assert_eq!(links.recv().await, Some(Link::Down));
    }
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[tokio::test]
async fn a_connected_supervisor_that_stops_answering_is_not_ready_until_it_answers_again() {
    use super::{ANSWER_WITHIN, Readiness};

    let path = socket_path("silent");
    let listener = UnixListener::bind(&path).unwrap();
    let client = Client::spawn(path.clone(), "api");
    let mut peer = Peer::accept(&listener, ipc::PROTOCOL_VERSION).await;
    until_connected(&client, true).await;
    assert_eq!(client.readiness(), Readiness::Answering);

    // Quiet: the client pings; the peer reads the pings but answers none.
    let ping = match tokio::time::timeout(Duration::from_secs(10), peer.read()).await.unwrap() {
        ClientFrame::Request { id, op: Request::Ping, .. } => id,
        other => panic!("expected a heartbeat, got {other:?}"),
    };
    let silent = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Readiness::Silent(silent) = client.readiness() {
                return silent;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap();
    assert!(silent > ANSWER_WITHIN);
    assert!(client.is_connected(), "the connection itself is still up");

    // One answer, of any kind, and it is ready again.
    peer.reply(ping, Reply::Pong).await;
    tokio::time::timeout(Duration::from_secs(10), async {
        while client.readiness() != Readiness::Answering {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}
