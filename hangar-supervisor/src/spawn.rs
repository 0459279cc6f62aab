//! Every process the supervisor starts is started here: in its own process group, with the
//! parent-death signal set, pipes as asked, and nothing else inherited by accident.
//!
//! This is the only module of the hangar allowed `unsafe`: setting the parent-death signal has
//! to happen in the child between fork and exec.
//!
//! What keeps children from outliving the supervisor (invariant 3):
//! - each child leads its own process group, and the supervisor signals the whole group, so an
//!   upstream's own children go with it when it is stopped or when it exits;
//! - the guardian (`guardian.rs`) kills every group the supervisor still had when it dies,
//!   SIGKILL included, so an upstream's own children do not survive it either;
//! - `PR_SET_PDEATHSIG` makes the kernel SIGKILL the child the moment the supervisor dies, even
//!   by SIGKILL. The signal fires when the *thread* that forked exits, so spawns happen only on
//!   tokio's long-lived worker threads (never inside `spawn_blocking`);
//! - under systemd, `KillMode=control-group` kills whatever is left in the unit's cgroup.

use std::ffi::OsStr;
use std::io;
use std::process::Stdio;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// How the child's standard streams are wired.
pub enum Pipes {
    /// stdin, stdout and stderr piped to the supervisor (an upstream MCP server).
    All,
    /// stdout and stderr piped to the supervisor's log, no stdin (an upstream serving HTTP).
    Output,
    /// Inherit stdout and stderr, no stdin (a helper process such as the API).
    Inherit,
}

/// Starts `program args...` with extra `env`, in a new process group.
pub fn spawn<I, S>(program: &OsStr, args: I, env: &[(String, String)], pipes: Pipes) -> io::Result<Child>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = Command::new(program);
    command.args(args).envs(env.iter().map(|(k, v)| (k, v))).process_group(0).kill_on_drop(false);
    // systemd's handshakes are the supervisor's own: no child may answer them in its name.
    for inherited in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"] {
        command.env_remove(inherited);
    }
    match pipes {
        Pipes::All => command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()),
        Pipes::Output => command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()),
        Pipes::Inherit => command.stdin(Stdio::null()).stdout(Stdio::inherit()).stderr(Stdio::inherit()),
    };
    let supervisor = std::process::id();
    set_parent_death_signal(&mut command, supervisor);
    let child = command.spawn()?;
    if let Some(pgid) = child.id() {
        crate::guardian::watch(pgid);
    }
    Ok(child)
}

/// Kills whatever is left of a reaped child's process group and tells the guardian it is gone.
pub fn reap_group(pgid: u32) {
    signal_group(pgid, Signal::SIGKILL);
    crate::guardian::forget(pgid);
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn set_parent_death_signal(command: &mut Command, supervisor: u32) {
    // SAFETY: the closure runs in the forked child before exec and calls only async-signal-safe
    // functions (prctl, getppid); it allocates nothing and touches no locks.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The supervisor may have died between fork and prctl: then nobody would signal us.
            if libc::getppid() as u32 != supervisor {
                return Err(io::Error::other("the supervisor exited while this process was starting"));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn set_parent_death_signal(_command: &mut Command, _supervisor: u32) {}

/// Sends `signal` to the process group led by `pgid`. A group that is already gone is fine.
pub fn signal_group(pgid: u32, signal: Signal) {
    let Ok(raw) = i32::try_from(pgid) else { return };
    if raw <= 1 {
        return; // never signal init's group or every process we may reach
    }
    match killpg(Pid::from_raw(raw), signal) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
        Err(err) => tracing::warn!(pgid, %signal, %err, "could not signal a process group"),
    }
}
