//! The guardians: two tiny processes (the `hangar-guardian` binary, crate `hangar-guardian`)
//! that outlive a SIGKILLed supervisor just long enough to kill every upstream's whole subtree.
//! This is the supervisor's side of them; theirs is `hangar-guardian/src/run.rs`.
//!
//! A SIGKILLed supervisor can clean up nothing, and the kernel kills nothing below it on its
//! behalf. So the supervisor runs guardians, each in its own process group, with a socket
//! (`SOCK_SEQPACKET`, one message a line) on its stdin, and tells them what to kill: `+PID` for
//! each upstream and helper (sent by the child itself between fork and exec, so not even a spawn
//! the supervisor dies in the middle of escapes), `+cgroup DIR` for each upstream's cgroup, and
//! `-PID` / `-cgroup DIR` once they are gone. When the socket reaches its end (the supervisor
//! exited, however it died), a guardian kills each cgroup (`cgroup.kill`) and the subtree
//! (`proctree::kill_tree`) of each pid no killed cgroup holds, then exits.
//!
//! The guardian binary is the one `--guardian` names (installs and `scripts/build-guardian` build
//! it static, which maps least), else the one beside the supervisor's own (`current_exe()`'s
//! directory), opened once at start and run through that descriptor (`/proc/self/fd/N`), so that an upgrade
//! that replaces or removes the files meanwhile still starts the guardian this supervisor came
//! with. Without it the supervisor warns and runs on with the weaker guarantee of the
//! parent-death signal alone (`spawn.rs`).
//!
//! The supervisor is the subreaper of every upstream (`reaper.rs`): what an upstream orphans
//! goes to it, and one it leaves running (an orphan of a running upstream) it announces too
//! (`+PID`, then `-PID` once reaped). If the supervisor dies before announcing one, or an
//! upstream dies in the same instant as the supervisor (it asked for a parent-death signal of
//! its own, or exits when its parent changes), orphans go to init, out of every subtree. So a
//! guardian also notes every descendant of each pid it watches (pid and start time) once a
//! second while it waits, and at the end kills those it noted and every process still marked in
//! its environment as descending from one of its supervisor's upstreams (`proctree::MARKER`),
//! wherever it went. And each records the supervisor's own children as they appear (`kin.rs`:
//! every 100 ms), so an orphan the supervisor had not yet swept is killed too, even one that has
//! shed its marker and its group; their descendants are noted like the upstreams'. The fellow
//! guardians, which are the supervisor's children as well, are named to each (`guardian PID`)
//! and left alone. What can still escape without cgroups: an orphan reparented to the supervisor
//! less than one look (100 ms) before its death that has by then cleared its environment and
//! left its upstream's process group, or a descendant born less than one walk (1 s) before it,
//! below an upstream or a recorded orphan that dies in the same instant.
//!
//! Two things keep that cheap at rest, whatever the number of upstreams. A process in an
//! upstream's own cgroup (`cgroup.rs`) is never walked: nothing below it can leave the cgroup by
//! regrouping or being orphaned, and `cgroup.kill` takes it all (only a process that moves
//! itself to another cgroup, which takes write access to the delegated cgroup's files, is out of
//! both). And while no process at all has been born since the last walk (the last pid handed
//! out, in `/proc/loadavg`, has not moved) and the supervisor has said nothing, a guardian
//! neither looks nor walks: every orphan the supervisor could adopt then descends from a process
//! that walk already noted or a cgroup holds, so nothing above escapes that would not have
//! anyway.
//!
//! For that walk to find everything, upstreams must still be alive, and their children still
//! below them, when the guardian walks. So while a guardian runs, upstreams get no lethal
//! parent-death signal (`spawn.rs`), and the supervisor hands the guardian copies of each
//! upstream's pipes (`+PID` with `SCM_RIGHTS`): a supervisor's death then closes no pipe an
//! upstream can notice (no EOF on its stdin, no EPIPE on its stdout or stderr), so it does not
//! exit and scatter its orphans to init before the guardian gets to it. Before the supervisor
//! closes an upstream's stdin to stop it politely, both let go of their copies (`~PID`).
//!
//! The guardian itself may be killed. There are two, each told everything, so that killing one
//! and then the supervisor still leaves the other to act; a keeper thread per guardian waits for
//! it, logs its death (pid and how it died) and starts a new one at once, which it hands the
//! full current list. They are named `hangar-guardian` (argv[0] and comm), so killing the
//! supervisor by name does not take them along. The one window left: the supervisor and both
//! guardians SIGKILLed within the same few milliseconds (before a replacement runs, or before a
//! guardian has walked the tree); then an upstream that exits on its stdin's end scatters its
//! orphans to init. Under systemd, `KillMode=control-group` closes it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hangar_core::sync::Unpoisoned;
use nix::sys::socket::{AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, sendmsg, socketpair};

