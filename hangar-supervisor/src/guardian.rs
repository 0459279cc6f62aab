//! The guardian: a tiny process that outlives a SIGKILLed supervisor just long enough to kill
//! every upstream's whole subtree.
//!
//! A SIGKILLed supervisor can clean up nothing, and the kernel kills nothing below it on its
//! behalf. So the supervisor runs a copy of itself in guardian mode, in its own process group,
//! with a socket (`SOCK_SEQPACKET`, one message a line) on its stdin, and tells it what to kill:
//! `+PID` for each upstream and helper (sent by the child itself between fork and exec, so not
//! even a spawn the supervisor dies in the middle of escapes), `+cgroup DIR` for each upstream's
//! cgroup, and `-PID` / `-cgroup DIR` once they are gone. When the socket reaches its end (the
//! supervisor exited, however it died), the guardian kills each cgroup (`cgroup.kill`) and each
//! pid's subtree (`proctree::kill_tree`), then exits.
//!
//! The supervisor is the subreaper of every upstream (`reaper.rs`): what an upstream orphans
//! goes to it, and one it leaves running (an orphan of a running upstream) it announces too
//! (`+PID`, then `-PID` once reaped). If the supervisor dies before announcing one, or an
//! upstream dies in the same instant as the supervisor (it asked for a parent-death signal of
//! its own, or exits when its parent changes), orphans go to init, out of every subtree. So the
//! guardian also notes every descendant of each pid it watches (pid and start time) every
//! [`RECORD_EVERY`] while it waits, and at the end kills those it noted and every process still
//! marked in its environment as descending from one of its supervisor's upstreams
//! (`proctree::MARKER`), wherever it went. And each records the supervisor's own children as
//! they appear (`kin.rs`: every [`kin::LOOK_EVERY`], and at every walk), so an orphan the
//! supervisor had not yet swept is killed too, even one that has shed its marker and its group;
//! their descendants are noted at each walk like the upstreams'. The fellow guardians, which are
//! the supervisor's children as well, are named to each (`guardian PID`) and left alone. What
//! can still escape without cgroups: an orphan reparented to the supervisor less than one look
//! (100 ms) before its death that has by then cleared its environment and left its upstream's
//! process group, or a descendant born less than one walk (1 s) before it, below an upstream or
//! a recorded orphan that dies in the same instant.
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
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hangar_core::sync::Unpoisoned;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
use nix::sys::socket::{
    AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType, recvmsg, sendmsg, socketpair,
};

use crate::kin::{self, Kin};
use crate::{cgroup, children, proctree};

/// The argument that turns the supervisor binary into a guardian.
pub const GUARDIAN_ARG: &str = "--internal-guardian";
/// How many guardians keep watch at once.
pub const GUARDIANS: usize = 2;
/// What the guardian is called in `ps`, `top`, `pkill` and `killall` (its argv[0] and comm).
const GUARDIAN_NAME: &str = "hangar-guardian";

/// A guardian that lived this long before dying is replaced at once again next time.
const HEALTHY_RUN: Duration = Duration::from_secs(10);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How long a guardian waits for killed cgroups to empty before removing them.
const CGROUP_DRAIN: Duration = Duration::from_secs(2);
/// How often a guardian notes the upstreams' descendants (a walk of `/proc`).
const RECORD_EVERY: Duration = Duration::from_secs(1);

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
/// whenever it dies. Without any, the supervisor still runs, with the weaker guarantee of the
/// parent-death signal alone (`spawn.rs` then sets it on upstreams too).
pub fn start(log_format: hangar_runtime::logging::LogFormat) -> Option<Keeper> {
    JSON_LOGS.store(log_format == hangar_runtime::logging::LogFormat::Json, Ordering::Relaxed);
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
        return None;
    }
    KEEPING.store(true, Ordering::Relaxed);
    Some(Keeper { threads })
}

/// Runs guardian number `slot` and hands it everything it must watch.
fn spawn_guardian(slot: usize) -> std::io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    // The running binary even when its file was replaced or removed (an upgrade) since.
    let exe = std::path::Path::new("/proc/self/exe");
    // Close-on-exec: only the guardian (as its stdin) and children not yet exec'd hold it.
    let (ours, theirs) = socketpair(AddressFamily::Unix, SockType::SeqPacket, None, SockFlag::SOCK_CLOEXEC)
        .map_err(std::io::Error::from)?;
    let mut own = children::own();
    let child = Command::new(exe)
        // Named apart (argv[0] here, the thread name in `run`): `killall hangar-supervisor` or
        // `pkill -f hangar-supervisor` aimed at the supervisor must leave its guardian to act.
        .arg0(GUARDIAN_NAME)
        .arg(GUARDIAN_ARG)
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

