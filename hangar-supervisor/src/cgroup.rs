//! Each upstream in a cgroup v2 of its own, killed whole with `cgroup.kill`, where the
//! supervisor's cgroup is delegated to it (systemd `Delegate=yes`).
//!
//! A process cannot leave its cgroup by regrouping or daemonizing, so `cgroup.kill` takes
//! everything an upstream started, however it hid. The supervisor creates
//! `<its own cgroup>/upstream-<n>` before each spawn; the child joins it between fork and exec
//! (`spawn.rs`), so it never runs a single instruction of the upstream outside it.
//!
//! The same cgroups hold an upstream's memory and process limits (`memory.max`, `pids.max`, set by
//! `kernel_limits.rs`) where the delegated cgroup offers the `memory` and `pids` controllers.
//! cgroup v2 lets a cgroup enable controllers for its children only while no process sits in it
//! ("no internal processes"), so at start the supervisor moves itself (threads and all) into the
//! leaf `<its cgroup>/supervisor`, before any child runs, then enables them in
//! `<its cgroup>/cgroup.subtree_control`; whatever it cannot enable is left off (kill mode needs
//! none) and the limits fall back (`kernel_limits.rs`).
//!
//! Upstreams in cgroup v1 groups (the fallback for limits, `cgroup_v1.rs`) are killed here too:
//! v1 has no `cgroup.kill`, so every process its `cgroup.procs` lists is SIGKILLed, through a
//! pidfd checked against the list again (no pid-reuse window), until it is empty (the killing is
//! `hangar_guardian::cgroup`'s, shared with the guardians). A child joins a v1 group through
//! `tasks`, a v2 one through `cgroup.procs` ([`join_file`]).
//!
//! `--kill-mode auto` uses cgroups when the supervisor's own cgroup is not the hierarchy's root,
//! has `cgroup.kill` (Linux 5.14) and lets it create a child; otherwise `subreaper`: the
//! process-tree walk of `proctree.rs` (always on as well), with orphans told apart by the
//! environment marker each upstream is started with (`subtree.rs`).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hangar_guardian::cgroup::Hierarchy;

/// How the hangar kills an upstream's whole subtree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum KillMode {
    /// A cgroup per upstream where the supervisor's cgroup is delegated, else `subreaper`.
    Auto,
    /// A cgroup per upstream, killed with `cgroup.kill`; refuse to start without one.
    Cgroup,
    /// No cgroups: the supervisor as subreaper, environment markers and walks of the process tree.
    Subreaper,
}

/// The directory upstream cgroups are created in, once chosen.
static BASE: OnceLock<Option<PathBuf>> = OnceLock::new();
static NEXT: AtomicU64 = AtomicU64::new(1);

/// Chooses how subtrees are killed, once, at start. `Err` says why `cgroup` cannot be had.
pub fn init(mode: KillMode) -> Result<&'static str, String> {
    let base = match mode {
        KillMode::Subreaper => None,
        KillMode::Auto => usable().ok(),
        KillMode::Cgroup => Some(usable()?),
    };
    let chosen = if base.is_some() { "cgroup" } else { "subreaper" };
    let controllers = base.as_deref().map(|base| enable_limits(base, std::process::id())).unwrap_or_default();
    let _ = CONTROLLERS.set(controllers);
    let _ = BASE.set(base);
    Ok(chosen)
}

/// The controllers enabled for the upstreams' cgroups v2, for their limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Controllers {
    pub memory: bool,
    pub pids: bool,
}

static CONTROLLERS: OnceLock<Controllers> = OnceLock::new();

/// The name of the leaf the supervisor moves itself into, beside its upstreams' cgroups.
pub const SUPERVISOR_LEAF: &str = "supervisor";

/// What the upstreams' cgroups v2 can limit (nothing unless cgroups are in use).
pub fn controllers() -> Controllers {
    CONTROLLERS.get().copied().unwrap_or_default()
}

