//! The control socket: where the API and the prober reach the supervisor.
//!
//! A filesystem socket created mode 0600 (0660 and owned by `--socket-group` when one is given),
//! with the control key beside it (`control_key.rs`), written before the socket exists. Only the
//! hangar's own processes are served, and each check is one a sandboxed upstream (which runs as
//! the hangar's user, and which nothing stops from connecting by path) cannot pass:
//! - the peer runs as the supervisor's user or root, or is in that group (SO_PEERCRED);
//! - its process lies in no upstream's tree (`peer.rs`: an upstream, a descendant, an adopted
//!   orphan of one, a process in an upstream's cgroup);
//! - its hello proves the control key (compared in constant time), which no box can read, and
//!   names its role, `api` or `prober`. A hello without the right key, of any protocol version,
//!   gets one error frame (id 0) and the connection ends before anything is served; with the key
//!   and another protocol version, the supervisor's hello (so the client can say so), then the end.
//!
//! Every refusal is logged at warn with the peer's pid, never with what it sent, at most ten a
//! window of 10 s one by one (`refusals.rs`), so a peer reconnecting in a loop cannot flood the log. Then the peer
//! sends requests that are answered concurrently, each reply tagged with its request's id. Only
//! an `api` peer may name a caller other than the hangar itself; a `prober` may send only what
//! probing needs (`PeerRole::permits`), else its request is answered `forbidden`. A malformed
//! frame gets an error reply (id 0) and the connection goes on; a frame over the size limit ends it.

use std::collections::HashMap;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hangar_core::ipc::{
    self, ClientFrame, ErrorKind, Events, Hello, IpcError, MAX_FRAME_BYTES, Outcome, PROTOCOL_VERSION, PeerRole, Reply,
    Request, ServerFrame, SessionFollow,
};
use hangar_core::sync::Unpoisoned;
use hangar_runtime::control_key::ControlKey;
use interprocess::local_socket::tokio::{Listener, Stream};
use interprocess::local_socket::traits::StreamCommon as _;
use interprocess::local_socket::traits::tokio::Listener as _;
use interprocess::local_socket::{GenericFilePath, ListenerOptions, ToFsName};
use interprocess::os::unix::local_socket::ListenerOptionsExt;
use serde_json::Value;
use tokio::io::BufReader;
use tokio::io::ReadHalf;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::task::AbortHandle;

use crate::hangar::Hangar;
use crate::owned_file::OwnedFile;
use hangar_runtime::exit::{EX_CANTCREAT, EX_CONFIG, EX_UNAVAILABLE, Sysexit};
use hangar_runtime::lines::{Line, read_line, write_batched};

const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("another supervisor is already serving {0}")]
    InUse(PathBuf),
    /// Something other than a stale socket is at the path: it is left alone.
    #[error(
        "cannot create the control socket {path}: {what} is there, and only a stale socket (one nobody answers on) is ever replaced"
    )]
    Occupied { path: PathBuf, what: String },
    /// The socket's directory could let another user swap the socket for their own.
    #[error("cannot create the control socket {path}: its directory {dir} {why}")]
    UnsafeDirectory { path: PathBuf, dir: PathBuf, why: String },
    #[error("cannot create the control socket {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    /// A configuration problem (exit 78), not an unavailable socket.
    #[error(
        "cannot give {path} to --socket-group {group}: {source} (the supervisor must run as root or as a member of that group)"
    )]
    Group { path: PathBuf, group: SocketGroup, source: io::Error },
}

/// The sysexits code the supervisor exits with: 69 when another supervisor answers, 73 when the
/// socket cannot be made where asked, 78 for a bad `--socket-group`.
impl Sysexit for BindError {
    fn exit_code(&self) -> u8 {
        match self {
            BindError::InUse(_) => EX_UNAVAILABLE,
            BindError::Occupied { .. } | BindError::UnsafeDirectory { .. } | BindError::Io { .. } => EX_CANTCREAT,
            BindError::Group { .. } => EX_CONFIG,
        }
    }
}

