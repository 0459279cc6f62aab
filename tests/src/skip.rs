//! Skipping a test the machine cannot run, without letting CI pass on a proof it never ran.
//!
//! Some tests need what not every machine has: root, cgroup v2 with `cgroup.kill`, systemd's
//! tools, an IPv6 loopback. On a developer's machine such a test says "skipped" and passes, as
//! before. Under `CI=true` a skip fails the test instead, unless `HANGAR_TEST_SKIP` names it: a
//! comma-separated list of test names or prefixes, as `cargo test` lists them
//! (`systemd::the_units_pass`, `sigkill_of_the_supervisor_leaves_no_descendant_in_cgroup_mode`), so a CI
//! host that truly lacks a capability says so in its own configuration (`.ci/run`), in plain
//! sight, and a host that lost one by accident goes red.

/// The environment variable that lists the tests CI allows to skip.
pub const SKIP_VAR: &str = "HANGAR_TEST_SKIP";

/// Lets the running test skip because `reason` (what the machine lacks): returns true after
/// printing the skip, or panics under `CI=true` unless `HANGAR_TEST_SKIP` names the test. The
/// caller returns (or leaves out its case) when it gets true.
///
/// The test is named by its thread, which libtest names after the test (`systemd::the_units_pass_
/// systemd_analyze_verify`), so call it from the test's own thread.
///
/// ```no_run
/// # fn installed(_: &str) -> bool { true }
/// if !installed("systemd-analyze") && hangar_tests::skip("systemd-analyze is not installed") {
///     return;
/// }
/// ```
pub fn skip(reason: &str) -> bool {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("an unnamed test");
    let ci = std::env::var("CI").ok();
    let allowed = std::env::var(SKIP_VAR).ok();
    match verdict(test, reason, ci.as_deref(), allowed.as_deref()) {
        Ok(note) => {
            eprintln!("{note}");
            true
        }
        Err(failure) => panic!("{failure}"),
    }
}

/// The pure half of [`skip`]: the note to print (`Ok`) or why the test fails (`Err`), given the
/// values of `CI` and `HANGAR_TEST_SKIP`.
fn verdict(test: &str, reason: &str, ci: Option<&str>, allowed: Option<&str>) -> Result<String, String> {
    let named = allowed.unwrap_or("").split(',').map(str::trim).any(|name| !name.is_empty() && test.starts_with(name));
    if ci != Some("true") || named {
        return Ok(format!("skipped {test}: {reason}"));
    }
    Err(format!(
        "{test} cannot run on this machine ({reason}), and under CI=true a skip is a failure: \
         give the machine what the test needs, or name the test in {SKIP_VAR} (comma-separated \
         names or prefixes) with a comment saying why"
    ))
}

#[cfg(test)]
mod tests {
    use super::verdict;

    const TEST: &str = "escape::sigkill_in_cgroup_mode";

    /// [`super::skip`] names the test by its thread: libtest names it after the test, with one
    /// test thread too.
    #[test]
    fn a_test_runs_on_a_thread_named_after_it() {
        let name = std::thread::current().name().map(str::to_owned);
        assert_eq!(name.as_deref(), Some("skip::tests::a_test_runs_on_a_thread_named_after_it"));
    }

    #[test]
    fn outside_ci_a_skip_is_printed_and_passes() {
        assert_eq!(verdict(TEST, "no cgroup2", None, None), Ok(format!("skipped {TEST}: no cgroup2")));
        assert!(verdict(TEST, "no cgroup2", Some("false"), None).is_ok());
        assert!(verdict(TEST, "no cgroup2", Some("1"), Some("")).is_ok(), "only CI=true is CI");
    }

    #[test]
    fn under_ci_a_skip_fails_naming_the_test_the_reason_and_the_way_out() {
        for allowed in [None, Some(""), Some(" , "), Some("escape::sigterm"), Some("systemd::,paths::")] {
            let failure = verdict(TEST, "no cgroup2", Some("true"), allowed).unwrap_err();
            assert!(failure.contains(TEST) && failure.contains("no cgroup2"), "{failure}");
            assert!(failure.contains("HANGAR_TEST_SKIP"), "{failure}");
        }
    }

    #[test]
    fn under_ci_a_skip_named_in_the_list_by_name_or_prefix_passes() {
        for allowed in [TEST, "escape::", "paths::, escape::sigkill", " escape::sigkill_in_cgroup_mode ,x"] {
            assert!(verdict(TEST, "no cgroup2", Some("true"), Some(allowed)).is_ok(), "{allowed}");
        }
    }
}
