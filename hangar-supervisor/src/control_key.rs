//! The control key's file, written at each start beside the control socket before the socket
//! exists, and removed at exit (`hangar_runtime::control_key` says what the key is for).
//!
//! The key is written to a fresh temporary file (created exclusively, mode 0600; with
//! `--socket-group`, given to that group and opened to 0640 on the open file) that is then
//! renamed over `<socket>.key`: a reader sees the old key or the new one whole, never part of
//! one, and the file is never readable by anyone it should not be. A stale key of an earlier
//! supervisor is replaced the same way. The directory has already been judged safe (owned by
//! this user or root, writable by no one else) by `control::bind`.

use std::io::{self, Write as _};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use hangar_runtime::control_key::ControlKey;

use crate::owned_file::OwnedFile;

/// Draws a fresh key and writes it to `path`, readable by this user alone, and by the group
/// `gid` too when given. Returns the key and the file, for its removal at exit.
pub fn create(path: &Path, gid: Option<u32>) -> io::Result<(ControlKey, OwnedFile)> {
    let key = ControlKey::generate().map_err(io::Error::other)?;
    let temporary = temporary_beside(path);
    let written = write_new(&temporary, &key, gid).and_then(|()| std::fs::rename(&temporary, path));
    if let Err(err) = written {
        let _ = std::fs::remove_file(&temporary);
        return Err(err);
    }
    Ok((key, OwnedFile::at(path)?))
}

/// `<path>.<pid>.tmp`: this process's own temporary name beside the key.
fn temporary_beside(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{}.tmp", std::process::id()));
    PathBuf::from(name)
}

fn write_new(temporary: &Path, key: &ControlKey, gid: Option<u32>) -> io::Result<()> {
    let open = || std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(temporary);
    // A leftover of an earlier process that had this pid: never reused, replaced.
    let mut file = match open() {
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(temporary)?;
            open()?
        }
        opened => opened?,
    };
    file.write_all(key.file_text().as_bytes())?;
    if let Some(gid) = gid {
        std::os::unix::fs::fchown(&file, None, Some(gid))?;
        file.set_permissions(std::fs::Permissions::from_mode(0o640))?;
    }
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt as _;

    use super::*;

    #[test]
    fn a_fresh_key_replaces_a_stale_one_owner_only_and_goes_at_exit() {
        let dir = std::env::temp_dir().join(format!("hangar-control-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("supervisor.sock.key");
        std::fs::write(&path, "stale\n").unwrap();
        std::fs::write(temporary_beside(&path), "left over").unwrap();
        let (key, file) = create(&path, None).unwrap();
        assert!(ControlKey::read(&path).unwrap().proves(&key.proof()));
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        assert!(!temporary_beside(&path).exists());
        let (again, _) = create(&path, None).unwrap();
        assert!(!again.proves(&key.proof()), "a fresh key at each start");
        // The first file was replaced: its removal leaves the new one.
        file.remove("control key");
        assert!(path.exists());
        OwnedFile::at(&path).unwrap().remove("control key");
        assert!(!path.exists());
        // Given to a group (our own primary one here): 0640 and that group's.
        let gid = nix::unistd::getegid().as_raw();
        let (_, grouped) = create(&path, Some(gid)).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!((meta.mode() & 0o777, meta.gid()), (0o640, gid));
        grouped.remove("control key");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