use crate::{children, proctree};

/// How many guardians keep watch at once.
pub const GUARDIANS: usize = 2;

/// A guardian that lived this long before dying is replaced at once again next time.
const HEALTHY_RUN: Duration = Duration::from_secs(10);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Guardians that died while the supervisor ran (each one is replaced).
static RESPAWNS: AtomicU64 = AtomicU64::new(0);
/// A keeper runs: there is, or is about to be again, a guardian.
static KEEPING: AtomicBool = AtomicBool::new(false);
/// The guardians log as the supervisor does.
static JSON_LOGS: AtomicBool = AtomicBool::new(false);

struct State {
    /// The supervisor's end of each guardian's socket.
    pipes: [Option<OwnedFd>; GUARDIANS],
    /// Each guardian's pid, so that each can tell the others from the orphans it must kill.
    guardians: [Option<u32>; GUARDIANS],
    /// Every process it must kill, with the copies of its pipes the guardian holds too.
    pids: BTreeMap<u32, Vec<OwnedFd>>,
    cgroups: BTreeSet<PathBuf>,
    /// Set by [`stop`]: a guardian that exits now is not replaced.
    closing: bool,
}

static STATE: Mutex<State> = Mutex::new(State {
    pipes: [const { None }; GUARDIANS],
    guardians: [None; GUARDIANS],
    pids: BTreeMap::new(),
    cgroups: BTreeSet::new(),
    closing: false,
});

fn state() -> MutexGuard<'static, State> {
    STATE.locked()
}

/// The keeper threads; [`stop`] ends them.
pub struct Keeper {
    threads: Vec<JoinHandle<()>>,
}

/// Starts the guardians (before any child is spawned) and a thread for each that replaces it
/// whenever it dies. Without any (no guardian binary beside the supervisor's), it still runs,
/// with the weaker guarantee of the parent-death signal alone (`spawn.rs` then sets it on
/// upstreams too); a binary `named` (`--guardian`) that does not open is an error.
pub fn start(log_format: hangar_runtime::logging::LogFormat, named: Option<&Path>) -> Result<Option<Keeper>, String> {
    JSON_LOGS.store(log_format == hangar_runtime::logging::LogFormat::Json, Ordering::Relaxed);
    match BINARY.get_or_init(|| open_binary(named)) {
        Err(err) if named.is_some() => return Err(err.clone()),
        Err(err) => {
            tracing::warn!(%err, "cannot start the guardians: an upstream's own children may outlive a killed supervisor");
            return Ok(None);
        }
        Ok(_) => {}
    }
    let mut threads = Vec::new();
    for slot in 0..GUARDIANS {
        let child = match spawn_guardian(slot) {
            Ok(child) => child,
            Err(err) => {
                tracing::warn!(%err, "cannot start a guardian: an upstream's own children may outlive a killed supervisor");
                continue;
            }
        };
        let thread = std::thread::Builder::new().name("guardian-keeper".into()).spawn(move || keep(slot, child));
        match thread {
            Ok(thread) => threads.push(thread),
            Err(err) => tracing::warn!(%err, "cannot watch a guardian: its death would go unnoticed"),
        }
    }
    if threads.is_empty() {
        return Ok(None);
    }
    KEEPING.store(true, Ordering::Relaxed);
    Ok(Some(Keeper { threads }))
}

/// The guardian binary, opened by [`start`] (before any upgrade can replace it): `O_PATH`,
/// close-on-exec, run as `/proc/self/fd/N`.
static BINARY: OnceLock<Result<File, String>> = OnceLock::new();

