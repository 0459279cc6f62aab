//! Copies of the built binaries and the fixtures that every user can reach, for stories that run
//! something as another user (a hangar started with `setpriv`, a box with `sandbox.user`).
//!
//! A clean clone may live anywhere: in root's 0700 home, where `nobody` cannot reach
//! `target/debug` or `tests/fixtures`, or under `/tmp`, where a box's private `/tmp` would show the
//! clone's directory (a grant's mount point). So what such a story runs is put in one 0755
//! directory in `/var/tmp` (outside every clone and outside `/tmp`): hard links where the
//! file system and the file's mode allow (free, and the same file), else copies made readable
//! (and, for a binary, executable) by all. The directory is shared by the stories running at the
//! same moment and removed when the last of them lets go.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use hangar_core::sync::Unpoisoned;

use crate::{bin, repo_root};

/// Where the directory is made: not under `/tmp`, and not in the clone.
const BASE: &str = "/var/tmp";

/// A handle on the shared directory of reachable copies; the directory goes with the last one.
#[derive(Clone)]
pub struct Reachable(Arc<Shared>);

struct Shared {
    dir: tempfile::TempDir,
    /// The names already linked or copied in (`fixtures` for the whole fixtures directory).
    placed: Mutex<BTreeSet<String>>,
}

impl Reachable {
    /// The directory the stories running now share, made (0755, in `/var/tmp`) if none is.
    pub fn get() -> Reachable {
        static CURRENT: Mutex<Weak<Shared>> = Mutex::new(Weak::new());
        let mut current = CURRENT.locked();
        if let Some(shared) = current.upgrade() {
            return Reachable(shared);
        }
        let dir = tempfile::Builder::new()
            .prefix("hangar-tests-reachable-")
            .tempdir_in(BASE)
            .unwrap_or_else(|err| panic!("cannot make a directory in {BASE}: {err}"));
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let shared = Arc::new(Shared { dir, placed: Mutex::default() });
        *current = Arc::downgrade(&shared);
        Reachable(shared)
    }

    /// The directory itself.
    pub fn path(&self) -> &Path {
        self.0.dir.path()
    }

    /// The built binary `name` (as [`bin`] finds it), placed here: every user can run it, and a
    /// supervisor run from here finds its helpers (`hangar-api`, `hangar-prober`,
    /// `hangar-guardian`) beside it once they are placed too.
    pub fn bin(&self, name: &str) -> PathBuf {
        let placed = self.path().join(name);
        let mut done = self.0.placed.locked();
        if done.insert(name.to_owned()) {
            place(&bin(name), &placed, 0o755);
        }
        placed
    }

    /// `tests/fixtures`, placed here as `fixtures`, every file readable by all.
    pub fn fixtures(&self) -> PathBuf {
        let placed = self.path().join("fixtures");
        let mut done = self.0.placed.locked();
        if done.insert("fixtures".to_owned()) {
            std::fs::create_dir(&placed).unwrap();
            std::fs::set_permissions(&placed, std::fs::Permissions::from_mode(0o755)).unwrap();
            for entry in std::fs::read_dir(repo_root().join("tests/fixtures")).unwrap() {
                let entry = entry.unwrap();
                if entry.file_type().unwrap().is_file() {
                    place(&entry.path(), &placed.join(entry.file_name()), 0o644);
                }
            }
        }
        placed
    }

    /// `yaml` with `{fake}` and `{fixtures}` standing for the copies here (the harness fills in
    /// the other placeholders as usual).
    pub fn fill(&self, yaml: &str) -> String {
        let mut yaml = yaml.to_owned();
        if yaml.contains("{fake}") {
            yaml = yaml.replace("{fake}", &self.bin("hangar-upstream-fake").display().to_string());
        }
        if yaml.contains("{fixtures}") {
            yaml = yaml.replace("{fixtures}", &self.fixtures().display().to_string());
        }
        yaml
    }
}

/// Puts `source` at `placed`: a hard link when every user may already use the file as `mode`
/// asks (its permission bits for others), else a copy with `mode`.
fn place(source: &Path, placed: &Path, mode: u32) {
    let others = mode & 0o007;
    let usable =
        std::fs::metadata(source).unwrap_or_else(|err| panic!("{}: {err}", source.display())).permissions().mode()
            & others
            == others;
    if usable && std::fs::hard_link(source, placed).is_ok() {
        return;
    }
    std::fs::copy(source, placed).unwrap_or_else(|err| panic!("cannot copy {}: {err}", source.display()));
    std::fs::set_permissions(placed, std::fs::Permissions::from_mode(mode)).unwrap();
}
