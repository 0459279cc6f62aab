//! An upstream's memory and process limits (`sandbox.memory_mb`, `sandbox.max_processes`), held
//! by the kernel: each limit by the first of these the host offers.
//!
//! 1. The upstream's own cgroup v2 (`memory.max` with `memory.swap.max` 0, `pids.max`), where the
//!    supervisor's cgroup is delegated with those controllers (`cgroup.rs`).
//! 2. cgroup v1 groups of its own (`memory.limit_in_bytes`, `pids.max`), where those hierarchies
//!    are writable (`cgroup_v1.rs`).
//! 3. `RLIMIT_AS` and `RLIMIT_NPROC` ([`fallback_rlimits`], which `sandbox.rs` adds to the
//!    `Confinement` set between fork and exec in `spawn.rs`): weaker (address
//!    space, not memory; processes per user, not per upstream, and not enforced for root), and
//!    the server's details say so.
//!
//! An upstream the OOM killer killed in its group reads as out of memory ([`ran_out_of_memory`]).

use std::io;
use std::path::PathBuf;

use nix::sys::resource::Resource;

use crate::{cgroup, cgroup_v1, lineage};

/// The limits one upstream is held to; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    pub memory_mb: Option<u64>,
    pub max_processes: Option<u64>,
}

impl From<&hangar_core::sandbox::Sandbox> for Limits {
    fn from(sandbox: &hangar_core::sandbox::Sandbox) -> Limits {
        Limits { memory_mb: sandbox.memory_mb, max_processes: sandbox.max_processes }
    }
}

impl Limits {
    pub fn memory_bytes(&self) -> Option<u64> {
        self.memory_mb.map(|mb| mb.saturating_mul(1 << 20))
    }
}

/// What holds one limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    CgroupV2,
    CgroupV1,
    Rlimit,
}

/// Who holds each limit that is set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Holders {
    pub memory: Option<Holder>,
    pub processes: Option<Holder>,
}

/// What the server's details say of its limits (`SandboxInEffect`'s `enforced` and `fallbacks`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub enforced: Vec<String>,
    pub fallbacks: Vec<String>,
}

/// Each limit set, with what holds it on this host, in the hangar's words.
pub fn report(limits: &Limits) -> Report {
    report_for(limits, holders(limits))
}

fn report_for(limits: &Limits, holders: Holders) -> Report {
    let mut report = Report::default();
    if let (Some(mb), Some(holder)) = (limits.memory_mb, holders.memory) {
        match holder {
            Holder::CgroupV2 => report.enforced.push(format!("memory_mb: {mb} (cgroup v2 memory.max, no swap)")),
            Holder::CgroupV1 => report.enforced.push(format!("memory_mb: {mb} (cgroup v1 memory.limit_in_bytes)")),
            Holder::Rlimit => report.fallbacks.push(format!(
                "memory: rlimit fallback (no delegated cgroup): RLIMIT_AS caps its address space at {mb} MiB, not its memory"
            )),
        }
    }
    if let (Some(max), Some(holder)) = (limits.max_processes, holders.processes) {
        match holder {
            Holder::CgroupV2 => report.enforced.push(format!("max_processes: {max} (cgroup v2 pids.max)")),
            Holder::CgroupV1 => report.enforced.push(format!("max_processes: {max} (cgroup v1 pids.max)")),
            Holder::Rlimit => report.fallbacks.push(format!(
                "processes: rlimit fallback (no delegated cgroup): RLIMIT_NPROC {max} counts all of its user's processes, and root is exempt"
            )),
        }
    }
    report
}

/// What this host holds each of `limits` with (the same for every spawn of one supervisor).
pub fn holders(limits: &Limits) -> Holders {
    if *limits == Limits::default() {
        return Holders::default();
    }
    let v2 = cgroup::controllers();
    let v1 = cgroup_v1::hierarchies();
    let pick = |set: bool, in_v2: bool, in_v1: bool| {
        let holder = match (in_v2, in_v1) {
            (true, _) => Holder::CgroupV2,
            (false, true) => Holder::CgroupV1,
            (false, false) => Holder::Rlimit,
        };
        set.then_some(holder)
    };
    Holders {
        memory: pick(limits.memory_mb.is_some(), v2.memory, v1.memory.is_some()),
        processes: pick(limits.max_processes.is_some(), v2.pids, v1.pids.is_some()),
    }
}

/// The groups one upstream's child joins before exec: its cgroup v2 in `cgroup` kill mode, and
/// any v1 groups holding its limits.
#[derive(Debug, Default)]
pub struct Groups {
    pub dirs: Vec<PathBuf>,
}

/// The rlimits standing in for the limits no cgroup holds on this host (`RLIMIT_AS`,
/// `RLIMIT_NPROC`), for the sandbox's `Confinement` to set between fork and exec.
pub fn fallback_rlimits(limits: &Limits) -> Vec<(Resource, u64)> {
    fallback_for(limits, holders(limits))
}

