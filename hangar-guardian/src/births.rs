//! Whether any process was born since a moment: the last pid the kernel handed out, the fifth
//! field of `/proc/loadavg` (`0.00 0.01 0.05 1/123 45678`). Every fork in this pid namespace or
//! one below it takes the next pid in turn, so while that number stays put no process was born,
//! and the process tree can only have shrunk or been reparented: one read, whatever the number of
//! upstreams. (A process given a pid of its choosing, `clone3` with `set_tid`, which takes
//! `CAP_CHECKPOINT_RESTORE` or `CAP_SYS_ADMIN`, does not move it.)

/// The last pid handed out, or None if `/proc/loadavg` cannot be read (then every moment counts
/// as one with births).
pub fn last_pid() -> Option<u32> {
    parse(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

fn parse(loadavg: &str) -> Option<u32> {
    loadavg.split_whitespace().nth(4)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_last_pid_and_sees_a_birth() {
        assert_eq!(parse("0.97 1.12 1.32 2/102 1719\n"), Some(1719));
        assert_eq!(parse("0.97 1.12"), None);
        let before = last_pid().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let _ = child.wait();
        assert_ne!(last_pid(), Some(before), "a birth moves it");
    }
}
