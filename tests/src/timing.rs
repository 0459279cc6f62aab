//! How long each test took, for the time per story file that `scripts/test` reports.
//!
//! Stable Rust's test harness reports no per-test times (`--report-time` is nightly-only), so the
//! harness records them itself: when `HANGAR_TEST_TIMES` names a file, every test that touches
//! the harness (starting a hangar, finding a binary, polling) appends one line to it when its
//! thread ends (libtest runs each test on a thread of its own, named after the test):
//! `<test binary>\t<test>\t<seconds>`. The time runs from the thread's start (read from
//! `/proc/thread-self/stat`), so what a test did before its first harness call counts too.
//! Unset (a plain `cargo test`), nothing is recorded.

use std::io::Write;
use std::time::{Duration, Instant};

/// The environment variable naming the file the times are appended to.
pub const TIMES_VAR: &str = "HANGAR_TEST_TIMES";

/// A test thread's clock: the test, its start, and where its time goes when it ends.
struct Clock {
    test: Option<String>,
    started: Instant,
    file: std::path::PathBuf,
}

thread_local! {
    static CLOCK: Option<Clock> = std::env::var_os(TIMES_VAR).map(|file| Clock {
        // Named now: a thread's handle may be gone by the time its locals are dropped.
        test: std::thread::current().name().filter(|name| *name != "main").map(str::to_owned),
        started: Instant::now().checked_sub(thread_age().unwrap_or_default()).unwrap_or_else(Instant::now),
        file: file.into(),
    });
}

/// Starts this test thread's clock (once; later calls do nothing), if times are recorded.
pub(crate) fn note() {
    CLOCK.with(|_| ());
}

impl Drop for Clock {
    fn drop(&mut self) {
        let Some(test) = &self.test else { return };
        let binary = std::env::current_exe().ok().and_then(|exe| Some(exe.file_stem()?.to_string_lossy().into_owned()));
        // `e2e-0123456789abcdef` -> `e2e`.
        let binary =
            binary.as_deref().map(|b| b.rsplit_once('-').map_or(b, |(name, _)| name)).unwrap_or("?").to_owned();
        let line = format!("{binary}\t{test}\t{:.2}\n", self.started.elapsed().as_secs_f64());
        // One short append per test: lines from parallel tests never interleave.
        let appended = std::fs::OpenOptions::new().create(true).append(true).open(&self.file);
        if let Ok(mut file) = appended {
            let _ = file.write_all(line.as_bytes());
        }
    }
}

/// How long this thread has been running: the system's uptime less the thread's start time
/// (both since boot, in clock ticks of 1/100 s as `/proc` gives them).
fn thread_age() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // The fields after the command (which may hold spaces), from `state` (field 3) on.
    let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split_whitespace().collect();
    let started_ticks: u64 = fields.get(19)?.parse().ok()?;
    let uptime = std::fs::read_to_string("/proc/uptime").ok()?;
    let uptime_s: f64 = uptime.split_whitespace().next()?.parse().ok()?;
    let age = uptime_s - started_ticks as f64 / USER_HZ;
    (age >= 0.0).then(|| Duration::from_secs_f64(age))
}

/// The unit of `/proc`'s times on Linux (`USER_HZ`), whatever the kernel's own tick rate.
const USER_HZ: f64 = 100.0;

#[cfg(test)]
mod tests {
    use super::thread_age;

    #[test]
    fn a_new_thread_is_young() {
        let age = std::thread::spawn(thread_age).join().unwrap().expect("/proc/thread-self/stat is readable");
        assert!(age.as_secs_f64() < 5.0, "a thread just started: {age:?}");
    }
}