fn fallback_for(limits: &Limits, holders: Holders) -> Vec<(Resource, u64)> {
    let memory = limits.memory_bytes().filter(|_| holders.memory == Some(Holder::Rlimit));
    let processes = limits.max_processes.filter(|_| holders.processes == Some(Holder::Rlimit));
    let memory = memory.map(|bytes| (Resource::RLIMIT_AS, bytes));
    memory.into_iter().chain(processes.map(|max| (Resource::RLIMIT_NPROC, max))).collect()
}

/// Creates one upstream's groups and limits them; removes what it made if a step fails (the
/// start then fails with the reason: a limit is never silently dropped).
pub fn create(limits: &Limits) -> io::Result<Groups> {
    let holders = holders(limits);
    let mut groups = Groups::default();
    let v2 = cgroup::create()?;
    let by = |holder: Option<Holder>, wanted: Holder, value: Option<u64>| value.filter(|_| holder == Some(wanted));
    let set_up = (|| {
        if let Some(dir) = &v2 {
            groups.dirs.push(dir.clone());
            cgroup::limit(
                dir,
                by(holders.memory, Holder::CgroupV2, limits.memory_bytes()),
                by(holders.processes, Holder::CgroupV2, limits.max_processes),
            )?;
        }
        let v1_memory = by(holders.memory, Holder::CgroupV1, limits.memory_bytes());
        let v1_pids = by(holders.processes, Holder::CgroupV1, limits.max_processes);
        if v1_memory.is_some() || v1_pids.is_some() {
            groups.dirs.extend(cgroup_v1::create(v1_memory, v1_pids)?);
        }
        Ok::<_, io::Error>(())
    })();
    if let Err(err) = set_up {
        for dir in &groups.dirs {
            let _ = std::fs::remove_dir(dir);
        }
        return Err(io::Error::new(err.kind(), format!("cannot set the upstream's memory and process limits: {err}")));
    }
    Ok(groups)
}

/// Whether the OOM killer killed a process in upstream `pid`'s groups (read before they are
/// removed, once it died by SIGKILL).
pub fn ran_out_of_memory(pid: u32) -> bool {
    lineage::running(pid).is_some_and(|upstream| upstream.groups.iter().any(|dir| cgroup::oom_kills(dir) > 0))
}

/// How an upstream the OOM killer killed ended, in the hangar's words (the dead record's detail
/// reads `its process ` and this).
pub fn out_of_memory(memory_mb: Option<u64>) -> String {
    match memory_mb {
        Some(mb) => format!("ran out of memory (memory_mb: {mb}), so the kernel killed it (SIGKILL)"),
        None => "ran out of memory, so the kernel killed it (SIGKILL)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_limit_set_is_reported_with_its_holder() {
        let both = Limits { memory_mb: Some(256), max_processes: Some(16) };
        let fallback = report_for(&both, Holders { memory: Some(Holder::Rlimit), processes: Some(Holder::CgroupV1) });
        assert_eq!(fallback.enforced, ["max_processes: 16 (cgroup v1 pids.max)"]);
        assert_eq!(
            fallback.fallbacks,
            [
                "memory: rlimit fallback (no delegated cgroup): RLIMIT_AS caps its address space at 256 MiB, not its memory"
            ]
        );
        let v2 = report_for(&both, Holders { memory: Some(Holder::CgroupV2), processes: Some(Holder::CgroupV2) });
        assert_eq!(
            v2.enforced,
            ["memory_mb: 256 (cgroup v2 memory.max, no swap)", "max_processes: 16 (cgroup v2 pids.max)"]
        );
        assert!(v2.fallbacks.is_empty());
        assert_eq!(report(&Limits::default()), Report::default(), "no limits, nothing to say");
    }

    #[test]
    fn only_limits_no_cgroup_holds_fall_back_to_rlimits() {
        let both = Limits { memory_mb: Some(256), max_processes: Some(16) };
        let none = Holders { memory: Some(Holder::Rlimit), processes: Some(Holder::Rlimit) };
        assert_eq!(fallback_for(&both, none), [(Resource::RLIMIT_AS, 256 << 20), (Resource::RLIMIT_NPROC, 16)]);
        let v1_pids = Holders { memory: Some(Holder::Rlimit), processes: Some(Holder::CgroupV1) };
        assert_eq!(fallback_for(&both, v1_pids), [(Resource::RLIMIT_AS, 256 << 20)]);
        let v2 = Holders { memory: Some(Holder::CgroupV2), processes: Some(Holder::CgroupV2) };
        assert!(fallback_for(&both, v2).is_empty());
    }

    #[test]
    fn out_of_memory_names_the_limit() {
        assert_eq!(out_of_memory(Some(256)), "ran out of memory (memory_mb: 256), so the kernel killed it (SIGKILL)");
        assert_eq!(Limits { memory_mb: Some(2), max_processes: None }.memory_bytes(), Some(2 << 20));
    }
}
