//! What the guardian must kill, as the supervisor said on its socket, and whom it must not:
//! `+PID` (with copies of the process's pipes attached), `~PID` (let go of those copies),
//! `-PID`, `+cgroup DIR`, `-cgroup DIR` and `guardian PID` (`hangar-supervisor/src/guardian.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::RawFd;
use std::path::PathBuf;

use hangar_guardian::proctree;

#[derive(Default)]
pub struct Watched {
    /// Each pid with its start time, read when announced (a pid reused later is left alone), and
    /// the copies of its pipes, held open until it is killed.
    pub pids: BTreeMap<u32, (u64, Vec<RawFd>)>,
    pub cgroups: BTreeSet<PathBuf>,
    /// The guardians (this one included), by pid and start time: children of the supervisor
    /// never to be killed.
    pub guardians: BTreeSet<(u32, u64)>,
}

impl Watched {
    /// Applies one message; `fds` came with it (kept with a `+PID`, else closed).
    pub fn apply(&mut self, line: &str, fds: Vec<RawFd>) {
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

    /// Whether `pid` is one of the guardians.
    pub fn is_guardian(&self, pid: u32) -> bool {
        self.guardians.iter().any(|(guardian, _)| *guardian == pid)
    }
}

fn close_all(fds: Vec<RawFd>) {
    for fd in fds {
        let _ = nix::unistd::close(fd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_what_the_supervisor_says() {
        let mut watched = Watched::default();
        let own = std::process::id();
        watched.apply(&format!("+{own}"), Vec::new());
        watched.apply("+cgroup /sys/fs/cgroup/x/upstream-1", Vec::new());
        watched.apply(&format!("guardian {own}"), Vec::new());
        // A pid nobody has is never watched.
        watched.apply("+4294967295", Vec::new());
        assert_eq!(watched.pids.keys().copied().collect::<Vec<_>>(), [own]);
        assert!(watched.is_guardian(own));
        assert_eq!(watched.cgroups.len(), 1);
        watched.apply("-cgroup /sys/fs/cgroup/x/upstream-1", Vec::new());
        watched.apply(&format!("-{own}"), Vec::new());
        assert!(watched.pids.is_empty() && watched.cgroups.is_empty());
    }
}