fn binary() -> Result<&'static File, &'static str> {
    match BINARY.get() {
        Some(opened) => opened.as_ref().map_err(String::as_str),
        None => Err("the guardian binary was never opened"),
    }
}

/// Opens the binary `named`, else the one beside the supervisor's.
fn open_binary(named: Option<&Path>) -> Result<File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = match named {
        Some(path) => path.to_owned(),
        None => std::env::current_exe()
            .map_err(|err| format!("cannot tell where hangar-supervisor is: {err}"))?
            .with_file_name(hangar_guardian::NAME),
    };
    File::options().read(true).custom_flags(libc::O_PATH).open(&path).map_err(|err| match named {
        Some(_) => format!("{}: {err}", path.display()),
        None => format!("{}: {err} (it is installed beside hangar-supervisor, from the same build)", path.display()),
    })
}

/// Runs guardian number `slot` and hands it everything it must watch.
fn spawn_guardian(slot: usize) -> std::io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    // The binary opened at start, even when its file was replaced or removed (an upgrade) since.
    let exe = format!("/proc/self/fd/{}", binary().map_err(std::io::Error::other)?.as_raw_fd());
    // Close-on-exec: only the guardian (as its stdin) and children not yet exec'd hold it.
    let (ours, theirs) = socketpair(AddressFamily::Unix, SockType::SeqPacket, None, SockFlag::SOCK_CLOEXEC)
        .map_err(std::io::Error::from)?;
    let mut own = children::own();
    let child = Command::new(exe)
        // Named apart (argv[0] here, its comm set by itself): `killall hangar-supervisor` or
        // `pkill -f hangar-supervisor` aimed at the supervisor must leave its guardian to act.
        .arg0(hangar_guardian::NAME)
        .arg(hangar_guardian::ARG)
        .arg(if JSON_LOGS.load(Ordering::Relaxed) { "json" } else { "human" })
        // Who the supervisor is, said by itself: a guardian that first runs after the supervisor
        // died has been handed to init (or another subreaper), and its parent then is no longer
        // the supervisor; it must never take that one's children for the supervisor's.
        .arg(proctree::Pinned::own().map_or_else(String::new, |own| own.to_string()))
        .stdin(Stdio::from(theirs))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        // Its own group: a Ctrl-C aimed at the supervisor's terminal group must not reach it.
        .process_group(0)
        .spawn()?;
    own.insert(child.id());
    drop(own);
    let mut state = state();
    state.pipes[slot] = Some(ours);
    state.guardians[slot] = Some(child.id());
    // Each guardian knows the others: the supervisor's children it must leave alone.
    let fellows: Vec<u32> = state.guardians.iter().flatten().copied().filter(|pid| *pid != child.id()).collect();
    for fellow in fellows {
        send_to(&mut state, slot, &format!("guardian {fellow}"), &[]);
    }
    send(&mut state, &format!("guardian {}", child.id()), &[]);
    let pids: Vec<(u32, Vec<RawFd>)> =
        state.pids.iter().map(|(pid, fds)| (*pid, fds.iter().map(AsRawFd::as_raw_fd).collect())).collect();
    for (pid, fds) in pids {
        send_to(&mut state, slot, &format!("+{pid}"), &fds);
    }
    let cgroups: Vec<PathBuf> = state.cgroups.iter().cloned().collect();
    for dir in cgroups {
        send_to(&mut state, slot, &format!("+cgroup {}", dir.display()), &[]);
    }
    Ok(child)
}

/// Waits for the guardian; whenever it dies (and the supervisor is not closing), says so and
/// replaces it.
fn keep(slot: usize, mut child: std::process::Child) {
    let mut backoff = Duration::ZERO;
    loop {
        let started = Instant::now();
        let pid = child.id();
        let status = child.wait();
        children::disown(pid);
        let closing = {
            let mut state = state();
            // Its pid may be handed out again: no guardian is to spare whoever gets it.
            state.guardians[slot] = None;
            state.closing
        };
        if closing {
            return;
        }
        let how = status.map_or_else(
            |err| format!("could not be waited for ({err})"),
            |status| proctree::describe_exit(status, None),
        );
        let deaths = RESPAWNS.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::error!(pid, how, deaths, "the guardian died; starting a new one with every process it must kill");
        if started.elapsed() >= HEALTHY_RUN {
            backoff = Duration::ZERO;
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).clamp(Duration::from_millis(100), MAX_BACKOFF);
        loop {
            if state().closing {
                return;
            }
            match spawn_guardian(slot) {
                Ok(next) => {
                    tracing::info!(pid = next.id(), "a new guardian runs");
                    child = next;
                    break;
                }
                Err(err) => {
                    tracing::error!(%err, "cannot start a new guardian; retrying");
                    std::thread::sleep(MAX_BACKOFF);
                }
            }
        }
    }
}

