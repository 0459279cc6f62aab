//! What the supervisor and its guardians share: the process tree as `/proc` shows it
//! ([`proctree`]) and killing an upstream's cgroup ([`cgroup`]). The guardian itself (the
//! `hangar-guardian` binary, `main.rs`) is built from this, std, nix and humantime alone, so that
//! each of the two maps little (BENCHMARKS.md); the supervisor's side of it is
//! `hangar-supervisor/src/guardian.rs`.

pub mod cgroup;
pub mod proctree;

/// The guardian's name in `ps`, `top`, `pkill` and `killall` (its argv[0] and comm): killing the
/// supervisor by name leaves its guardians to act.
pub const NAME: &str = "hangar-guardian";

/// The first argument the supervisor starts a guardian with: the binary is no command of its own.
pub const ARG: &str = "--internal-guardian";
