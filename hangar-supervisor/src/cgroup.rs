//! Each upstream in a cgroup v2 of its own, killed whole with `cgroup.kill`, where the
//! supervisor's cgroup is delegated to it (systemd `Delegate=yes`).
//!
//! A process cannot leave its cgroup by regrouping or daemonizing, so `cgroup.kill` takes
//! everything an upstream started, however it hid. The supervisor creates
//! `<its own cgroup>/upstream-<n>` before each spawn; the child joins it between fork and exec
//! (`spawn.rs`), so it never runs a single instruction of the upstream outside it. The supervisor
//! stays in its own cgroup and never enables controllers in it, so cgroup v2's "no internal
//! processes" rule does not apply.
//!
//! `--kill-mode auto` uses cgroups when the supervisor's own cgroup is not the hierarchy's root,
//! has `cgroup.kill` (Linux 5.14) and lets it create a child; otherwise `subreaper`: the
//! process-tree walk of `proctree.rs` (always on as well), with orphans told apart by the
//! environment marker each upstream is started with (`subtree.rs`).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

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
    let _ = BASE.set(base);
    Ok(chosen)
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

/// `<cgroup2 mount>/<path from /proc/self/cgroup's "0::" line>`.
fn own_cgroup() -> Option<PathBuf> {
    cgroup_of("self")
}

/// The cgroup v2 directory a process is in, if it can be read.
pub fn of_process(pid: u32) -> Option<PathBuf> {
    cgroup_of(&pid.to_string())
}

/// `<cgroup2 mount>/<path from /proc/<process>/cgroup's "0::" line>`.
fn cgroup_of(process: &str) -> Option<PathBuf> {
    let cgroups = std::fs::read_to_string(format!("/proc/{process}/cgroup")).ok()?;
    let path = cgroups.lines().find_map(|line| line.strip_prefix("0::"))?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let (root, mount) = cgroup2_mount(&mountinfo)?;
    let relative = path.strip_prefix(root.as_str()).unwrap_or(path).trim_start_matches('/');
    Some(Path::new(&mount).join(relative))
}

/// The root and mount point of the cgroup2 file system in a `/proc/self/mountinfo` text.
fn cgroup2_mount(mountinfo: &str) -> Option<(String, String)> {
    mountinfo.lines().find_map(|line| {
        let (fields, fs) = line.split_once(" - ")?;
        if fs.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let fields: Vec<&str> = fields.split_whitespace().collect();
        Some((unescape(fields.get(3)?), unescape(fields.get(4)?)))
    })
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
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

/// SIGKILLs every process in the cgroup at once.
pub fn kill(dir: &Path) {
    if let Err(err) = std::fs::write(dir.join("cgroup.kill"), "1")
        && err.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!(cgroup = %dir.display(), %err, "cannot kill a cgroup");
    }
}

/// Whether any process is left in the cgroup (or it cannot be read, which counts as empty).
pub fn populated(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.events"))
        .is_ok_and(|events| events.lines().any(|line| line == "populated 1"))
}

/// Kills the cgroup, waits (bounded) until it is empty and removes it.
pub fn kill_and_remove(dir: &Path, limit: Duration) {
    kill(dir);
    let deadline = Instant::now() + limit;
    while populated(dir) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(err) => tracing::warn!(cgroup = %dir.display(), %err, "cannot remove an upstream's cgroup"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cgroup2_mount_in_hybrid_and_unified_layouts() {
        let hybrid = "35 25 0:30 / /sys/fs/cgroup/cpu rw,relatime shared:12 - cgroup cgroup rw,cpu\n\
                      36 25 0:31 / /sys/fs/cgroup/unified rw,relatime shared:13 - cgroup2 cgroup2 rw";
        assert_eq!(cgroup2_mount(hybrid), Some(("/".into(), "/sys/fs/cgroup/unified".into())));
        let unified = "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate";
        assert_eq!(cgroup2_mount(unified), Some(("/".into(), "/sys/fs/cgroup".into())));
        assert_eq!(cgroup2_mount("1 0 0:1 / / rw - ext4 /dev/sda rw"), None);
    }
}