/// Enables `memory` and `pids` for the cgroups created in `base`, moving the supervisor (`pid`)
/// into `base/supervisor` first; what cannot be had is logged and left off.
fn enable_limits(base: &Path, pid: u32) -> Controllers {
    match enable_controllers(base, pid) {
        Ok(enabled) => {
            tracing::info!(cgroup = %base.display(), memory = enabled.memory, pids = enabled.pids, "cgroup v2 controllers for upstream limits");
            enabled
        }
        Err(err) => {
            tracing::warn!(cgroup = %base.display(), %err, "cannot enable the memory and pids controllers for upstream cgroups: limits fall back to cgroup v1 or rlimits");
            Controllers::default()
        }
    }
}

/// The file work of [`enable_limits`], on any directory laid out like cgroupfs (unit-tested).
fn enable_controllers(base: &Path, pid: u32) -> io::Result<Controllers> {
    let available = std::fs::read_to_string(base.join("cgroup.controllers"))?;
    let offered = |name: &str| available.split_whitespace().any(|c| c == name);
    let wanted = Controllers { memory: offered("memory"), pids: offered("pids") };
    if wanted == Controllers::default() {
        return Ok(wanted);
    }
    let leaf = base.join(SUPERVISOR_LEAF);
    match std::fs::create_dir(&leaf) {
        Err(err) if err.kind() != io::ErrorKind::AlreadyExists => return Err(err),
        _ => {}
    }
    write_existing(&leaf.join("cgroup.procs"), &pid.to_string())?;
    let enable: Vec<&str> = [(wanted.memory, "+memory"), (wanted.pids, "+pids")]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect();
    if let Err(err) = write_existing(&base.join("cgroup.subtree_control"), &enable.join(" ")) {
        // Another process in `base` (EBUSY): back where it was, as if nothing had been tried.
        let _ = write_existing(&base.join("cgroup.procs"), &pid.to_string());
        let _ = std::fs::remove_dir(&leaf);
        return Err(err);
    }
    Ok(wanted)
}

/// Limits one upstream's cgroup v2: `memory.max` and no swap (`memory.swap.max` 0, where the
/// kernel accounts swap), `pids.max` (threads count). A file missing means its controller is not
/// enabled: an error, never a silently weaker limit.
pub fn limit(dir: &Path, memory_bytes: Option<u64>, max_pids: Option<u64>) -> io::Result<()> {
    if let Some(bytes) = memory_bytes {
        write_existing(&dir.join("memory.max"), &bytes.to_string())?;
        write_if_present(&dir.join("memory.swap.max"), "0")?;
    }
    if let Some(pids) = max_pids {
        write_existing(&dir.join("pids.max"), &pids.to_string())?;
    }
    Ok(())
}

/// How many processes of a group (v2 or v1) the OOM killer has killed: `memory.events` (v2) or
/// `memory.oom_control` (v1), both `oom_kill N`; 0 when neither can be read.
pub fn oom_kills(dir: &Path) -> u64 {
    ["memory.events", "memory.oom_control"]
        .iter()
        .find_map(|file| std::fs::read_to_string(dir.join(file)).ok())
        .map_or(0, |text| oom_kill_count(&text))
}

/// The `oom_kill N` line of a `memory.events` or `memory.oom_control` text.
fn oom_kill_count(text: &str) -> u64 {
    text.lines().find_map(|line| line.strip_prefix("oom_kill ")?.trim().parse().ok()).unwrap_or(0)
}

/// Writes a cgroupfs file that must already exist (cgroupfs creates none on write).
pub fn write_existing(path: &Path, value: &str) -> io::Result<()> {
    use std::io::Write;
    // Truncating, as a shell's `>` does (cgroupfs ignores it; a plain file in a test needs it).
    let mut file = std::fs::OpenOptions::new().write(true).truncate(true).open(path)?;
    file.write_all(value.as_bytes()).map_err(|err| io::Error::new(err.kind(), format!("{}: {err}", path.display())))
}

/// Writes a cgroupfs file if the kernel offers it.
pub fn write_if_present(path: &Path, value: &str) -> io::Result<()> {
    match write_existing(path, value) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        done => done,
    }
}

