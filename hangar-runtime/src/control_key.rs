//! The control key: the secret that tells the hangar's own processes from everyone else on the
//! control socket.
//!
//! The supervisor draws a fresh 256-bit key from the OS's randomness at each start and writes it,
//! as 64 hex digits and a newline, to a file only its user (and `--socket-group`) may read,
//! beside the socket ([`default_path`]: `<socket>.key`), before the socket exists. Its clients
//! (the API, the prober) read the file at every connect, so a restarted supervisor's new key is
//! picked up, and prove it in their hello; `--control-key FILE` names another file for a client
//! started apart. A sandboxed upstream runs as the same user, but no box is granted the file
//! (nor, in the sandbox, the socket's directory), so it cannot prove the key.
//!
//! [`ControlKey`] never shows itself in `Debug`; [`ControlKey::proves`] compares in constant time.

use std::path::{Path, PathBuf};

use hangar_core::ipc::KeyProof;
use subtle::ConstantTimeEq as _;

/// Bytes in a key: 256 bits.
const KEY_BYTES: usize = 32;

/// A control key.
#[derive(Clone)]
pub struct ControlKey([u8; KEY_BYTES]);

impl std::fmt::Debug for ControlKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ControlKey([redacted])")
    }
}

/// Why a key file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read the control key {path}: {reason}")]
    Unreadable { path: PathBuf, reason: String },
    #[error("the control key {path} is not 64 hex digits")]
    Malformed { path: PathBuf },
    #[error("the OS's randomness is unavailable for a control key: {0}")]
    Random(String),
}

impl ControlKey {
    /// A fresh key from the OS's randomness.
    pub fn generate() -> Result<ControlKey, KeyError> {
        let mut bytes = [0u8; KEY_BYTES];
        getrandom::fill(&mut bytes).map_err(|err| KeyError::Random(err.to_string()))?;
        Ok(ControlKey(bytes))
    }

    /// Reads the key from `path` (a regular file of at most 4 KiB: 64 hex digits, surrounding
    /// whitespace allowed).
    pub fn read(path: &Path) -> Result<ControlKey, KeyError> {
        let text = hangar_core::small_file::read_regular(path, 4096)
            .map_err(|err| KeyError::Unreadable { path: path.to_owned(), reason: err.to_string() })?;
        ControlKey::parse(text.trim()).ok_or_else(|| KeyError::Malformed { path: path.to_owned() })
    }

    /// The key written as 64 hex digits, `None` for anything else.
    fn parse(hex: &str) -> Option<ControlKey> {
        hangar_core::access::parse_hex_32(hex).map(ControlKey)
    }

    /// The key as the file holds it (lower-case hex, with a newline).
    pub fn file_text(&self) -> String {
        let mut text: String = self.0.iter().map(|byte| format!("{byte:02x}")).collect();
        text.push('\n');
        text
    }

    /// What a client sends in its hello.
    pub fn proof(&self) -> KeyProof {
        KeyProof(self.file_text().trim_end().to_owned())
    }

    /// Whether `proof` is this key, compared in constant time (a proof of the wrong shape is
    /// simply not it).
    pub fn proves(&self, proof: &KeyProof) -> bool {
        ControlKey::parse(&proof.0).is_some_and(|other| bool::from(self.0.ct_eq(&other.0)))
    }
}

/// Where the key of the supervisor serving `socket` is: `<socket>.key`, beside it.
pub fn default_path(socket: &Path) -> PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(".key");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_proves_itself_only_and_never_shows() {
        let key = ControlKey::generate().unwrap();
        let other = ControlKey::generate().unwrap();
        assert!(key.proves(&key.proof()));
        assert!(!key.proves(&other.proof()));
        for junk in ["", "00", &"g".repeat(64), &"0".repeat(65), &format!("{} ", key.proof().0)] {
            assert!(!key.proves(&KeyProof(junk.to_owned())), "{junk:?}");
        }
        assert_eq!(key.file_text().len(), 65);
        assert!(!format!("{key:?}").contains(&key.proof().0));
        assert!(!format!("{:?}", key.proof()).contains(&key.proof().0));
    }

    #[test]
    fn reads_what_the_supervisor_writes_and_says_what_is_wrong() {
        let dir = std::env::temp_dir().join(format!("hangar-key-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = ControlKey::generate().unwrap();
        let path = dir.join("supervisor.sock.key");
        std::fs::write(&path, key.file_text()).unwrap();
        assert!(ControlKey::read(&path).unwrap().proves(&key.proof()));
        std::fs::write(&path, "not a key\n").unwrap();
        assert!(ControlKey::read(&path).unwrap_err().to_string().contains("not 64 hex digits"));
        let missing = ControlKey::read(&dir.join("missing")).unwrap_err().to_string();
        assert!(missing.contains("cannot read the control key"), "{missing}");
        assert!(ControlKey::read(&dir).is_err(), "a directory is no key");
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            default_path(Path::new("/run/hangar/supervisor.sock")),
            Path::new("/run/hangar/supervisor.sock.key")
        );
    }
}
