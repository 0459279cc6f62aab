//! The guardian: a tiny process that outlives a SIGKILLed supervisor just long enough to kill
//! every process group it ran.
//!
//! The parent-death signal kills the supervisor's direct children when it dies, but not what
//! those children started themselves. So at start the supervisor runs a copy of itself in
//! guardian mode, in its own process group, with a pipe on its stdin. The supervisor writes
//! `+PGID` when it spawns a group and `-PGID` once that group is gone. When the pipe reaches its
//! end (the supervisor exited, however it died), the guardian SIGKILLs every group it still
//! knows and exits. Under systemd, `KillMode=control-group` covers even a killed guardian.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};

/// The argument that turns the supervisor binary into a guardian.
pub const GUARDIAN_ARG: &str = "--internal-guardian";

static PIPE: OnceLock<Mutex<Option<ChildStdin>>> = OnceLock::new();

/// Starts the guardian; call once, before any child is spawned. Without one, the supervisor still
/// runs, with the weaker guarantee of the parent-death signal alone.
pub fn start() -> std::io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .arg(GUARDIAN_ARG)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        // Its own group: a Ctrl-C aimed at the supervisor's terminal group must not reach it.
        .process_group(0)
        .spawn()?;
    if let Some(stdin) = child.stdin.take() {
        let _ = PIPE.set(Mutex::new(Some(stdin)));
    }
    Ok(child)
}

/// Tells the guardian about a new process group.
pub fn watch(pgid: u32) {
    send(&format!("+{pgid}\n"));
}

/// Tells the guardian a process group is gone.
pub fn forget(pgid: u32) {
    send(&format!("-{pgid}\n"));
}

fn send(line: &str) {
    if let Some(pipe) = PIPE.get() {
        let mut pipe = pipe.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(pipe) = pipe.as_mut() {
            let _ = pipe.write_all(line.as_bytes());
        }
    }
}

/// Closes the pipe after a clean shutdown, so the guardian exits with nothing left to kill.
pub fn close() {
    if let Some(pipe) = PIPE.get() {
        pipe.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
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
    let mut groups = BTreeSet::new();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let (op, pgid) = line.split_at(line.len().min(1));
        match (op, pgid.parse::<u32>()) {
            ("+", Ok(pgid)) => {
                groups.insert(pgid);
            }
            ("-", Ok(pgid)) => {
                groups.remove(&pgid);
            }
            _ => {}
        }
    }
    for pgid in groups {
        crate::spawn::signal_group(pgid, Signal::SIGKILL);
    }
    std::process::ExitCode::SUCCESS
}