/// The supervisor's own cgroup directory, if it can hold the upstreams' cgroups.
fn usable() -> Result<PathBuf, String> {
    let own = own_cgroup().ok_or("the supervisor is in no cgroup v2 (is a cgroup2 file system mounted?)")?;
    if !own.join("cgroup.kill").exists() {
        return Err(format!(
            "{} has no cgroup.kill: it is the root of the hierarchy (not delegated) or the kernel is older than 5.14",
            own.display()
        ));
    }
    // The supervisor stays in its own cgroup, which cgroup v2 allows beside child cgroups only
    // while no controller is enabled for them.
    let controllers = std::fs::read_to_string(own.join("cgroup.subtree_control")).unwrap_or_default();
    if !controllers.trim().is_empty() {
        return Err(format!(
            "{} enables controllers ({}) for its children, so the supervisor in it cannot have any",
            own.display(),
            controllers.trim()
        ));
    }
    let probe = own.join(format!("hangar-probe-{}", std::process::id()));
    std::fs::create_dir(&probe)
        .and_then(|()| std::fs::remove_dir(&probe))
        .map_err(|err| format!("cannot create a cgroup in {}: {err}", own.display()))?;
    Ok(own)
}

/// The supervisor's own cgroup v2 directory.
fn own_cgroup() -> Option<PathBuf> {
    Hierarchy::read()?.of("self")
}

/// The cgroup v2 directory a process is in, if it can be read.
pub fn of_process(pid: u32) -> Option<PathBuf> {
    Hierarchy::read()?.of(&pid.to_string())
}

/// Whether upstreams run in cgroups of their own (`cgroup` mode was chosen).
pub fn in_use() -> bool {
    matches!(BASE.get(), Some(Some(_)))
}

/// Creates a fresh, empty cgroup for one upstream, if cgroups are in use.
pub fn create() -> io::Result<Option<PathBuf>> {
    let Some(Some(base)) = BASE.get() else { return Ok(None) };
    loop {
        let dir = base.join(format!("upstream-{}", NEXT.fetch_add(1, Ordering::Relaxed)));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(Some(dir)),
            // Left by an earlier supervisor in the same cgroup: take the next number.
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
            Err(err) => return Err(err),
        }
    }
}

/// SIGKILLs every process in the cgroup (`hangar_guardian::cgroup::kill`); a failure is logged.
pub fn kill(dir: &Path) {
    if let Err(err) = hangar_guardian::cgroup::kill(dir) {
        tracing::warn!(cgroup = %dir.display(), %err, "cannot kill a cgroup");
    }
}

/// Kills the cgroup until it is empty (bounded) and removes it; a failure is logged.
pub fn kill_and_remove(dir: &Path, limit: Duration) {
    if let Err(err) = hangar_guardian::cgroup::kill_and_remove(dir, limit) {
        tracing::warn!(cgroup = %dir.display(), %err, "cannot empty and remove an upstream's cgroup");
    }
}

