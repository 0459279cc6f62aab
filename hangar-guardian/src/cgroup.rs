//! Killing an upstream's cgroup whole, and finding the cgroup a process is in: what the
//! supervisor (`hangar-supervisor/src/cgroup.rs`, which creates the cgroups) and its guardians
//! both do.
//!
//! A v2 cgroup is killed at once with `cgroup.kill` (Linux 5.14). v1 has none, so every process
//! a v1 group's `cgroup.procs` lists is SIGKILLed, through a pidfd checked against the list again
//! (no pid-reuse window), until it is empty.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Why a cgroup could not be killed or removed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot kill the cgroup: {0}")]
    Kill(io::Error),
    #[error("cannot kill process {pid} of the cgroup v1 group: {source}")]
    Signal { pid: u32, source: io::Error },
    #[error("cannot remove the cgroup: {0}")]
    Remove(io::Error),
}

/// SIGKILLs every process in the cgroup: at once with `cgroup.kill` (v2); a v1 group has none,
/// so each process its `cgroup.procs` lists ([`kill_listed`]; what forks meanwhile is taken by
/// the next call).
pub fn kill(dir: &Path) -> Result<(), Error> {
    let kill_file = dir.join("cgroup.kill");
    if !kill_file.exists() && dir.join("cgroup.procs").exists() {
        return kill_listed(|| members(dir));
    }
    match std::fs::write(kill_file, "1") {
        Err(err) if err.kind() != io::ErrorKind::NotFound => Err(Error::Kill(err)),
        _ => Ok(()),
    }
}

/// SIGKILLs the processes `listed` names, without the pid-reuse window of reading pids and then
/// signalling them: a pidfd is opened on each pid read, so the signal can reach no other process
/// than the one opened, and that one is signalled only if the list, read again after the open,
/// still names its pid. While it lives no other process has that pid, so it is still a member;
/// had it died meanwhile, the signal reaches nobody. A kernel without pidfds (before 5.3) gets
/// the plain signal by pid. Every member is tried; the first failure is returned.
fn kill_listed(listed: impl Fn() -> Vec<u32>) -> Result<(), Error> {
    use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};
    let own = std::process::id();
    let mut opened: Vec<(u32, std::os::fd::OwnedFd)> = Vec::new();
    for pid in listed().into_iter().filter(|pid| *pid > 1 && *pid != own) {
        let Some(raw) = i32::try_from(pid).ok().and_then(Pid::from_raw) else { continue };
        match pidfd_open(raw, PidfdFlags::empty()) {
            Ok(pidfd) => opened.push((pid, pidfd)),
            Err(rustix::io::Errno::NOSYS) => crate::proctree::signal(pid, nix::sys::signal::Signal::SIGKILL),
            // Gone already (ESRCH): nothing to kill.
            Err(_) => {}
        }
    }
    if opened.is_empty() {
        return Ok(());
    }
    let still = listed();
    let mut failed = None;
    for (pid, pidfd) in opened.iter().filter(|(pid, _)| still.contains(pid)) {
        match pidfd_send_signal(pidfd, Signal::KILL) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => {}
            Err(err) => {
                failed.get_or_insert(Error::Signal { pid: *pid, source: err.into() });
            }
        }
    }
    failed.map_or(Ok(()), Err)
}

/// The pids a group's `cgroup.procs` lists (none if it cannot be read).
fn members(dir: &Path) -> Vec<u32> {
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    procs.lines().filter_map(|line| line.trim().parse().ok()).collect()
}

/// Whether any process is left in the cgroup (or it cannot be read, which counts as empty):
/// v2's `cgroup.events`, else (v1) a non-empty `cgroup.procs`.
pub fn populated(dir: &Path) -> bool {
    match std::fs::read_to_string(dir.join("cgroup.events")) {
        Ok(events) => events.lines().any(|line| line == "populated 1"),
        Err(_) => !members(dir).is_empty(),
    }
}

/// Kills the cgroup until it is empty (bounded) and removes it. The first failure is returned;
/// the work goes on past it.
pub fn kill_and_remove(dir: &Path, limit: Duration) -> Result<(), Error> {
    let deadline = Instant::now() + limit;
    let mut failed = None;
    loop {
        if let Err(err) = kill(dir) {
            failed.get_or_insert(err);
        }
        if !populated(dir) || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => {
            failed.get_or_insert(Error::Remove(err));
        }
    }
    failed.map_or(Ok(()), Err)
}

/// Where the cgroup v2 hierarchy is mounted, to name a process's cgroup as a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hierarchy {
    /// The root of the mount within the hierarchy (`/` unless a cgroup namespace or bind mount
    /// shows only part of it).
    root: String,
    mount: PathBuf,
}