/// The group `--socket-group` names: it may use the control socket besides the supervisor's
/// own user and root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocketGroup {
    pub gid: u32,
    /// As given on the command line, for messages.
    pub name: String,
}

impl std::fmt::Display for SocketGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.name == self.gid.to_string() {
            write!(f, "{}", self.gid)
        } else {
            write!(f, "{} ({})", self.name, self.gid)
        }
    }
}

impl SocketGroup {
    /// A numeric gid as it is (it need not have a name), else a group name looked up in the
    /// group database (`/etc/group`, through nix's safe `getgrnam_r`).
    pub fn resolve(spec: &str) -> Result<SocketGroup, String> {
        if let Ok(gid) = spec.parse::<u32>() {
            return Ok(SocketGroup { gid, name: spec.to_owned() });
        }
        match nix::unistd::Group::from_name(spec) {
            Ok(Some(group)) => Ok(SocketGroup { gid: group.gid.as_raw(), name: spec.to_owned() }),
            Ok(None) => {
                Err(format!("--socket-group {spec:?}: no such group (not a gid, and not in the group database)"))
            }
            Err(err) => Err(format!("--socket-group {spec:?}: cannot look the group up: {err}")),
        }
    }
}

/// Creates the socket at `path` (mode 0600, parent directory 0700 if it has to be made; with a
/// `group`, the socket 0660 and the directory 0710, both owned by that group), and before it
/// the control key beside it (`<path>.key`, 0600; 0640 and the group's with a `group`).
///
/// Nothing but a stale socket is ever removed: a socket file that nobody answers on
/// (ECONNREFUSED) and that belongs to this user. Whatever else is at the path (a regular file,
/// a directory, a symlink, a FIFO, a live socket) is refused and left as it was, judged without
/// following symlinks. The directory must be one no other user can write to (or sticky, like
/// `/tmp`), owned by this user or root: otherwise someone else could put their own socket in
/// the supervisor's place (the classic `/tmp` attack on `/tmp/hangar-$USER`).
pub async fn bind(path: &Path, group: Option<&SocketGroup>) -> Result<(Listener, SocketFile, ControlKey), BindError> {
    let io_err = |source| BindError::Io { path: path.to_owned(), source };
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    if std::fs::symlink_metadata(parent).is_err() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent).map_err(io_err)?;
        // The group's members must be able to reach the socket, but not list the directory.
        if let Some(group) = group {
            give_to_group(parent, group, 0o710)?;
        }
    }
    check_directory(path, parent, group.map(|g| g.gid))?;
    match std::fs::symlink_metadata(path) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(source) => return Err(BindError::Io { path: path.to_owned(), source }),
        Ok(there) => {
            remove_if_stale(path, &there).await?;
        }
    }
    // The key first: a client that can connect finds the key of the supervisor it reaches.
    let key_path = hangar_runtime::control_key::default_path(path);
    let (key, key_file) =
        crate::control_key::create(&key_path, group.map(|g| g.gid)).map_err(|source| match group {
            Some(group) if source.kind() == io::ErrorKind::PermissionDenied => {
                BindError::Group { path: key_path.clone(), group: group.clone(), source }
            }
            _ => BindError::Io { path: key_path.clone(), source },
        })?;
    let socket = make_listener(path, group);
    match socket {
        Ok((listener, socket)) => Ok((listener, SocketFile { socket, key: key_file }, key)),
        Err(err) => {
            key_file.remove("control key");
            Err(err)
        }
    }
}