/// The file a child joins group `dir` through, writing "0" between fork and exec (`spawn.rs`).
///
/// Writing a process to `cgroup.procs` takes the kernel's global `cgroup_threadgroup_rwsem` for
/// writing, which waits for an RCU grace period (~10 ms on an idle machine); a single thread moving
/// itself takes no global lock (`cgroup_procs_write_start`). v1 has such a file, `tasks`; v2 lets
/// one thread move alone only in threaded cgroups, so a v2 group is joined through `cgroup.procs`
/// (`clone3(CLONE_INTO_CGROUP)` would spare it the grace period too).
pub fn join_file(dir: &Path) -> PathBuf {
    let tasks = dir.join("tasks");
    if tasks.exists() { tasks } else { dir.join("cgroup.procs") }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory laid out like a delegated cgroup v2 (cgroupfs files exist before any write).
    fn fake_cgroup(controllers: &str) -> tempfile::TempDir {
        let base = tempfile::tempdir().unwrap();
        std::fs::write(base.path().join("cgroup.controllers"), controllers).unwrap();
        std::fs::write(base.path().join("cgroup.subtree_control"), "").unwrap();
        std::fs::create_dir(base.path().join(SUPERVISOR_LEAF)).unwrap();
        std::fs::write(base.path().join(SUPERVISOR_LEAF).join("cgroup.procs"), "").unwrap();
        base
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn the_supervisor_moves_into_its_leaf_before_enabling_memory_and_pids() {
        let base = fake_cgroup("cpuset cpu io memory hugetlb pids rdma misc\n");
        let enabled = enable_controllers(base.path(), 4242).unwrap();
        assert_eq!(enabled, Controllers { memory: true, pids: true });
        assert_eq!(read(&base.path().join("supervisor/cgroup.procs")), "4242");
        assert_eq!(read(&base.path().join("cgroup.subtree_control")), "+memory +pids");

        let only_pids = fake_cgroup("cpu pids\n");
        assert_eq!(enable_controllers(only_pids.path(), 1).unwrap(), Controllers { memory: false, pids: true });
        assert_eq!(read(&only_pids.path().join("cgroup.subtree_control")), "+pids");

        // Nothing to enable: the supervisor is not moved and nothing is written.
        let none = fake_cgroup("hugetlb\n");
        assert_eq!(enable_controllers(none.path(), 1).unwrap(), Controllers::default());
        assert_eq!(read(&none.path().join("supervisor/cgroup.procs")), "");
        assert_eq!(read(&none.path().join("cgroup.subtree_control")), "");
    }

    #[test]
    fn a_failed_enable_is_an_error_and_the_supervisor_moves_back() {
        let base = fake_cgroup("memory pids\n");
        std::fs::write(base.path().join("cgroup.procs"), "").unwrap();
        std::fs::remove_file(base.path().join("cgroup.subtree_control")).unwrap();
        assert!(enable_controllers(base.path(), 7).is_err());
        assert_eq!(read(&base.path().join("cgroup.procs")), "7", "back in its own cgroup");
        assert!(enable_controllers(Path::new("/nonexistent/cgroup"), 1).is_err());
    }

    #[test]
    fn limits_write_memory_max_no_swap_and_pids_max() {
        let dir = tempfile::tempdir().unwrap();
        for file in ["memory.max", "memory.swap.max", "pids.max"] {
            std::fs::write(dir.path().join(file), "max").unwrap();
        }
        limit(dir.path(), Some(256 << 20), Some(64)).unwrap();
        assert_eq!(read(&dir.path().join("memory.max")), "268435456");
        assert_eq!(read(&dir.path().join("memory.swap.max")), "0");
        assert_eq!(read(&dir.path().join("pids.max")), "64");

        // No swap accounting: memory.swap.max is skipped; a missing pids.max (controller off) is an error.
        let no_swap = tempfile::tempdir().unwrap();
        std::fs::write(no_swap.path().join("memory.max"), "max").unwrap();
        limit(no_swap.path(), Some(1 << 20), None).unwrap();
        assert!(!no_swap.path().join("memory.swap.max").exists(), "cgroupfs files are never created");
        assert!(limit(no_swap.path(), None, Some(8)).is_err());
    }

    #[test]
    fn oom_kills_read_from_memory_events_or_oom_control() {
        let v2 = tempfile::tempdir().unwrap();
        std::fs::write(v2.path().join("memory.events"), "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n")
            .unwrap();
        assert_eq!(oom_kills(v2.path()), 1);
        let v1 = tempfile::tempdir().unwrap();
        std::fs::write(v1.path().join("memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n").unwrap();
        assert_eq!(oom_kills(v1.path()), 3);
        assert_eq!(oom_kills(Path::new("/nonexistent")), 0);
        assert_eq!(oom_kill_count("oom_kill_disable 0\nunder_oom 0\n"), 0);
    }

    #[test]
    fn a_v1_group_is_joined_through_tasks_and_a_v2_group_through_cgroup_procs() {
        let v1 = tempfile::tempdir().unwrap();
        for file in ["cgroup.procs", "tasks"] {
            std::fs::write(v1.path().join(file), "").unwrap();
        }
        assert_eq!(join_file(v1.path()), v1.path().join("tasks"));
        let v2 = tempfile::tempdir().unwrap();
        std::fs::write(v2.path().join("cgroup.procs"), "").unwrap();
        assert_eq!(join_file(v2.path()), v2.path().join("cgroup.procs"));
    }
}
