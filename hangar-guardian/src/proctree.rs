//! The process tree as `/proc` shows it: who is whose child, and killing a whole subtree.
//!
//! An upstream that daemonizes (`setsid`, a double fork, `setpgid(0, 0)`) leaves its process
//! group, so signalling the group misses it. Its parent links do not lie, though: whatever it
//! started and still parents, however regrouped, is below it, and [`kill_tree`] finds it by
//! following `ppid` links down from its pid. What it orphans is reparented to the supervisor (the
//! subreaper), which tells whose it is by its cgroup or by the environment marker every upstream
//! is started with ([`MARKER`], read by [`marker_of`]).

use std::collections::{BTreeMap, BTreeSet};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The fields of `/proc/<pid>/stat` the hangar needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub pid: u32,
    /// `R`, `S`, `D`, `T`, `Z`, ...
    pub state: char,
    pub ppid: u32,
    pub pgrp: u32,
    /// Clock ticks after boot: with the pid, names one process even after the pid is reused.
    pub start: u64,
    /// Clock ticks it has run, in user and kernel mode (`utime` + `stime`).
    pub cpu_ticks: u64,
}

impl Stat {
    /// Whether it still runs code (a zombie only waits to be reaped).
    pub fn is_live(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Parses one `/proc/<pid>/stat` line. The command name sits in parentheses and may hold spaces
/// and parentheses itself, so the fields are read after its *last* `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let (head, tail) = text.rsplit_once(')')?;
    let pid = head.split_once(" (").map_or(head, |(pid, _)| pid).trim().parse().ok()?;
    let fields: Vec<&str> = tail.split_whitespace().collect();
    // After the name: state(3) ppid(4) pgrp(5) session(6) ... utime(14) stime(15) ...
    // starttime(22), numbered from 1.
    let state = fields.first()?.chars().next()?;
    let ppid = fields.get(1)?.parse().ok()?;
    let pgrp = fields.get(2)?.parse().ok()?;
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some(Stat { pid, state, ppid, pgrp, start, cpu_ticks: utime + stime })
}

/// One process's stat, if it exists.
pub fn read(pid: u32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Every process visible now. A process that ends while this reads is simply left out.
pub fn snapshot() -> Vec<Stat> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok()).filter_map(read).collect()
}

/// The children of process `pid` (of each of its threads: an orphan is handed to any live thread
/// of its subreaper), from `/proc/<pid>/task/<tid>/children`: a few small reads instead of a
/// walk of all of `/proc`. The kernel builds each list as it is read, so a child may be missed
/// while others come and go; the next read finds it. None when the process is gone or the
/// kernel keeps no such lists (built without `CONFIG_PROC_CHILDREN`).
pub fn children_of(pid: u32) -> Option<BTreeSet<u32>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut children = BTreeSet::new();
    let mut listed = false;
    for task in tasks.flatten() {
        // A thread that exited meanwhile has no list any more.
        let Ok(text) = std::fs::read_to_string(task.path().join("children")) else { continue };
        listed = true;
        children.extend(text.split_whitespace().filter_map(|child| child.parse::<u32>().ok()));
    }
    listed.then_some(children)
}

/// Every live process below `root` by parent links, found through the kernel's lists of
/// children ([`children_of`]): reads in proportion to the subtree, not to all of `/proc`. Unlike
/// [`subtree`] it leaves out members of `root`'s group reparented away from it, which below a
/// running subreaper (the supervisor) are that subreaper's children.
pub fn below_listed(root: u32) -> Vec<Stat> {
    let mut found: BTreeMap<u32, Stat> = BTreeMap::new();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        for child in children_of(pid).into_iter().flatten() {
            if found.contains_key(&child) || child == root {
                continue;
            }
            // Read after the list: a child that died meanwhile is left out.
            if let Some(stat) = read(child).filter(|stat| stat.ppid == pid && stat.is_live()) {
                found.insert(child, stat);
                todo.push(child);
            }
        }
    }
    found.into_values().collect()
}

/// Who is whose child in one [`snapshot`], for finding the subtrees of many roots in it.
pub struct Tree {
    children: BTreeMap<u32, Vec<u32>>,
    /// The members of each process group, by its leader's pid.
    groups: BTreeMap<u32, Vec<u32>>,
    live: BTreeSet<u32>,
}