/// The listening socket at `path`, and its file.
fn make_listener(path: &Path, group: Option<&SocketGroup>) -> Result<(Listener, OwnedFile), BindError> {
    let io_err = |source| BindError::Io { path: path.to_owned(), source };
    let name = path.to_fs_name::<GenericFilePath>().map_err(io_err)?;
    // The file is removed at shutdown by `SocketFile::remove`, which checks it is still ours.
    let listener = ListenerOptions::new().name(name).mode(0o600).reclaim_name(false).create_tokio().map_err(io_err)?;
    // Owner-only until the group is right, then opened to it: never readable by the wrong group.
    if let Some(group) = group {
        give_to_group(path, group, 0o660)?;
    }
    Ok((listener, OwnedFile::at(path).map_err(io_err)?))
}

/// The socket file and the key file the supervisor made, each known by its inode so that only
/// they are removed.
#[derive(Debug)]
pub struct SocketFile {
    socket: OwnedFile,
    key: OwnedFile,
}

impl SocketFile {
    /// Removes the socket and the key, each unless something else has taken its place since.
    pub fn remove(self) {
        self.socket.remove("control socket");
        self.key.remove("control key");
    }
}

/// Refuses a directory another user could write into. Followed if it is a symlink (`/var/run`
/// is one), but then the link must belong to this user or root too.
fn check_directory(path: &Path, dir: &Path, group: Option<u32>) -> Result<(), BindError> {
    let unsafe_dir = |why: String| BindError::UnsafeDirectory { path: path.to_owned(), dir: dir.to_owned(), why };
    let io_err = |source| BindError::Io { path: path.to_owned(), source };
    let ours = nix::unistd::geteuid().as_raw();
    let link = std::fs::symlink_metadata(dir).map_err(io_err)?;
    if link.file_type().is_symlink() && link.uid() != ours && link.uid() != 0 {
        return Err(unsafe_dir(format!("is a symlink owned by uid {}, not by this user ({ours}) or root", link.uid())));
    }
    let meta = std::fs::metadata(dir).map_err(io_err)?;
    if !meta.is_dir() {
        return Err(unsafe_dir("is not a directory".into()));
    }
    match directory_problem(ours, meta.uid(), meta.gid(), meta.mode(), group) {
        Some(why) => Err(unsafe_dir(why)),
        None => Ok(()),
    }
}

/// Why a directory (owner, group, mode) is unsafe for the socket of user `ours`, if it is.
fn directory_problem(ours: u32, uid: u32, gid: u32, mode: u32, group: Option<u32>) -> Option<String> {
    const STICKY: u32 = 0o1000;
    if uid != ours && uid != 0 {
        return Some(format!("is owned by uid {uid}, not by this user ({ours}) or root"));
    }
    // In a sticky directory (`/tmp`) others may create files but not replace ours.
    if mode & STICKY != 0 {
        return None;
    }
    if mode & 0o002 != 0 {
        return Some(format!("is writable by every user (mode {:04o})", mode & 0o7777));
    }
    if mode & 0o020 != 0 && group != Some(gid) {
        return Some(format!(
            "is writable by its group {gid} (mode {:04o}), which --socket-group does not name",
            mode & 0o7777
        ));
    }
    None
}

/// Removes what is at `path` if it is a stale socket of this user; anything else is refused.
async fn remove_if_stale(path: &Path, there: &std::fs::Metadata) -> Result<(), BindError> {
    let occupied = |what: String| BindError::Occupied { path: path.to_owned(), what };
    let kind = there.file_type();
    if !kind.is_socket() {
        return Err(occupied(describe(path, there)));
    }
    let ours = nix::unistd::geteuid().as_raw();
    let answer = tokio::time::timeout(Duration::from_secs(2), tokio::net::UnixStream::connect(path)).await;
    match answer {
        Ok(Ok(_)) => return Err(BindError::InUse(path.to_owned())),
        // Nobody listens: a leftover of a supervisor that died without cleaning up.
        Ok(Err(err)) if err.kind() == io::ErrorKind::ConnectionRefused => {}
        // A listener whose queue is full, or that does not accept in time, is still alive.
        Ok(Err(err)) if err.kind() == io::ErrorKind::WouldBlock => return Err(BindError::InUse(path.to_owned())),
        Err(_) => return Err(BindError::InUse(path.to_owned())),
        Ok(Err(err)) => return Err(occupied(format!("a socket this user cannot connect to ({err})"))),
    }
    if there.uid() != ours {
        return Err(occupied(format!(
            "a stale socket of uid {} (remove it yourself if it is a leftover)",
            there.uid()
        )));
    }
    std::fs::remove_file(path).map_err(|source| BindError::Io { path: path.to_owned(), source })
}

