//! `--watch-config`: reload when the config file changes, as SIGHUP does. Made for a Kubernetes
//! ConfigMap volume, where the kubelet never edits the file: it writes a new timestamped
//! directory and swaps the `..data` symlink the file's own symlink goes through, so the path
//! stays and what it resolves to changes. The file is stat'ed through its symlinks every
//! [`POLL`]; a new device, inode, size or modification time is a change. A poll, not inotify:
//! it follows any chain of symlinks and needs no watch on each directory along it.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

/// How often the file is looked at (a `stat`, on a blocking thread).
const POLL: Duration = Duration::from_secs(1);
/// A `stat` slower than this (a hung network file system) counts as no answer this time.
const STAT_TIMEOUT: Duration = Duration::from_secs(5);

/// What identifies one version of the file as reached through its symlinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Version {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

/// Sends on `changed` each time the file at `path` becomes another version, until `stop`. A file
/// that cannot be read for a while (mid-swap, removed) is no change; its return is one.
pub async fn watch(path: PathBuf, changed: mpsc::Sender<()>, mut stop: watch::Receiver<bool>) {
    let mut known = version(&path).await;
    loop {
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = crate::shutdown::requested(&mut stop) => return,
        }
        let Some(now) = version(&path).await else { continue };
        if known != Some(now) {
            tracing::info!(config = %path.display(), "the config file changed; reloading");
            known = Some(now);
            if changed.send(()).await.is_err() {
                return;
            }
        }
    }
}

async fn version(path: &Path) -> Option<Version> {
    let path = path.to_owned();
    let stat = tokio::task::spawn_blocking(move || std::fs::metadata(path));
    let metadata = tokio::time::timeout(STAT_TIMEOUT, stat).await.ok()?.ok()?.ok()?;
    Some(Version {
        dev: metadata.dev(),
        ino: metadata.ino(),
        size: metadata.size(),
        mtime_ns: i128::from(metadata.mtime()) * 1_000_000_000 + i128::from(metadata.mtime_nsec()),
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[tokio::test]
    async fn a_swapped_data_symlink_is_a_new_version_and_a_missing_file_none() {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("..v1"), dir.path().join("..v2"));
        for (at, text) in [(&first, "a: 1\n"), (&second, "a: 1\n")] {
            std::fs::create_dir(at).unwrap();
            std::fs::write(at.join("hangar.yaml"), text).unwrap();
        }
        symlink("..v1", dir.path().join("..data")).unwrap();
        let config = dir.path().join("hangar.yaml");
        symlink("..data/hangar.yaml", &config).unwrap();
        let before = version(&config).await.unwrap();
        symlink("..v2", dir.path().join("..data_tmp")).unwrap();
        std::fs::rename(dir.path().join("..data_tmp"), dir.path().join("..data")).unwrap();
        let after = version(&config).await.unwrap();
        assert_ne!(before, after, "same text, another file: a change");
        std::fs::remove_file(dir.path().join("..data")).unwrap();
        assert_eq!(version(&config).await, None);
    }
}
