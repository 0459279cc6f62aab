//! Upstream limits in cgroup v1 groups, where the `memory` and `pids` v1 hierarchies are mounted
//! writable (a hybrid-mode host whose cgroup v2 offers no delegated controllers).
//!
//! Each limited upstream gets a group of its own in each hierarchy, below the supervisor's own
//! group there: `<memory mount>/<own path>/hangar-upstream-<owner>-<n>` with
//! `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`, so swap is no way out, where the
//! kernel accounts it), and `<pids mount>/<own path>/hangar-upstream-<owner>-<n>` with
//! `pids.max`; `<owner>` is the supervisor's pid and start time. The child joins both between
//! fork and exec (`spawn.rs`, through `tasks`), like a cgroup v2; every pid in them is killed on
//! stop and the groups removed once empty (`cgroup::kill_and_remove`). The pids group is also the
//! kernel's fence around the upstream's descendants: nothing it forks leaves it.
//!
//! A supervisor SIGKILLed together with both its guardians leaves its groups behind. At start
//! ([`remove_stale`]) a supervisor removes the empty groups, in its own group of each hierarchy,
//! whose owner no longer runs (that pid is gone, a zombie, or started at another time): never a
//! group of a hangar still running (an empty one may be about to be joined), nor one still
//! holding a process (cgroupfs refuses to remove it), nor one named otherwise.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::cgroup::{write_existing, write_if_present};
use crate::proctree;

/// The supervisor's own groups in the writable v1 hierarchies, where upstream groups are created.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hierarchies {
    pub memory: Option<PathBuf>,
    pub pids: Option<PathBuf>,
}

static HIERARCHIES: OnceLock<Hierarchies> = OnceLock::new();
static NEXT: AtomicU64 = AtomicU64::new(1);

/// The writable v1 hierarchies, found once (at the first spawn that needs them).
pub fn hierarchies() -> &'static Hierarchies {
    HIERARCHIES.get_or_init(|| {
        let found = find().unwrap_or_default();
        tracing::info!(memory = ?found.memory, pids = ?found.pids, "cgroup v1 hierarchies usable for upstream limits");
        found
    })
}

/// The supervisor's own group in each v1 hierarchy, kept if a group can be created in it.
fn find() -> Option<Hierarchies> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let usable = |controller| own_group(controller, &cgroups, &mountinfo).filter(|dir| can_create_in(dir));
    Some(Hierarchies { memory: usable("memory"), pids: usable("pids") })
}

/// The memory and pids groups a process is in (what its upstream's groups are compared with).
pub fn groups_of(pid: u32) -> Vec<PathBuf> {
    let Ok(cgroups) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else { return Vec::new() };
    let Ok(mountinfo) = std::fs::read_to_string("/proc/self/mountinfo") else { return Vec::new() };
    ["memory", "pids"].iter().filter_map(|controller| own_group(controller, &cgroups, &mountinfo)).collect()
}

/// Whether a group can be created (and removed) in `dir`.
fn can_create_in(dir: &Path) -> bool {
    let probe = dir.join(format!("hangar-probe-{}", std::process::id()));
    std::fs::create_dir(&probe).and_then(|()| std::fs::remove_dir(&probe)).is_ok()
}

/// `<mount>/<path>` of the process's group in the v1 hierarchy of `controller`, from
/// `/proc/self/cgroup` (`4:memory:/a/b`) and `/proc/self/mountinfo` (a `cgroup` file system whose
/// super options name the controller).
fn own_group(controller: &str, cgroups: &str, mountinfo: &str) -> Option<PathBuf> {
    let path = cgroups.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        controllers.split(',').any(|c| c == controller).then_some(path)
    })?;
    let (root, mount) = mountinfo.lines().find_map(|line| {
        let (fields, fs) = line.split_once(" - ")?;
        let mut fs = fs.split_whitespace();
        if fs.next()? != "cgroup" {
            return None;
        }
        let options = fs.nth(1)?;
        if !options.split(',').any(|option| option == controller) {
            return None;
        }
        let fields: Vec<&str> = fields.split_whitespace().collect();
        Some((*fields.get(3)?, *fields.get(4)?))
    })?;
    let relative = path.strip_prefix(root).unwrap_or(path).trim_start_matches('/');
    Some(Path::new(mount).join(relative))
}