/// What a non-socket file is, in words, for the refusal.
fn describe(path: &Path, there: &std::fs::Metadata) -> String {
    let kind = there.file_type();
    if kind.is_symlink() {
        match std::fs::read_link(path) {
            Ok(target) => format!("a symlink (to {})", target.display()),
            Err(_) => "a symlink".into(),
        }
    } else if kind.is_file() {
        format!("a regular file ({} bytes)", there.len())
    } else if kind.is_dir() {
        "a directory".into()
    } else if kind.is_fifo() {
        "a FIFO".into()
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device".into()
    } else {
        "a file of unknown type".into()
    }
}

fn give_to_group(path: &Path, group: &SocketGroup, mode: u32) -> Result<(), BindError> {
    use std::os::unix::fs::PermissionsExt;
    let group_err = |source| BindError::Group { path: path.to_owned(), group: group.clone(), source };
    std::os::unix::fs::chown(path, None, Some(group.gid)).map_err(group_err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|source| BindError::Io { path: path.to_owned(), source })
}

/// Accepts connections until `stop` turns true; `group` is `--socket-group`, if given, and `key`
/// the control key every hello must prove.
pub async fn serve(
    listener: Listener,
    hangar: Arc<Hangar>,
    group: Option<SocketGroup>,
    key: ControlKey,
    stop: watch::Receiver<bool>,
) {
    let mut stopped = stop.clone();
    let group = group.map(|g| g.gid);
    let key = Arc::new(key);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(stream) => { tokio::spawn(connection(stream, hangar.clone(), group, key.clone(), stop.clone())); }
                Err(err) => {
                    tracing::warn!(%err, "control socket accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            () = crate::shutdown::requested(&mut stopped) => return,
        }
    }
}