impl Hierarchy {
    /// The cgroup2 mount this process sees, if any (`/proc/self/mountinfo`).
    pub fn read() -> Option<Hierarchy> {
        Hierarchy::in_mountinfo(&std::fs::read_to_string("/proc/self/mountinfo").ok()?)
    }

    /// The cgroup2 mount in a `/proc/self/mountinfo` text.
    fn in_mountinfo(mountinfo: &str) -> Option<Hierarchy> {
        mountinfo.lines().find_map(|line| {
            let (fields, fs) = line.split_once(" - ")?;
            if fs.split_whitespace().next()? != "cgroup2" {
                return None;
            }
            let fields: Vec<&str> = fields.split_whitespace().collect();
            Some(Hierarchy { root: unescape(fields.get(3)?), mount: PathBuf::from(unescape(fields.get(4)?)) })
        })
    }

    /// The cgroup v2 directory process `process` (a pid, or `self`) is in:
    /// `<mount>/<path from /proc/<process>/cgroup's "0::" line>`.
    pub fn of(&self, process: &str) -> Option<PathBuf> {
        let cgroups = std::fs::read_to_string(format!("/proc/{process}/cgroup")).ok()?;
        let path = cgroups.lines().find_map(|line| line.strip_prefix("0::"))?;
        let relative = path.strip_prefix(self.root.as_str()).unwrap_or(path).trim_start_matches('/');
        Some(self.mount.join(relative))
    }
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cgroup2_mount_in_hybrid_and_unified_layouts() {
        let hybrid = "35 25 0:30 / /sys/fs/cgroup/cpu rw,relatime shared:12 - cgroup cgroup rw,cpu\n\
                      36 25 0:31 / /sys/fs/cgroup/unified rw,relatime shared:13 - cgroup2 cgroup2 rw";
        let found = Hierarchy::in_mountinfo(hybrid).unwrap();
        assert_eq!((found.root.as_str(), found.mount.as_path()), ("/", Path::new("/sys/fs/cgroup/unified")));
        let unified = "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate";
        assert_eq!(Hierarchy::in_mountinfo(unified).unwrap().mount, Path::new("/sys/fs/cgroup"));
        assert_eq!(Hierarchy::in_mountinfo("1 0 0:1 / / rw - ext4 /dev/sda rw"), None);
    }

    /// A child that sleeps for a minute unless killed.
    fn sleeper() -> std::process::Child {
        std::process::Command::new("sleep").arg("60").spawn().unwrap()
    }

    /// The signal that ended `child` (waiting for it: at most the minute it sleeps).
    fn ended_by(child: &mut std::process::Child) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        child.wait().unwrap().signal()
    }

    #[test]
    fn a_listed_process_is_killed_only_if_the_list_still_names_it_once_opened() {
        let mut member = sleeper();
        kill_listed(|| vec![member.id()]).unwrap();
        assert_eq!(ended_by(&mut member), Some(libc::SIGKILL), "a member is killed");

        // Listed at the first read, gone from the list once its pidfd is open: as if it had died
        // and its pid gone to a process outside the group, which must not be signalled.
        let mut outsider = sleeper();
        let reads = std::cell::Cell::new(0);
        kill_listed(|| {
            reads.set(reads.get() + 1);
            if reads.get() == 1 { vec![outsider.id()] } else { Vec::new() }
        })
        .unwrap();
        assert_eq!(reads.get(), 2);
        // A SIGKILL sent above would end it before this SIGTERM could: how it ended tells.
        let outsider_pid = nix::unistd::Pid::from_raw(outsider.id() as i32);
        nix::sys::signal::kill(outsider_pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        assert_eq!(ended_by(&mut outsider), Some(libc::SIGTERM), "a pid no longer listed is left alone");

        // Never init, never the caller itself.
        kill_listed(|| vec![0, 1, std::process::id()]).unwrap();
    }

    #[test]
    fn a_v1_group_is_populated_while_its_procs_lists_a_pid() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cgroup.procs"), "").unwrap();
        assert!(!populated(dir.path()));
        std::fs::write(dir.path().join("cgroup.procs"), "12\n34\n").unwrap();
        assert!(populated(dir.path()));
        assert_eq!(members(dir.path()), [12, 34]);
        let v2 = tempfile::tempdir().unwrap();
        std::fs::write(v2.path().join("cgroup.events"), "populated 0\nfrozen 0\n").unwrap();
        std::fs::write(v2.path().join("cgroup.procs"), "").unwrap();
        assert!(!populated(v2.path()));
    }

    #[test]
    fn names_its_own_cgroup_below_the_mount() {
        let Some(hierarchy) = Hierarchy::read() else { return };
        let own = hierarchy.of("self").unwrap();
        assert!(own.starts_with(&hierarchy.mount), "{} is outside {}", own.display(), hierarchy.mount.display());
    }
}