/// The guardian's whole life: follow the pipe, then kill what is left.
pub fn run() -> std::process::ExitCode {
    // Signals aimed at the supervisor's process tree (a terminal's Ctrl-C) must not end it
    // early: only the pipe's end does. Blocked (not handled), so no unsafe is needed; the
    // guardian is single-threaded, so the mask covers it all.
    let mut blocked = SigSet::empty();
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP, Signal::SIGPIPE] {
        blocked.add(signal);
    }
    let _ = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&blocked), None);
    if let Ok(name) = std::ffi::CString::new(GUARDIAN_NAME) {
        let _ = nix::sys::prctl::set_name(&name);
    }
    let args: Vec<String> = std::env::args().collect();
    let json = args.get(2).is_some_and(|format| format == "json");
    hangar_runtime::logging::init(if json {
        hangar_runtime::logging::LogFormat::Json
    } else {
        hangar_runtime::logging::LogFormat::Human
    });
    // The supervisor as it named itself. Its children are recorded only while it is this
    // guardian's parent and still that very process (`Kin`); one that died before this guardian
    // ran leaves nothing to record, only what it announced (already on the pipe) to kill.
    let Some(supervisor) = args.get(3).and_then(|named| proctree::Pinned::parse(named)) else {
        tracing::error!("guardian: started without the supervisor's pid and start time; exiting");
        return std::process::ExitCode::from(hangar_runtime::exit::EX_USAGE);
    };
    let parent = nix::unistd::getppid().as_raw() as u32;
    let marked = supervisor.marker_prefix();
    let mut watched = Watched::default();
    let mut kin = if parent == supervisor.pid && supervisor.is_running() {
        Kin::new(supervisor)
    } else {
        tracing::warn!(
            supervisor = supervisor.pid,
            parent,
            "guardian: the supervisor was gone before this guardian ran; killing only what it announced"
        );
        Kin::orphaned(supervisor)
    };
    let mut noted = BTreeMap::new();
    let mut buf = [0u8; 4096];
    let mut last_noted: Option<Instant> = None;
    let mut last_looked: Option<Instant> = None;
    loop {
        // Both on time even while messages keep coming (orphans adopted and reaped in a loop).
        if last_noted.is_none_or(|at| at.elapsed() >= RECORD_EVERY) {
            let procs = proctree::snapshot();
            log_recorded(&watched, kin.walked(&procs));
            let descendants = watched.descendants(&procs, &kin);
            if descendants.len() != noted.len() {
                let (guardian, descendants_noted) = (std::process::id(), descendants.len());
                tracing::debug!(guardian, descendants_noted, "guardian: noted the upstreams' descendants");
            }
            noted = descendants;
            last_noted = Some(Instant::now());
        }
        if last_looked.is_none_or(|at| at.elapsed() >= kin::LOOK_EVERY) {
            log_recorded(&watched, kin.look());
            last_looked = Some(Instant::now());
        }
        let until =
            |last: Option<Instant>, every: Duration| every.saturating_sub(last.map_or(every, |at| at.elapsed()));
        if !message_within(until(last_noted, RECORD_EVERY).min(until(last_looked, kin::LOOK_EVERY))) {
            continue;
        }
        let mut space = nix::cmsg_space!([RawFd; 8]);
        let mut iov = [IoSliceMut::new(&mut buf)];
        let (len, fds) = match recvmsg::<()>(0, &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC) {
            Ok(message) => {
                let fds: Vec<RawFd> = message
                    .cmsgs()
                    .into_iter()
                    .flatten()
                    .flat_map(|cmsg| match cmsg {
                        ControlMessageOwned::ScmRights(fds) => fds,
                        _ => Vec::new(),
                    })
                    .collect();
                (message.bytes, fds)
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break,
        };
        // The supervisor's end closed: it exited, however it died.
        if len == 0 {
            break;
        }
        watched.apply(&String::from_utf8_lossy(&buf[..len]), fds);
    }
    let Watched { pids, cgroups, guardians } = watched;
    for dir in &cgroups {
        cgroup::kill(dir);
    }
    // The supervisor's children it never announced: orphans it had not swept yet, however they
    // hid (an announced one was just killed with the rest).
    let unannounced: Vec<(u32, u64)> =
        kin.recorded(&guardians).into_iter().filter(|(pid, _)| !pids.contains_key(pid)).collect();
    for (pid, (start, _pipes)) in pids {
        proctree::kill_tree(pid, Some(start));
    }
    for (pid, start) in unannounced {
        proctree::kill_tree(pid, Some(start));
    }
    // Those whose upstream died with the supervisor and left them to init.
    for (pid, start) in noted {
        proctree::kill_tree(pid, Some(start));
    }
    // Those still marked as descending from one of its upstreams, wherever they went (an orphan
    // the supervisor adopted but had not yet announced when it died).
    for process in proctree::snapshot() {
        if process.is_live() && proctree::marker_of(process.pid).is_some_and(|marker| marker.starts_with(&marked)) {
            proctree::kill_tree(process.pid, Some(process.start));
        }
    }
    for dir in &cgroups {
        cgroup::kill_and_remove(dir, CGROUP_DRAIN);
    }
    std::process::ExitCode::SUCCESS
}

