//! Whether a control-socket peer's process lies in an upstream's tree, which the control
//! socket refuses whatever the peer proves (`control.rs`): defence in depth behind the control
//! key, for an upstream that could read the key (an unsandboxed one runs as the hangar's user).
//!
//! The peer's pid (SO_PEERCRED, taken at its `connect`) and each of its ancestors, up to the
//! supervisor or init, is judged as the reaper judges an orphan: a running upstream itself
//! ([`lineage::running`], the same process by its start time), or a process
//! [`lineage::owner_of`] names an upstream for (its cgroup, the cgroup v1 group holding an
//! upstream's limits, the `HANGAR_UPSTREAM` marker in its environment, or an upstream's process
//! group). So a descendant is refused however it regrouped, and an orphan the supervisor adopted
//! is refused while its cgroup, marker or group still names its upstream. What is left: without
//! cgroups, an orphan that cleared its environment and left its process group (the reaper's
//! window too). Reading `/proc` blocks, so callers run [`upstream_tree`] off the event loop.

use crate::{lineage, proctree};

/// The most ancestors walked (Linux nests far fewer; a cycle cannot happen, but is bounded too).
const MAX_DEPTH: usize = 4096;

/// Why the process `pid` (a peer of the control socket) may not speak there, if it lies in an
/// upstream's tree; `None` if it does not. A peer whose process is already gone is refused too:
/// it may have handed its connection to a child before exiting, and who that child is is unknown.
pub fn upstream_tree(pid: u32) -> Option<String> {
    let supervisor = std::process::id();
    let mut current = pid;
    for _ in 0..MAX_DEPTH {
        if current <= 1 || current == supervisor {
            return None;
        }
        let Some(stat) = proctree::read(current) else {
            return (current == pid).then(|| format!("its process {pid} is gone"));
        };
        let upstream = lineage::running(current).is_some_and(|u| u.start.is_none_or(|start| start == stat.start));
        if upstream {
            return Some(if current == pid {
                format!("pid {pid} is an upstream")
            } else {
                format!("pid {pid} descends from upstream process {current}")
            });
        }
        if lineage::owner_of(current).is_some() {
            return Some(if current == pid {
                format!("pid {pid} belongs to an upstream (its cgroup, environment marker or process group)")
            } else {
                format!("pid {pid} descends from process {current}, which belongs to an upstream")
            });
        }
        current = stat.ppid;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_outside_every_upstream_is_no_upstream_and_one_gone_is_refused() {
        // This test's process descends from no upstream of this (test) supervisor.
        assert_eq!(upstream_tree(std::process::id()), None);
        let mut child = std::process::Command::new("/bin/sleep").arg("10").spawn().unwrap();
        assert_eq!(upstream_tree(child.id()), None, "a child of the supervisor itself");
        let pid = child.id();
        let _ = child.kill();
        let _ = child.wait();
        assert!(upstream_tree(pid).is_some_and(|why| why.contains("is gone")));
    }

    #[test]
    fn an_upstream_and_its_descendants_are_refused() {
        // `sh` (the "upstream") starts a `sleep` that stays its child.
        let mut upstream = std::process::Command::new("/bin/sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(upstream.stdout.take().unwrap()), &mut line).unwrap();
        let below: u32 = line.trim().parse().unwrap();
        lineage::register(upstream.id(), Vec::new(), u64::MAX - 7);
        let refused = upstream_tree(below);
        lineage::unregister(upstream.id());
        assert!(refused.as_deref().is_some_and(|why| why.contains("descends from upstream process")), "{refused:?}");
        hangar_guardian::proctree::signal(below, nix::sys::signal::Signal::SIGKILL);
        let _ = upstream.kill();
        let _ = upstream.wait();
    }
}
