//! A file the supervisor made (its control socket, the control key), known by its device and
//! inode, so that at exit it removes that file and never one that took its place since.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A file this process made at `path`.
#[derive(Debug)]
pub struct OwnedFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl OwnedFile {
    /// The file now at `path` (not following a symlink), as made by this process.
    pub fn at(path: &Path) -> std::io::Result<OwnedFile> {
        let identity = std::fs::symlink_metadata(path)?;
        Ok(OwnedFile { path: path.to_owned(), dev: identity.dev(), ino: identity.ino() })
    }

    /// Removes the file, unless something else has taken its place since; `what` names it in
    /// the warnings.
    pub fn remove(self, what: &str) {
        match std::fs::symlink_metadata(&self.path) {
            Ok(now) if now.dev() == self.dev && now.ino() == self.ino => {
                if let Err(err) = std::fs::remove_file(&self.path) {
                    tracing::warn!(path = %self.path.display(), %err, "cannot remove the {what}");
                }
            }
            Ok(_) => {
                tracing::warn!(path = %self.path.display(), "the {what} was replaced; leaving the new file")
            }
            Err(_) => {}
        }
    }
}
