//! Watches the `--alt-tools-flag` file and announces tool-set changes.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::log::log;
use crate::output::Output;
use crate::protocol;

const POLL: Duration = Duration::from_millis(100);

/// Polls `flag`; whenever its existence flips, sends
/// `notifications/tools/list_changed`.
pub fn spawn_alt_tools_watch(flag: PathBuf, out: Arc<Output>) {
    std::thread::spawn(move || {
        let mut present = flag.exists();
        loop {
            std::thread::sleep(POLL);
            let now = flag.exists();
            if now != present {
                present = now;
                let set = if now { "alternate" } else { "regular" };
                log(&format!("tool set switched to the {set} tools"));
                out.send(&protocol::notification("notifications/tools/list_changed"));
            }
        }
    });
}
