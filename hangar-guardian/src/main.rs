//! `hangar-guardian`: outlives a SIGKILLed supervisor just long enough to kill every upstream's
//! whole subtree. The supervisor starts two (`hangar-supervisor/src/guardian.rs`, which tells
//! what they guarantee); nobody else runs one. Built from std, nix, humantime and this crate's
//! library only, so each maps little (BENCHMARKS.md).

mod births;
mod cover;
mod kin;
mod log;
mod run;
mod socket;
mod watched;

fn main() -> std::process::ExitCode {
    run::main()
}
