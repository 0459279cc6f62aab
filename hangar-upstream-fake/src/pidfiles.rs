//! Pid files for the tests: our own pid and a grandchild's.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Writes `contents` via FILE.tmp + rename so readers never see a partial
/// file.
fn write_atomic(path: &Path, contents: &str) -> io::Result<()> {
    let mut tmp = OsString::from(path.as_os_str());
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, contents)?;
    std::fs::rename(&tmp, path)
}

pub fn write_own_pid(path: &Path) -> io::Result<()> {
    write_atomic(path, &format!("{}\n", std::process::id()))
}

/// Spawns `sleep 1000` and records its pid, so tests can check that the
/// supervisor reaps descendants too.
pub fn spawn_grandchild(path: &Path) -> io::Result<u32> {
    let mut child =
        Command::new("sleep").arg("1000").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn()?;
    let pid = child.id();
    // Reap it if it dies before us, so it never lingers as a zombie.
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    write_atomic(path, &format!("{pid}\n"))?;
    Ok(pid)
}