/// Creates one upstream's memory group (if `memory_bytes`) and pids group, limited; removes what it
/// made if any step fails. An error too when a hierarchy it needs is not usable.
pub fn create(memory_bytes: Option<u64>, max_pids: Option<u64>) -> io::Result<Vec<PathBuf>> {
    let found = hierarchies();
    let mut made = Vec::new();
    let result = (|| {
        if let Some(bytes) = memory_bytes {
            let dir = new_group(found.memory.as_deref(), "memory")?;
            made.push(dir.clone());
            limit_memory(&dir, bytes)?;
        }
        let dir = new_group(found.pids.as_deref(), "pids")?;
        made.push(dir.clone());
        if let Some(pids) = max_pids {
            write_existing(&dir.join("pids.max"), &pids.to_string())?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok(made),
        Err(err) => {
            for dir in &made {
                let _ = std::fs::remove_dir(dir);
            }
            Err(err)
        }
    }
}

/// What every upstream group's name starts with.
const GROUP_PREFIX: &str = "hangar-upstream-";

/// `<pid>-<start time>-` of this supervisor: whose a group is, in its name.
fn owner() -> &'static str {
    static OWNER: OnceLock<String> = OnceLock::new();
    OWNER.get_or_init(|| proctree::marker_prefix(std::process::id()))
}

/// A fresh group in `base`, named for this supervisor and numbered past any already there.
fn new_group(base: Option<&Path>, hierarchy: &str) -> io::Result<PathBuf> {
    let Some(base) = base else {
        return Err(io::Error::other(format!("the cgroup v1 {hierarchy} hierarchy is not writable")));
    };
    loop {
        let dir = base.join(format!("{GROUP_PREFIX}{}{}", owner(), NEXT.fetch_add(1, Ordering::Relaxed)));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
            Err(err) => return Err(err),
        }
    }
}

/// Removes the empty groups that supervisors no longer running left in this supervisor's own
/// group of the memory and pids hierarchies (see the module's notes), at start.
pub fn remove_stale() {
    let (Ok(cgroups), Ok(mountinfo)) =
        (std::fs::read_to_string("/proc/self/cgroup"), std::fs::read_to_string("/proc/self/mountinfo"))
    else {
        return;
    };
    // A zombie no longer runs: its parent has only not reaped it yet.
    let still_running =
        |pid: u32, start: u64| proctree::read(pid).is_some_and(|stat| stat.start == start && stat.is_live());
    for controller in ["memory", "pids"] {
        if let Some(base) = own_group(controller, &cgroups, &mountinfo) {
            let removed = remove_stale_in(&base, still_running);
            if !removed.is_empty() {
                tracing::info!(cgroup = %base.display(), removed = removed.len(), "removed the empty cgroup v1 groups of hangars no longer running");
            }
        }
    }
}

/// The groups in `base` whose owner is not `running`, removed if empty; those removed.
fn remove_stale_in(base: &Path, running: impl Fn(u32, u64) -> bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(base) else { return Vec::new() };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((pid, start)) = name.to_str().and_then(owner_of) else { continue };
        if running(pid, start) || !entry.file_type().is_ok_and(|kind| kind.is_dir()) {
            continue;
        }
        let dir = entry.path();
        match std::fs::remove_dir(&dir) {
            Ok(()) => removed.push(dir),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            // A process still in it (EBUSY; ENOTEMPTY off cgroupfs): left alone.
            Err(err) if matches!(err.raw_os_error(), Some(libc::EBUSY | libc::ENOTEMPTY)) => {
                tracing::warn!(cgroup = %dir.display(), "a stopped hangar's cgroup v1 group still holds a process: left alone");
            }
            Err(err) => {
                tracing::warn!(cgroup = %dir.display(), %err, "cannot remove a stopped hangar's cgroup v1 group")
            }
        }
    }
    removed
}

/// The owner (supervisor pid and start time) a group's name gives, if it is an upstream group
/// named as [`new_group`] names them.
fn owner_of(name: &str) -> Option<(u32, u64)> {
    let mut parts = name.strip_prefix(GROUP_PREFIX)?.split('-');
    let (pid, start, number) = (parts.next()?.parse().ok()?, parts.next()?.parse().ok()?, parts.next()?);
    (parts.next().is_none() && number.parse::<u64>().is_ok()).then_some((pid, start))
}