impl Tree {
    pub fn new(procs: &[Stat]) -> Tree {
        let (mut children, mut groups): (BTreeMap<u32, Vec<u32>>, BTreeMap<u32, Vec<u32>>) = Default::default();
        for p in procs {
            children.entry(p.ppid).or_default().push(p.pid);
            groups.entry(p.pgrp).or_default().push(p.pid);
        }
        let live = procs.iter().filter(|p| p.is_live()).map(|p| p.pid).collect();
        Tree { children, groups, live }
    }

    /// The live processes at or below `root` by parent links, and the live members of the
    /// process group `root` leads (which may have been reparented away from it).
    pub fn subtree(&self, root: u32) -> BTreeSet<u32> {
        if root <= 1 {
            return BTreeSet::new();
        }
        let mut found = BTreeSet::new();
        let mut todo = vec![root];
        while let Some(pid) = todo.pop() {
            if found.insert(pid) {
                todo.extend(self.children.get(&pid).into_iter().flatten().copied());
            }
        }
        found.extend(self.groups.get(&root).into_iter().flatten().copied());
        found.retain(|pid| self.live.contains(pid));
        found
    }
}

/// The live processes at or below `root` by parent links, and the live members of the process
/// group `root` leads (which may have been reparented away from it).
pub fn subtree(root: u32, procs: &[Stat]) -> BTreeSet<u32> {
    Tree::new(procs).subtree(root)
}

/// The environment variable naming the upstream instance a process descends from
/// (`<supervisor pid>-<supervisor start>-<spawn number>`), inherited by everything it starts.
pub const MARKER: &str = "HANGAR_UPSTREAM";

/// Longest `/proc/<pid>/environ` read when looking for [`MARKER`] (the kernel caps an exec's
/// arguments and environment together at a quarter of the stack limit, 2 MiB by default).
const MAX_ENVIRON: u64 = 4 * 1024 * 1024;

/// The [`MARKER`] value a process was exec'd with, if it can be read and has one.
pub fn marker_of(pid: u32) -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(format!("/proc/{pid}/environ")).ok()?;
    let mut environ = Vec::new();
    file.take(MAX_ENVIRON).read_to_end(&mut environ).ok()?;
    let wanted = format!("{MARKER}=");
    environ
        .split(|byte| *byte == 0)
        .find_map(|entry| entry.strip_prefix(wanted.as_bytes()))
        .and_then(|value| String::from_utf8(value.to_vec()).ok())
}

/// One process for good: its pid and its start time, so a pid handed out again later names
/// someone else. Written `PID:START`, as the supervisor passes itself to its guardians.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pinned {
    pub pid: u32,
    pub start: u64,
}

impl Pinned {
    /// This process.
    pub fn own() -> Option<Pinned> {
        read(std::process::id()).map(|stat| Pinned { pid: stat.pid, start: stat.start })
    }

    /// Reads `PID:START`.
    pub fn parse(text: &str) -> Option<Pinned> {
        let (pid, start) = text.split_once(':')?;
        Some(Pinned { pid: pid.parse().ok()?, start: start.parse().ok()? })
    }

    /// Whether that very process still runs (not a zombie, not another under its pid).
    pub fn is_running(&self) -> bool {
        read(self.pid).is_some_and(|stat| self.is(&stat))
    }

    /// Whether `stat` is that very process, still running.
    pub fn is(&self, stat: &Stat) -> bool {
        stat.pid == self.pid && stat.start == self.start && stat.is_live()
    }

    /// The start of every [`MARKER`] value this process gives out as a supervisor.
    pub fn marker_prefix(&self) -> String {
        format!("{}-{}-", self.pid, self.start)
    }
}

impl std::fmt::Display for Pinned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.pid, self.start)
    }
}

/// The most rounds [`kill_tree`] freezes new arrivals before it kills what it has anyway.
const MAX_ROUNDS: usize = 50;

