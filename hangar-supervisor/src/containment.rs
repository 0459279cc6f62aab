//! Keeping every descendant within reach, around the supervisor's whole run: set up before any
//! child runs, let go after every child is reaped (see `spawn.rs` for what each part does).

use std::path::Path;
use std::time::Duration;

use hangar_runtime::exit::{EX_CONFIG, EX_UNAVAILABLE, Exit};
use hangar_runtime::logging::LogFormat;

use crate::{cgroup, cgroup_v1, guardian, reaper};

/// Before any child runs: the supervisor becomes the subreaper of every orphan below it, picks
/// how upstream subtrees are killed, removes the empty cgroup v1 groups stopped hangars left, and
/// starts the guardians (none if they cannot start; `guardian`, the binary `--guardian` names,
/// must open).
pub fn start(
    mode: cgroup::KillMode,
    log_format: LogFormat,
    guardian: Option<&Path>,
) -> Result<Option<guardian::Keeper>, Exit> {
    reaper::become_subreaper();
    match cgroup::init(mode) {
        Ok(chosen) => tracing::info!(kill_mode = chosen, "upstream subtrees are killed whole"),
        Err(why) => return Err(Exit::new(EX_UNAVAILABLE, format!("--kill-mode cgroup: {why}"))),
    }
    cgroup_v1::remove_stale();
    guardian::start(log_format, guardian).map_err(|err| Exit::new(EX_CONFIG, format!("--guardian {err}")))
}

/// After every child is reaped: kills and reaps any orphan left, then lets the guardians go
/// (closing their pipes, they exit with nothing to kill).
pub fn release(guardian: Option<guardian::Keeper>) {
    reaper::sweep_until_none(Duration::from_secs(2));
    if let Some(keeper) = guardian {
        guardian::stop(keeper);
    }
}
