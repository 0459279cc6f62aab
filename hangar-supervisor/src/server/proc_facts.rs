//! A running server's process as `/proc` tells: resident memory, CPU time and threads, for its
//! details. Read when asked (one server's details), never polled.

use hangar_core::server_facts::ProcessFacts;

/// Clock ticks per second in `/proc/<pid>/stat` (`USER_HZ`: 100 on every Linux ABI).
const TICKS_PER_S: f64 = 100.0;

/// `pid`'s facts, or `None` when it is gone or `/proc` cannot be read.
pub fn read(pid: u32) -> Option<ProcessFacts> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let stat = crate::proctree::read(pid)?;
    let field = |name: &str| {
        let line = status.lines().find_map(|line| line.strip_prefix(name))?;
        line.split_whitespace().next()?.parse::<u64>().ok()
    };
    Some(ProcessFacts {
        pid,
        rss_bytes: field("VmRSS:").unwrap_or(0) * 1024,
        cpu_s: stat.cpu_ticks as f64 / TICKS_PER_S,
        threads: field("Threads:").unwrap_or(1),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn cpu_is_counted_after_the_names_last_parenthesis() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 1000 0 0";
        let cpu_ticks = |line: &str| hangar_guardian::proctree::parse_stat(line).map(|stat| stat.cpu_ticks);
        assert_eq!(cpu_ticks(stat), Some(300));
        assert_eq!(cpu_ticks("garbage"), None);
    }

    #[test]
    fn reads_its_own_process() {
        let facts = read(std::process::id()).unwrap();
        assert!(facts.rss_bytes > 0 && facts.threads >= 1, "{facts:?}");
    }
}
