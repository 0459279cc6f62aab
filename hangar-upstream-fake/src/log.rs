//! Stderr logging that never panics: `eprintln!` panics on EPIPE, and the
//! hangar may close our stderr at any time.

use std::io::Write;

/// Writes one line to stderr, ignoring write errors.
pub fn log(msg: &str) {
    let _ = writeln!(std::io::stderr(), "hangar-upstream-fake: {msg}");
}

/// Logs a deliberate failure; the line always carries the sentinel so tests
/// can prove the hangar never echoes it on a read surface.
pub fn log_fault(sentinel: &str, msg: &str) {
    log(&format!("{msg} {sentinel}"));
}
