//! The process tree as `/proc` shows it: who is whose child, and killing a whole subtree. The
//! parts the guardians need too live in `hangar_guardian::proctree` and are used from here; this
//! adds what only the supervisor does (waiting out an exec for a marker, signalling a group,
//! saying how a process ended).
//!
//! An upstream that daemonizes (`setsid`, a double fork, `setpgid(0, 0)`) leaves its process
//! group, so signalling the group misses it. Its parent links do not lie, though: whatever it
//! started and still parents, however regrouped, is below it, and [`kill_tree`] finds it by
//! following `ppid` links down from its pid. What it orphans is reparented to the supervisor (the
//! subreaper, `reaper.rs`), which tells whose it is by its cgroup or by the environment marker
//! every upstream is started with ([`MARKER`], read by [`marker_of`]).

pub use hangar_guardian::proctree::{MARKER, Pinned, Stat, children_of, kill_tree, marker_of, read, snapshot, subtree};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// How long [`settled_marker_of`] waits for a process in the middle of an exec. An exec takes
/// microseconds, but a loaded machine may not schedule the process for a while; the wait ends as
/// soon as the environment is in place, so only a process really caught mid-exec costs anything.
const EXEC_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Like [`marker_of`], but a process caught in the middle of an exec, whose new environment is
/// not in place yet (the kernel shows it empty until then), is read again once it is, bounded:
/// read too early, a marked process would pass for one that cleared its environment.
pub fn settled_marker_of(pid: u32) -> Option<String> {
    let deadline = std::time::Instant::now() + EXEC_WAIT;
    loop {
        let marker = marker_of(pid);
        if marker.is_some() || !mid_exec(pid) || std::time::Instant::now() >= deadline {
            return marker;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Whether the process has no environment in place yet (`env_end`, field 50 of its stat, is 0
/// until an exec has set it up; an empty environment still has an address). A zombie shows 0
/// too, having no memory at all, and never gets an environment: it is not waited for.
fn mid_exec(pid: u32) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    let Some((_, tail)) = text.rsplit_once(')') else { return false };
    // Numbered from 1, field 3 (the state) is the first after the name.
    let mut fields = tail.split_whitespace();
    let dead = matches!(fields.next(), Some("Z" | "X" | "x"));
    !dead && fields.nth(50 - 4) == Some("0")
}

/// The start of every [`MARKER`] value the supervisor `pid` gives out: its pid and start time,
/// so a marker from another hangar, or one that ran with the same pid before, never matches.
pub fn marker_prefix(pid: u32) -> String {
    let start = read(pid).map_or(0, |stat| stat.start);
    Pinned { pid, start }.marker_prefix()
}

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

/// How a process ended, in the hangar's words. `killed_because` is set when the hangar killed it
/// itself, and says why: then a SIGKILL is the hangar's doing, not someone else's.
pub fn describe_exit(status: std::process::ExitStatus, killed_because: Option<&str>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal(), killed_because) {
        (None, Some(signal), Some(why)) if signal == Signal::SIGKILL as i32 => {
            format!("{why}, so the hangar killed it (SIGKILL)")
        }
        (Some(code), _, _) => format!("exited with code {code}"),
        (None, Some(signal), _) => {
            let name = Signal::try_from(signal).map(|s| s.as_str()).unwrap_or("an unknown signal");
            format!("was killed by {name}")
        }
        (None, None, _) => "ended".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_marker_from_the_environment_a_process_was_started_with() {
        let mut child = std::process::Command::new("/bin/sleep").arg("10").env(MARKER, "1-2-3").spawn().unwrap();
        assert_eq!(settled_marker_of(child.id()).as_deref(), Some("1-2-3"));
        let _ = child.kill();
        let _ = child.wait();
        let mut bare = std::process::Command::new("/bin/sleep").arg("10").env_clear().spawn().unwrap();
        assert_eq!(settled_marker_of(bare.id()), None);
        let _ = bare.kill();
        let _ = bare.wait();
    }
}