/// Whether a guardian keeps watch (or is being replaced) to kill upstreams when the supervisor
/// dies; else they need the parent-death signal.
pub fn running() -> bool {
    KEEPING.load(Ordering::Relaxed)
}

/// Holds the guardians' sockets still while a child is forked, so that the child can announce
/// itself on them between fork and exec.
pub struct Announce(MutexGuard<'static, State>);

impl Announce {
    /// The sockets, valid while `self` lives.
    pub fn fds(&self) -> [Option<RawFd>; GUARDIANS] {
        self.0.pipes.each_ref().map(|pipe| pipe.as_ref().map(AsRawFd::as_raw_fd))
    }
}

/// Locks the pipe for a spawn; take it after [`children::own`], never before.
pub fn announce() -> Announce {
    Announce(state())
}

/// Tells the guardian about an upstream or helper process, handing it copies of `pipes` (the
/// supervisor's ends of the child's stdio) to hold until [`release`].
pub fn watch(pid: u32, pipes: Vec<OwnedFd>) {
    let mut state = state();
    let fds: Vec<RawFd> = pipes.iter().map(AsRawFd::as_raw_fd).collect();
    send(&mut state, &format!("+{pid}"), &fds);
    state.pids.insert(pid, pipes);
}

/// Lets go of the copies of a process's pipes, here and in the guardian: the supervisor is
/// about to close its stdin, and the process must see that.
pub fn release(pid: u32) {
    let mut state = state();
    if let Some(pipes) = state.pids.get_mut(&pid) {
        pipes.clear();
        send(&mut state, &format!("~{pid}"), &[]);
    }
}

/// Tells the guardian a process is gone (reaped, with whatever it left killed).
pub fn forget(pid: u32) {
    let mut state = state();
    state.pids.remove(&pid);
    send(&mut state, &format!("-{pid}"), &[]);
}

/// Tells the guardian about an upstream's cgroup, before anything runs in it.
pub fn watch_cgroup(dir: &std::path::Path) {
    let mut state = state();
    state.cgroups.insert(dir.to_path_buf());
    send(&mut state, &format!("+cgroup {}", dir.display()), &[]);
}

/// Tells the guardian a cgroup is gone.
pub fn forget_cgroup(dir: &std::path::Path) {
    let mut state = state();
    state.cgroups.remove(dir);
    send(&mut state, &format!("-cgroup {}", dir.display()), &[]);
}

/// One message to every guardian, with `fds` attached.
fn send(state: &mut State, line: &str, fds: &[RawFd]) {
    for slot in 0..GUARDIANS {
        send_to(state, slot, line, fds);
    }
}

/// One message to guardian number `slot`.
fn send_to(state: &mut State, slot: usize, line: &str, fds: &[RawFd]) {
    let Some(socket) = state.pipes[slot].as_ref() else { return };
    let rights = [ControlMessage::ScmRights(fds)];
    let cmsgs = if fds.is_empty() { &[][..] } else { &rights[..] };
    let iov = [IoSlice::new(line.as_bytes())];
    if sendmsg::<()>(socket.as_raw_fd(), &iov, cmsgs, MsgFlags::MSG_NOSIGNAL, None).is_err() {
        // EPIPE: it died; its keeper notices, says so and replaces it with the full list.
        state.pipes[slot] = None;
    }
}

/// After a clean shutdown: closes the pipe (the guardian exits with nothing left to kill) and
/// waits for the keeper, bounded.
pub fn stop(keeper: Keeper) {
    {
        let mut state = state();
        state.closing = true;
        state.pipes = [const { None }; GUARDIANS];
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while !keeper.threads.iter().all(JoinHandle::is_finished) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    for thread in keeper.threads {
        if thread.is_finished() {
            let _ = thread.join();
        }
    }
}