async fn connection(
    stream: Stream,
    hangar: Arc<Hangar>,
    group: Option<u32>,
    key: Arc<ControlKey>,
    mut stop: watch::Receiver<bool>,
) {
    // The socket file is 0600 (0660) already; the peer's credentials are checked too, so a
    // socket handed on (or a permissive umask on an old kernel) does not let another user in.
    let pid = match peer_allowed(&stream, group) {
        Ok(pid) => pid,
        Err((pid, why)) => {
            crate::refusals::refused(&shown(pid), &why);
            return;
        }
    };
    // A pid of 0 (none): the peer is in another PID namespace, where its tree is not ours to see.
    if let Some(pid) = pid {
        match tokio::task::spawn_blocking(move || crate::peer::upstream_tree(pid)).await {
            Ok(None) => {}
            Ok(Some(why)) => {
                crate::refusals::refused(&pid.to_string(), &format!("a process in an upstream's tree: {why}"));
                return;
            }
            Err(_) => return,
        }
    }
    let (recv, sender) = tokio::io::split(stream);
    let (out, out_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(async move {
        // A failed write means the peer is gone; the read loop sees that too.
        let _ = write_batched(sender, out_rx).await;
    });
    let mut reader = BufReader::with_capacity(64 * 1024, recv);
    let mut buf = Vec::new();
    let (peer, role) = match tokio::time::timeout(HELLO_TIMEOUT, hello(&mut reader, &mut buf, &out, &key)).await {
        Ok(Ok(peer)) => peer,
        Ok(Err(why)) => {
            crate::refusals::refused(&shown(pid), &why);
            drop(out);
            let _ = writer.await;
            return;
        }
        Err(_) => {
            crate::refusals::refused(&shown(pid), "no hello in time");
            return;
        }
    };
    tracing::debug!(pid = %shown(pid), %role, version = %peer.version, "control connection");
    let mut forwarders = Vec::new();
    // Requests still running, so a Cancel (or the connection's end) can stop them.
    let in_flight = InFlight::default();
    loop {
        let line = tokio::select! {
            line = read_line(&mut reader, &mut buf, MAX_FRAME_BYTES) => line,
            () = crate::shutdown::requested(&mut stop) => break,
        };
        match line {
            Ok(Line::Complete) if buf.is_empty() => {}
            Ok(Line::Complete) => match ipc::decode::<ClientFrame>(&buf) {
                Ok(ClientFrame::Request { id, op, caller }) if let Err(refused) = role.permits(&caller, &op) => {
                    tracing::warn!(pid = %shown(pid), %role, id, reason = %refused.message, "control request refused");
                    send(&out, &ServerFrame::Reply { id, outcome: Outcome::Err(refused) });
                }
                Ok(ClientFrame::Request { id, op: Request::Subscribe, caller }) => {
                    let events = forward_events(hangar.clone(), caller, hangar.subscribe(), out.clone());
                    forwarders.push(tokio::spawn(events));
                    send(&out, &ServerFrame::Reply { id, outcome: Outcome::Ok(Reply::Subscribed) });
                }
                Ok(ClientFrame::Request { id, op, caller }) => {
                    let (hangar, out) = (hangar.clone(), out.clone());
                    let (notices, forwarder) = relay_notices(id, &op, &out).unzip();
                    in_flight.spawn(id, async move {
                        let outcome = hangar.handle(&caller, op, notices).await;
                        // Every notice goes out before the reply: the forwarder ends once the
                        // call's senders are gone, having sent what they queued.
                        if let Some(forwarder) = forwarder {
                            let _ = forwarder.await;
                        }
                        send(&out, &ServerFrame::Reply { id, outcome });
                    });
                }
                Ok(ClientFrame::Cancel { id }) => {
                    // Dropping the request's future cancels what it was waiting on upstream.
                    if in_flight.cancel(id) {
                        tracing::debug!(%role, id, "request cancelled by its caller");
                    }
                }
                Ok(ClientFrame::Hello(_)) => {}
                Err(err) => {
                    let error = IpcError::new(ErrorKind::InvalidArgument, format!("malformed control frame: {err}"));
                    send(&out, &ServerFrame::Reply { id: 0, outcome: Outcome::Err(error) });
                }
            },
            Ok(Line::TooLong(len)) => {
                tracing::warn!(%role, len, "control frame over the size limit; closing the connection");
                break;
            }
            Ok(Line::Eof) | Err(_) => break,
        }
    }
    // Nobody is left to answer: stop what this connection asked for, and its event forwarders.
    forwarders.iter().for_each(tokio::task::JoinHandle::abort);
    in_flight.abort_all();
}

/// The requests of one connection still running, by request id, so a `Cancel` (or the
/// connection's end) can abort them. A request's entry is inserted before its task can run
/// and removed by the task itself when it ends, so nothing finished is ever left behind,
/// however many worker threads run the tasks.
#[derive(Clone, Default)]
struct InFlight(Arc<Mutex<HashMap<u64, AbortHandle>>>);

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, AbortHandle>> {
        self.0.locked()
    }

    /// Runs `request` as its own task, known by `id` until it ends.
    fn spawn(&self, id: u64, request: impl Future<Output = ()> + Send + 'static) -> tokio::task::JoinHandle<()> {
        let running = self.clone();
        // Held across the spawn: on another worker the task may finish at once, and its removal
        // must come after this insertion, not before it (which would leave a stale entry).
        let mut map = self.lock();
        let task = tokio::spawn(async move {
            request.await;
            running.finished(id);
        });
        // A client reusing an id still in flight replaces the entry; the earlier task's end then
        // leaves the later one's alone (see `finished`).
        map.insert(id, task.abort_handle());
        task
    }

    /// Called by the request's own task as it ends: removes its entry, and only its own.
    fn finished(&self, id: u64) {
        let mut map = self.lock();
        if tokio::task::try_id().is_some_and(|me| map.get(&id).is_some_and(|h| h.id() == me)) {
            map.remove(&id);
        }
    }

    /// Aborts request `id` if it is still running; a request already finished (or never
    /// known) is no error. Whether one was aborted.
    fn cancel(&self, id: u64) -> bool {
        let task = self.lock().remove(&id);
        task.inspect(AbortHandle::abort).is_some()
    }

    fn abort_all(&self) {
        for (_, task) in self.lock().drain() {
            task.abort();
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// Reads the peer's hello and judges it: the control key first (a hello without it, of any
/// protocol version, is answered with one error frame and nothing else), then the role, then the
/// version (answered with the supervisor's own hello, so a client of another version can say so).
async fn hello(
    reader: &mut BufReader<ReadHalf<Stream>>,
    buf: &mut Vec<u8>,
    out: &mpsc::UnboundedSender<Vec<u8>>,
    key: &ControlKey,
) -> Result<(Hello, PeerRole), String> {
    match read_line(reader, buf, 64 * 1024).await {
        Ok(Line::Complete) => {}
        _ => return Err("the peer closed or sent an over-long line before its hello".into()),
    }
    let peer = match ipc::decode::<ClientFrame>(buf) {
        Ok(ClientFrame::Hello(hello)) => hello,
        _ => return Err("the first frame was not a hello".into()),
    };
    let refuse = |why: &str| {
        send(out, &ServerFrame::Reply { id: 0, outcome: Outcome::Err(IpcError::forbidden(why)) });
        why.to_owned()
    };
    if !peer.key.as_ref().is_some_and(|proof| key.proves(proof)) {
        let why =
            if peer.key.is_some() { "the hello's control key is wrong" } else { "the hello carries no control key" };
        return Err(refuse(&format!(
            "{why} (the hangar's own processes read it from the file the supervisor writes beside its socket, or from --control-key)"
        )));
    }
    let Some(role) = PeerRole::parse(&peer.role) else {
        return Err(refuse("the hello names no role of the hangar's (api or prober)"));
    };
    send(out, &ServerFrame::Hello(Hello::new("supervisor")));
    if peer.protocol != PROTOCOL_VERSION {
        return Err(format!("the peer speaks control protocol {}, this supervisor {PROTOCOL_VERSION}", peer.protocol));
    }
    Ok((peer, role))
}

/// A peer's pid for the logs: `?` when unknown.
fn shown(pid: Option<u32>) -> String {
    pid.map_or_else(|| "?".to_owned(), |pid| pid.to_string())
}

/// Only the supervisor's own user (or root) may talk to it, and members of `group` if given.
/// Answers the peer's pid (`None` when it is in another PID namespace); a refusal carries it too.
fn peer_allowed(stream: &Stream, group: Option<u32>) -> Result<Option<u32>, (Option<u32>, String)> {
    let creds = stream.peer_creds().map_err(|err| (None, format!("cannot read the peer's credentials: {err}")))?;
    let pid = creds.pid().and_then(|pid| u32::try_from(pid).ok()).filter(|pid| *pid != 0);
    let ours = nix::unistd::geteuid().as_raw();
    let uid = match creds.euid() {
        Some(uid) if uid == ours || uid == 0 => return Ok(pid),
        Some(uid) => uid,
        None => return Err((pid, "the peer's uid is unknown".into())),
    };
    let Some(gid) = group else {
        return Err((pid, format!("peer uid {uid} is not the supervisor's ({ours})")));
    };
    // SO_PEERCRED carries the primary gid; Linux has the supplementary ones only in /proc.
    if creds.egid() == Some(gid) {
        return Ok(pid);
    }
    let status = pid.and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok()).unwrap_or_default();
    match in_group(&status, uid, gid) {
        Ok(()) => Ok(pid),
        Err(why) => Err((
            pid,
            format!(
                "peer uid {uid} (pid {}) is not the supervisor's ({ours}) and not in --socket-group {gid}: {why}",
                shown(pid)
            ),
        )),
    }
}

/// Whether the `/proc/<pid>/status` text of a peer that connected as `uid` lists `gid` among its
/// supplementary groups. The uid must match too, so a pid reused by another user's process
/// since the connect is not mistaken for the peer.
fn in_group(status: &str, uid: u32, gid: u32) -> Result<(), String> {
    let field = |key: &str| status.lines().find_map(|line| line.strip_prefix(key));
    // `Uid:` lists real, effective, saved and filesystem uids; SO_PEERCRED gave the effective one.
    let effective = field("Uid:").and_then(|uids| uids.split_whitespace().nth(1)?.parse::<u32>().ok());
    if effective != Some(uid) {
        return Err("its process is gone or no longer runs as that uid".into());
    }
    let groups = field("Groups:").ok_or("its process lists no groups")?;
    if groups.split_whitespace().any(|g| g.parse::<u32>() == Ok(gid)) {
        Ok(())
    } else {
        Err(format!("its groups are [{}]", groups.trim()))
    }
}

/// For a call that asked for a relay (or a followed `Events`), a channel whose messages go out as notices about `id`,
/// and the task that sends them (it ends when every sender is gone).
fn relay_notices(
    id: u64,
    op: &Request,
    out: &mpsc::UnboundedSender<Vec<u8>>,
) -> Option<(mpsc::UnboundedSender<Value>, tokio::task::JoinHandle<()>)> {
    let relayed = matches!(op, Request::Call(call) if !call.relay.is_off())
        || matches!(
            op,
            Request::Events(Events { follow: true, .. })
                | Request::SessionFollow(SessionFollow { .. })
                | Request::AwaitClientAnswer(_)
                | Request::TaskFollow(_)
        );
    if !relayed {
        return None;
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<Value>();
    let out = out.clone();
    let forwarder = tokio::spawn(async move {
        while let Some(message) = rx.recv().await {
            send(&out, &ServerFrame::Notice { id, message });
        }
    });
    Some((tx, forwarder))
}

fn send(out: &mpsc::UnboundedSender<Vec<u8>>, frame: &ServerFrame) {
    let _ = out.send(ipc::encode(frame));
}

/// Pushes what a subscriber may hear: state and tool-list changes of the servers its caller's
/// view sees (judged at each event, so a reload's new profiles apply at once), and reloads.
async fn forward_events(
    hangar: Arc<Hangar>,
    caller: hangar_core::access::Caller,
    mut subscription: crate::hangar::Subscription,
    out: mpsc::UnboundedSender<Vec<u8>>,
) {
    loop {
        let frame = tokio::select! {
            change = subscription.states.recv() => match change {
                Ok(change) if hangar.view(&caller).sees_unit(&caller.identity, &change.mcp_server_id) => {
                    ServerFrame::Event(change)
                }
                Ok(_) => continue,
                // A slow subscriber missed some; it reads current state with `list` when it needs to.
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "a subscriber fell behind");
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            changed = subscription.tools.recv() => match changed {
                // An empty id (a reload changed the servers) is everyone's news.
                Ok(mcp_server_id) if mcp_server_id.is_empty() || hangar.view(&caller).sees_server(&mcp_server_id) => {
                    ServerFrame::ToolsChanged { mcp_server_id }
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return,
            },
            reloaded = subscription.reloads.recv() => match reloaded {
                Ok(()) | Err(broadcast::error::RecvError::Lagged(_)) => ServerFrame::AuthChanged,
                Err(broadcast::error::RecvError::Closed) => return,
            },
        };
        if out.send(ipc::encode(&frame)).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str =
        "Name:\tpython3\nUid:\t65534\t65534\t65534\t65534\nGid:\t65534\t65534\t65534\t65534\nGroups:\t27 4242 \n";

    #[test]
    fn a_supplementary_group_admits_the_peer_only_with_its_own_uid() {
        assert_eq!(in_group(STATUS, 65534, 4242), Ok(()));
        assert!(in_group(STATUS, 65534, 4243).is_err_and(|why| why.contains("[27 4242]")));
        // The pid now belongs to someone else (or nobody): refused whatever its groups.
        assert!(in_group(STATUS, 1000, 4242).is_err());
        assert!(in_group("", 65534, 4242).is_err());
        assert!(in_group("Uid:\t65534\t65534\t65534\t65534\nGroups:\t\n", 65534, 4242).is_err());
    }

    /// Many requests that finish at once, on two workers: none may stay in the map (the old
    /// insert-after-spawn left some), and a Cancel of a finished one does nothing.
    #[test]
    fn finished_requests_leave_no_entry_on_a_multi_threaded_runtime() {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
        runtime.block_on(async {
            let in_flight = InFlight::default();
            for round in 0..200u64 {
                let tasks: Vec<_> = (0..50).map(|i| in_flight.spawn(round * 50 + i, async {})).collect();
                for task in tasks {
                    task.await.unwrap();
                }
                assert_eq!(in_flight.len(), 0, "stale entries after round {round}");
            }
            assert!(!in_flight.cancel(7), "a finished request is not cancelled");
        });
    }

    #[test]
    fn cancel_aborts_a_running_request_and_a_reused_id_keeps_the_later_entry() {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
        runtime.block_on(async {
            let in_flight = InFlight::default();
            let slow = in_flight.spawn(1, std::future::pending());
            assert!(in_flight.cancel(1));
            assert!(slow.await.unwrap_err().is_cancelled());
            assert_eq!(in_flight.len(), 0);
            // Same id twice: the first one's end must not drop the second one's handle.
            let (release, released) = tokio::sync::oneshot::channel::<()>();
            let first = in_flight.spawn(2, async {
                let _ = released.await;
            });
            let second = in_flight.spawn(2, std::future::pending());
            let _ = release.send(());
            first.await.unwrap();
            assert_eq!(in_flight.len(), 1);
            assert!(in_flight.cancel(2));
            assert!(second.await.unwrap_err().is_cancelled());
        });
    }

    #[test]
    fn only_a_directory_no_other_user_can_write_to_holds_the_socket() {
        assert_eq!(directory_problem(1000, 1000, 1000, 0o700, None), None);
        assert_eq!(directory_problem(1000, 0, 0, 0o755, None), None, "root's own");
        assert_eq!(directory_problem(1000, 0, 0, 0o1777, None), None, "sticky, like /tmp");
        let other = directory_problem(1000, 65534, 65534, 0o700, None).unwrap();
        assert!(other.contains("owned by uid 65534"), "{other}");
        let world = directory_problem(1000, 1000, 1000, 0o777, None).unwrap();
        assert!(world.contains("writable by every user (mode 0777)"), "{world}");
        assert!(directory_problem(1000, 1000, 4242, 0o770, None).is_some());
        assert_eq!(directory_problem(1000, 1000, 4242, 0o770, Some(4242)), None, "--socket-group's own");
    }

    #[test]
    fn a_socket_group_is_a_gid_or_a_known_name() {
        assert_eq!(SocketGroup::resolve("4242"), Ok(SocketGroup { gid: 4242, name: "4242".into() }));
        assert_eq!(SocketGroup::resolve("root").map(|g| g.gid), Ok(0));
        let unknown = SocketGroup::resolve("no-such-group-hangar").unwrap_err();
        assert!(unknown.contains("\"no-such-group-hangar\"") && unknown.contains("no such group"), "{unknown}");
        assert_eq!(SocketGroup { gid: 0, name: "root".into() }.to_string(), "root (0)");
    }
}