/// SIGKILLs `root`, everything below it and its process group, so that nothing can fork its
/// way out in between: every member found is first stopped (SIGSTOP), the tree is walked again
/// until a walk finds nobody new (a stopped process cannot fork), and only then is everything
/// SIGKILLed. With `expected_start`, nothing is done unless `root` is still that very process
/// (its pid may have been reused). Returns how many processes were killed.
pub fn kill_tree(root: u32, expected_start: Option<u64>) -> usize {
    if root <= 1 || root == std::process::id() {
        return 0;
    }
    if let Some(start) = expected_start
        && read(root).is_some_and(|stat| stat.start != start)
    {
        return 0;
    }
    let mut frozen = BTreeSet::new();
    for _ in 0..MAX_ROUNDS {
        let members = subtree(root, &snapshot());
        let new: Vec<u32> = members.difference(&frozen).copied().collect();
        if new.is_empty() {
            break;
        }
        for pid in new {
            signal(pid, Signal::SIGSTOP);
            frozen.insert(pid);
        }
    }
    for pid in &frozen {
        signal(*pid, Signal::SIGKILL);
    }
    frozen.len()
}

/// Signals one process; one that is already gone is fine.
pub fn signal(pid: u32, signal: Signal) {
    let Ok(raw) = i32::try_from(pid) else { return };
    if raw <= 1 || pid == std::process::id() {
        return;
    }
    let _ = kill(Pid::from_raw(raw), signal);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(pid: u32, ppid: u32, pgrp: u32, state: char) -> Stat {
        Stat { pid, state, ppid, pgrp, start: 0, cpu_ticks: 0 }
    }

    #[test]
    fn parses_a_name_with_spaces_and_parentheses() {
        let line = "4242 (we (ird) name) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 200";
        let parsed = parse_stat(line).unwrap();
        assert_eq!(parsed, Stat { pid: 4242, state: 'S', ppid: 17, pgrp: 4242, start: 98765, cpu_ticks: 3 });
        assert!(parse_stat("12 (short) S 1").is_none(), "a truncated line is refused, not misread");
        assert!(parse_stat("").is_none());
    }

    #[test]
    fn reads_itself() {
        let me = read(std::process::id()).unwrap();
        assert_eq!(me.pid, std::process::id());
        assert!(me.is_live() && me.start > 0);
    }

    #[test]
    fn the_subtree_follows_parent_links_and_the_group_but_not_zombies() {
        let procs = [
            stat(10, 1, 10, 'S'),  // the upstream
            stat(11, 10, 11, 'S'), // setsid: its own group, still its child
            stat(12, 11, 12, 'S'), // below that
            stat(13, 1, 10, 'S'),  // in its group, reparented away
            stat(14, 10, 10, 'Z'), // a zombie
            stat(20, 1, 20, 'S'),  // a stranger
            stat(21, 20, 20, 'S'),
        ];
        assert_eq!(subtree(10, &procs).into_iter().collect::<Vec<_>>(), [10, 11, 12, 13]);
        assert!(subtree(99, &procs).is_empty());
        let tree = Tree::new(&procs);
        assert_eq!(tree.subtree(20).into_iter().collect::<Vec<_>>(), [20, 21]);
    }

    #[test]
    fn the_lists_of_children_show_a_real_subtree() {
        // A shell whose child is a sleep: both below this process.
        let mut shell = std::process::Command::new("/bin/sh").args(["-c", "sleep 10 & wait"]).spawn().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut below_shell = below_listed(shell.id());
        while below_shell.is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            below_shell = below_listed(shell.id());
        }
        let below_us = below_listed(std::process::id());
        for stat in &below_shell {
            signal(stat.pid, Signal::SIGKILL);
        }
        let _ = shell.kill();
        let _ = shell.wait();
        assert!(below_shell.iter().any(|stat| stat.ppid == shell.id()), "{below_shell:?} lacks the shell's child");
        for stat in &below_shell {
            assert!(below_us.iter().any(|below| below.pid == stat.pid), "{below_us:?} lacks {stat:?}");
        }
    }

    #[test]
    fn reads_a_marker_from_the_environment_a_process_was_started_with() {
        let mut child = std::process::Command::new("/bin/sleep").arg("10").env(MARKER, "1-2-3").spawn().unwrap();
        // Until its exec is done, the environment is not in place yet.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut marker = marker_of(child.id());
        while marker.is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
            marker = marker_of(child.id());
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(marker.as_deref(), Some("1-2-3"));
    }
}