/// Whether a message (or the end) arrives on the guardian's socket within `wait`.
fn message_within(wait: Duration) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    // Whole milliseconds, rounded up: a wait cut down to 0 would spin until the deadline.
    let millis = u64::try_from(wait.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX);
    let timeout = PollTimeout::try_from(Duration::from_millis(millis)).unwrap_or(PollTimeout::MAX);
    match poll(&mut fds, timeout) {
        Ok(0) | Err(nix::errno::Errno::EINTR) => false,
        // Ready, or an error that `recvmsg` will report.
        Ok(_) | Err(_) => true,
    }
}

/// Logs the supervisor's children a guardian just recorded that the supervisor had not
/// announced (yet): orphans it has not swept, or a child that announces itself in a moment.
fn log_recorded(watched: &Watched, fresh: Vec<u32>) {
    let guardian = std::process::id();
    for pid in fresh {
        if pid != guardian && !watched.pids.contains_key(&pid) && !watched.guardians.iter().any(|(g, _)| *g == pid) {
            tracing::debug!(guardian, pid, "guardian: recorded a new child of the supervisor");
        }
    }
}

/// What the guardian must kill, as the supervisor said, and whom it must not.
#[derive(Default)]
struct Watched {
    /// Each pid with its start time, read when announced (a pid reused later is left alone), and
    /// the copies of its pipes, held open until it is killed.
    pids: BTreeMap<u32, (u64, Vec<RawFd>)>,
    cgroups: BTreeSet<PathBuf>,
    /// The guardians (this one included), by pid and start time: children of the supervisor
    /// never to be killed.
    guardians: BTreeSet<(u32, u64)>,
}

impl Watched {
    /// Every live process in `procs` below the watched ones and the supervisor's children
    /// recorded in `kin`, with its start time (so a pid reused later is left alone).
    fn descendants(&self, procs: &[proctree::Stat], kin: &Kin) -> BTreeMap<u32, u64> {
        let roots: BTreeSet<u32> =
            self.pids.keys().copied().chain(kin.recorded(&self.guardians).into_iter().map(|(pid, _)| pid)).collect();
        if roots.is_empty() {
            return BTreeMap::new();
        }
        let starts: BTreeMap<u32, u64> = procs.iter().map(|p| (p.pid, p.start)).collect();
        roots
            .into_iter()
            .flat_map(|root| proctree::subtree(root, procs).into_iter().filter(move |pid| *pid != root))
            .filter_map(|pid| Some((pid, *starts.get(&pid)?)))
            .collect()
    }

    fn apply(&mut self, line: &str, fds: Vec<RawFd>) {
        let mut unkept = fds;
        let pid = |op: char| line.strip_prefix(op).and_then(|pid| pid.parse::<u32>().ok());
        if let Some(guardian) = line.strip_prefix("guardian ").and_then(|pid| pid.parse::<u32>().ok()) {
            if let Some(stat) = proctree::read(guardian) {
                self.guardians.insert((guardian, stat.start));
            }
        } else if let Some(dir) = line.strip_prefix("+cgroup ") {
            self.cgroups.insert(PathBuf::from(dir));
        } else if let Some(dir) = line.strip_prefix("-cgroup ") {
            self.cgroups.remove(&PathBuf::from(dir));
        } else if let Some(pid) = pid('+') {
            let known = self.pids.get(&pid).map(|(start, _)| *start);
            // A process already gone when announced (a spawn that failed) is never looked for.
            if let Some(start) = known.or_else(|| proctree::read(pid).map(|stat| stat.start)) {
                let (_, pipes) = self.pids.entry(pid).or_insert((start, Vec::new()));
                pipes.append(&mut unkept);
            }
        } else if let Some(pid) = pid('~') {
            if let Some((_, pipes)) = self.pids.get_mut(&pid) {
                close_all(std::mem::take(pipes));
            }
        } else if let Some((_, pipes)) = pid('-').and_then(|pid| self.pids.remove(&pid)) {
            close_all(pipes);
        }
        close_all(unkept);
    }
}

fn close_all(fds: Vec<RawFd>) {
    for fd in fds {
        let _ = nix::unistd::close(fd);
    }
}
