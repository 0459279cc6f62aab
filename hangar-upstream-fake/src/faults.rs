//! Start-up faults: early exit, stderr flood, stdout garbage.

use std::io::{self, Write};
use std::path::Path;

use serde_json::json;

use crate::log::log_fault;
use crate::output::Output;

/// Exit code when `--exit-flag` is present at start.
pub const EXIT_FLAG_CODE: i32 = 3;

/// Exits before reading anything if the exit flag exists.
pub fn exit_if_flagged(flag: Option<&Path>, sentinel: &str) {
    if let Some(flag) = flag
        && flag.exists()
    {
        log_fault(sentinel, &format!("exit-flag {} present, exiting", flag.display()));
        std::process::exit(EXIT_FLAG_CODE);
    }
}

/// Floods stderr with `bytes` bytes in ~100-byte sentinel lines, from a
/// background thread so serving goes on.
pub fn spawn_stderr_flood(bytes: u64, sentinel: String) {
    std::thread::spawn(move || {
        let mut left = bytes;
        let mut seq: u64 = 0;
        let mut chunk = Vec::with_capacity(64 * 1024);
        while left > 0 {
            chunk.clear();
            // Batch lines so the flood is fast, but keep batches modest so
            // our own log lines still get through in between.
            while left > 0 && chunk.len() < 60 * 1024 {
                let line = flood_line(seq, &sentinel);
                let take = usize::try_from(left).unwrap_or(usize::MAX).min(line.len());
                chunk.extend_from_slice(&line.as_bytes()[..take]);
                left -= take as u64;
                seq += 1;
            }
            if io::stderr().write_all(&chunk).is_err() {
                return; // EPIPE or similar: the reader left; stop quietly.
            }
        }
    });
}

fn flood_line(seq: u64, sentinel: &str) -> String {
    let mut line = format!("hangar-upstream-fake flood {seq:010} {sentinel} ");
    while line.len() < 99 {
        line.push('f');
    }
    line.push('\n');
    line
}

/// Writes the garbage preamble to stdout: non-JSON, an answer to an id never
/// sent, a JSON array, and one over-long line.
pub fn write_garbage_preamble(out: &Output, sentinel: &str, long_line_bytes: usize) {
    log_fault(sentinel, "writing garbage to stdout as asked");
    out.raw(format!("this is not json {sentinel}\n").as_bytes());
    let stray = json!({"jsonrpc": "2.0", "id": 987_654_321, "result": {"x": sentinel}});
    out.raw(format!("{stray}\n").as_bytes());
    out.raw(format!("{}\n", json!([sentinel, 1, 2])).as_bytes());
    let mut long = vec![b'x'; long_line_bytes];
    long.push(b'\n');
    out.raw(&long);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flood_lines_are_about_100_bytes_and_carry_the_sentinel() {
        let line = flood_line(7, "S-1");
        assert_eq!(line.len(), 100);
        assert!(line.contains("S-1"));
        assert!(line.ends_with('\n'));
    }
}