/// `memory.limit_in_bytes`, then the same for memory plus swap: v1 refuses a memsw limit below
/// the memory limit, so the order matters.
fn limit_memory(dir: &Path, bytes: u64) -> io::Result<()> {
    write_existing(&dir.join("memory.limit_in_bytes"), &bytes.to_string())?;
    write_if_present(&dir.join("memory.memsw.limit_in_bytes"), &bytes.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CGROUPS: &str = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n3:cpu,cpuacct:/x\n0::/\n";
    const MOUNTINFO: &str = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
        32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n\
        35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
        39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n\
        40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n\
        41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

    #[test]
    fn finds_the_own_group_in_each_v1_hierarchy() {
        assert_eq!(own_group("memory", CGROUPS, MOUNTINFO), Some("/sys/fs/cgroup/memory/process_api/abc".into()));
        assert_eq!(own_group("pids", CGROUPS, MOUNTINFO), Some("/sys/fs/cgroup/pids".into()));
        assert_eq!(own_group("cpu", CGROUPS, MOUNTINFO), Some("/sys/fs/cgroup/cpu,cpuacct/x".into()));
        // Not mounted, or not in /proc/self/cgroup: none.
        assert_eq!(own_group("blkio", CGROUPS, MOUNTINFO), None);
        assert_eq!(own_group("memory", "0::/\n", MOUNTINFO), None);
        // A mount of a sub-group (a container's view): its root is stripped from the path.
        let nested = "35 31 0:32 /process_api /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        assert_eq!(own_group("memory", CGROUPS, nested), Some("/sys/fs/cgroup/memory/abc".into()));
    }

    /// A directory laid out like a v1 memory group (cgroupfs files exist before any write).
    fn fake_memory_group(memsw: bool) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("memory.limit_in_bytes"), "9223372036854771712").unwrap();
        if memsw {
            std::fs::write(dir.path().join("memory.memsw.limit_in_bytes"), "9223372036854771712").unwrap();
        }
        dir
    }

    #[test]
    fn memory_is_limited_with_swap_where_the_kernel_accounts_it() {
        let read = |dir: &tempfile::TempDir, file: &str| std::fs::read_to_string(dir.path().join(file)).unwrap();
        let with_swap = fake_memory_group(true);
        limit_memory(with_swap.path(), 256 << 20).unwrap();
        assert_eq!(read(&with_swap, "memory.limit_in_bytes"), "268435456");
        assert_eq!(read(&with_swap, "memory.memsw.limit_in_bytes"), "268435456");
        let without = fake_memory_group(false);
        limit_memory(without.path(), 1 << 20).unwrap();
        assert!(!without.path().join("memory.memsw.limit_in_bytes").exists());
        assert!(limit_memory(Path::new("/nonexistent"), 1).is_err());
    }

    #[test]
    fn a_group_is_numbered_past_those_already_there_and_refused_without_a_hierarchy() {
        let base = tempfile::tempdir().unwrap();
        let first = new_group(Some(base.path()), "pids").unwrap();
        let taken = base.path().join(format!("{GROUP_PREFIX}{}{}", owner(), NEXT.load(Ordering::Relaxed)));
        std::fs::create_dir(&taken).unwrap();
        let second = new_group(Some(base.path()), "pids").unwrap();
        assert_ne!(first, second);
        assert_ne!(second, taken);
        let own = (std::process::id(), proctree::read(std::process::id()).unwrap().start);
        assert_eq!(second.file_name().and_then(|name| owner_of(name.to_str()?)), Some(own), "named for its owner");
        let refused = new_group(None, "pids").unwrap_err();
        assert!(refused.to_string().contains("pids hierarchy is not writable"), "{refused}");
    }

    #[test]
    fn only_the_empty_groups_of_supervisors_no_longer_running_are_removed() {
        let base = tempfile::tempdir().unwrap();
        let dir = |name: &str| base.path().join(name);
        for name in [
            "hangar-upstream-100-5000-1", // a stopped hangar's, empty: removed
            "hangar-upstream-100-5000-2", // the same, still holding a process: left
            "hangar-upstream-200-7000-1", // a running hangar's, empty: left
            "hangar-upstream-3",          // named before owners were: whose is unknown, left
            "hangar-upstream-100-5000-x", // not an upstream group's name: left
            "other",                      // not the hangar's: left
        ] {
            std::fs::create_dir(dir(name)).unwrap();
        }
        // A plain directory stands in for a populated group (cgroupfs answers EBUSY, here ENOTEMPTY).
        std::fs::write(dir("hangar-upstream-100-5000-2").join("cgroup.procs"), "42\n").unwrap();
        // Pid 100 runs again, but started at another time: a different process.
        let running = |pid, start| (pid, start) == (200, 7000);
        assert_eq!(remove_stale_in(base.path(), running), [dir("hangar-upstream-100-5000-1")]);
        for left in [
            "hangar-upstream-100-5000-2",
            "hangar-upstream-200-7000-1",
            "hangar-upstream-3",
            "hangar-upstream-100-5000-x",
            "other",
        ] {
            assert!(dir(left).exists(), "{left} is left alone");
        }
        assert!(remove_stale_in(Path::new("/nonexistent"), running).is_empty());
        assert_eq!(owner_of("hangar-upstream-1-2-3-4"), None);
    }
}
