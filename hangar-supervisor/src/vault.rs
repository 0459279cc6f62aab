//! The upstream credentials the hangar stores: tokens it obtained for an upstream, each its
//! owner's (identity, server, issuer, resource), sealed under `credentials.key_file`
//! (`hangar_core::keyring`) in the journal's `credentials` table, and read through a connection
//! of the vault's own (writes are rare: a token obtained, refreshed or forgotten).
//!
//! The key file is read with the careful reader, and refused unless it is a regular file of the
//! hangar's own user that no one else may read or write (mode 0600 or 0400): the key is what
//! keeps every stored token. Without `credentials.key_file`, the key is `credentials.key` in
//! `state_dir`, made (0600) at the first start. No box reaches either place (`sandbox.rs`
//! protects the key file's directory, and `state_dir`).
//!
//! At start and on every reload the key file is read again: rows sealed under an older key that
//! the file still holds are sealed again under its first key, so an operator rotates by putting a
//! new line first, reloading, and then dropping the old line. A row sealed under a key the file no
//! longer holds is kept but unusable (its owner connects again, which replaces it), and said
//! once in the log by count, never by content.
//!
//! Architecture invariant: nothing here logs, returns in an error, or `Debug`s a stored value;
//! only [`Vault::get`] hands one out, to the call that needs it.

use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use hangar_core::credentials_config::CredentialsConfig;
use hangar_core::keyring::{Keyring, Sealed};
use hangar_core::sync::{Unpoisoned, UnpoisonedRw};
use hangar_runtime::exit::{EX_CONFIG, EX_IOERR, Sysexit};
use rusqlite::{Connection, OptionalExtension, params};

/// The default key file's name in `state_dir`.
pub const DEFAULT_KEY_FILE: &str = "credentials.key";
/// The most a key file may hold (16 keys and comments).
const MAX_KEY_FILE_BYTES: u64 = 4096;
/// How long the vault waits for the journal's writer to let go of the database.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a stored credential belongs: whose it is, for which server, from which authorization
/// server and for which resource. The sealed value is bound to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Place {
    pub identity: String,
    pub mcp_server: String,
    pub issuer: String,
    pub resource: String,
}

impl Place {
    /// The associated data its value is sealed with: each part length-prefixed, so no two places
    /// read the same.
    fn bound(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for part in [&self.identity, &self.mcp_server, &self.issuer, &self.resource] {
            out.extend_from_slice(&(part.len() as u64).to_be_bytes());
            out.extend_from_slice(part.as_bytes());
        }
        out
    }
}

/// Why the vault did not open, or a key file was not taken.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    #[error("credentials.key_file: {path}: {message}")]
    KeyFile { path: PathBuf, message: String },
    #[error("credentials.key_file: {path}: {source}")]
    Keyring { path: PathBuf, source: hangar_core::keyring::KeyringError },
    #[error("credentials.key_file changes only with a restart (it is {running}; the new config names {asked})")]
    Moved { running: PathBuf, asked: PathBuf },
    #[error("the stored credentials in {path}: {source}")]
    Database { path: PathBuf, source: rusqlite::Error },
}

impl Sysexit for VaultError {
    fn exit_code(&self) -> u8 {
        match self {
            VaultError::Database { .. } => EX_IOERR,
            _ => EX_CONFIG,
        }
    }
}

/// The stored credentials and the keys that seal them.
pub struct Vault {
    key_file: PathBuf,
    keyring: RwLock<Arc<Keyring>>,
    db: Mutex<Connection>,
    db_path: PathBuf,
    /// Bumped after every write ([`Vault::put`], [`Vault::forget`]): a copy held in memory
    /// elsewhere (`credentials::user_tokens`), read after the number, is read again once the
    /// number moves on.
    generation: AtomicU64,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vault").field("key_file", &self.key_file).finish_non_exhaustive()
    }
}

/// A stored credential as its owner lists it: its place, when it was stored, and its value
/// opened, if the key file still opens it. Its `Debug` shows no value.
#[derive(Clone, PartialEq, Eq)]
pub struct Entry {
    pub place: Place,
    pub updated_at_ms: i64,
    pub value: Option<Vec<u8>>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("place", &self.place)
            .field("updated_at_ms", &self.updated_at_ms)
            .field("readable", &self.value.is_some())
            .finish()
    }
}

impl Vault {
    /// Opens the vault over the journal at `db_path` (which made the table), with the key file
    /// `config` names, or the default one in `state_dir` (made if missing).
    pub fn open(config: &CredentialsConfig, state_dir: &Path, db_path: &Path) -> Result<Vault, VaultError> {
        let key_file = key_file_of(config, state_dir);
        if config.key_file.is_none() {
            make_default(&key_file)?;
        }
        let keyring = read_keyring(&key_file)?;
        let failed = |source| VaultError::Database { path: db_path.to_owned(), source };
        let db = Connection::open(db_path).map_err(failed)?;
        db.busy_timeout(BUSY_TIMEOUT).map_err(failed)?;
        let vault = Vault {
            key_file,
            keyring: RwLock::new(Arc::new(keyring)),
            db: Mutex::new(db),
            db_path: db_path.to_owned(),
            generation: AtomicU64::new(0),
        };
        vault.reseal()?;
        Ok(vault)
    }

    /// The key file in use.
    pub fn key_file(&self) -> &Path {
        &self.key_file
    }

    /// Reads the key file again (a reload): refused, changing nothing, if it is not fit, or if
    /// the new config names another file. Seals again what an older key sealed.
    pub fn rekey(&self, config: &CredentialsConfig, state_dir: &Path) -> Result<(), VaultError> {
        let asked = key_file_of(config, state_dir);
        if asked != self.key_file {
            return Err(VaultError::Moved { running: self.key_file.clone(), asked });
        }
        let keyring = read_keyring(&self.key_file)?;
        *self.keyring.writing() = Arc::new(keyring);
        self.reseal()
    }

    /// The value stored at `place`, opened; `None` if there is none or it no longer opens.
    pub fn get(&self, place: &Place) -> Option<Vec<u8>> {
        let row: Option<(String, Vec<u8>)> = self
            .db
            .locked()
            .query_row(
                "SELECT key_id, sealed FROM credentials
                 WHERE identity = ?1 AND mcp_server = ?2 AND issuer = ?3 AND resource = ?4",
                params![place.identity, place.mcp_server, place.issuer, place.resource],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()
            .unwrap_or_else(|err| {
                tracing::error!(%err, "the stored credentials could not be read");
                None
            });
        let (key_id, bytes) = row?;
        self.keyring.reading().open(&place.bound(), &Sealed { key_id, bytes }).ok()
    }

    /// How many writes the vault has seen: what was read before a change reads a lower number.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Stores `value` at `place`, sealed under the first key (replacing what was there).
    pub fn put(&self, place: &Place, value: &[u8]) -> Result<(), VaultError> {
        let sealed = self.keyring.reading().seal(&place.bound(), value);
        self.db
            .locked()
            .execute(
                "INSERT INTO credentials (identity, mcp_server, issuer, resource, key_id, sealed, updated_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT (identity, mcp_server, issuer, resource)
                 DO UPDATE SET key_id = ?5, sealed = ?6, updated_at_ms = ?7",
                params![
                    place.identity,
                    place.mcp_server,
                    place.issuer,
                    place.resource,
                    sealed.key_id,
                    sealed.bytes,
                    now_ms()
                ],
            )
            .map(drop)
            .map_err(|source| self.failed(source))?;
        // After the write: whoever read the number before it reads the new value again.
        self.generation.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Forgets every credential `identity` holds for `mcp_server`; how many there were.
    pub fn forget(&self, identity: &str, mcp_server: &str) -> Result<usize, VaultError> {
        self.db
            .locked()
            .execute("DELETE FROM credentials WHERE identity = ?1 AND mcp_server = ?2", params![identity, mcp_server])
            .map_err(|source| self.failed(source))
            .inspect(|_| {
                self.generation.fetch_add(1, Ordering::SeqCst);
            })
    }

    /// What `identity` holds, each value opened (once), in server order.
    pub fn list(&self, identity: &str) -> Result<Vec<Entry>, VaultError> {
        let keyring = self.keyring.reading().clone();
        let db = self.db.locked();
        let mut select = db
            .prepare(
                "SELECT mcp_server, issuer, resource, key_id, sealed, updated_at_ms FROM credentials
                 WHERE identity = ?1 ORDER BY mcp_server, issuer, resource",
            )
            .map_err(|source| self.failed(source))?;
        let rows = select
            .query_map(params![identity], |row| {
                let place = Place {
                    identity: identity.to_owned(),
                    mcp_server: row.get(0)?,
                    issuer: row.get(1)?,
                    resource: row.get(2)?,
                };
                let sealed = Sealed { key_id: row.get(3)?, bytes: row.get(4)? };
                let value = keyring.open(&place.bound(), &sealed).ok();
                Ok(Entry { place, updated_at_ms: row.get(5)?, value })
            })
            .map_err(|source| self.failed(source))?;
        rows.collect::<Result<_, _>>().map_err(|source| self.failed(source))
    }

    /// Seals again, under the first key, every row an older key the ring still holds sealed;
    /// counts (in the log) the rows no key opens.
    fn reseal(&self) -> Result<(), VaultError> {
        let keyring = self.keyring.reading().clone();
        let mut db = self.db.locked();
        let tx = db.transaction().map_err(|source| self.failed(source))?;
        let rows: Vec<(Place, Sealed)> = {
            let mut select = tx
                .prepare(
                    "SELECT identity, mcp_server, issuer, resource, key_id, sealed FROM credentials WHERE key_id != ?1",
                )
                .map_err(|source| self.failed(source))?;
            let found = select
                .query_map(params![keyring.sealing_id()], |row| {
                    let place = Place {
                        identity: row.get(0)?,
                        mcp_server: row.get(1)?,
                        issuer: row.get(2)?,
                        resource: row.get(3)?,
                    };
                    Ok((place, Sealed { key_id: row.get(4)?, bytes: row.get(5)? }))
                })
                .map_err(|source| self.failed(source))?;
            found.collect::<Result<_, _>>().map_err(|source| self.failed(source))?
        };
        let (mut resealed, mut unreadable) = (0usize, 0usize);
        for (place, sealed) in rows {
            let opened = keyring.needs_resealing(&sealed).then(|| keyring.open(&place.bound(), &sealed).ok()).flatten();
            let Some(value) = opened else {
                unreadable += 1;
                continue;
            };
            let again = keyring.seal(&place.bound(), &value);
            tx.execute(
                "UPDATE credentials SET key_id = ?5, sealed = ?6
                 WHERE identity = ?1 AND mcp_server = ?2 AND issuer = ?3 AND resource = ?4",
                params![place.identity, place.mcp_server, place.issuer, place.resource, again.key_id, again.bytes],
            )
            .map_err(|source| self.failed(source))?;
            resealed += 1;
        }
        tx.commit().map_err(|source| self.failed(source))?;
        if resealed > 0 {
            tracing::info!(resealed, key = keyring.sealing_id(), "stored credentials sealed again under the first key");
        }
        if unreadable > 0 {
            tracing::warn!(
                unreadable,
                "stored credentials sealed with a key credentials.key_file no longer holds: kept, unusable; their owners connect again"
            );
        }
        Ok(())
    }

    fn failed(&self, source: rusqlite::Error) -> VaultError {
        VaultError::Database { path: self.db_path.clone(), source }
    }
}

fn key_file_of(config: &CredentialsConfig, state_dir: &Path) -> PathBuf {
    config.key_file.clone().unwrap_or_else(|| state_dir.join(DEFAULT_KEY_FILE))
}

/// Makes the default key file (0600, a fresh key) unless it is there.
fn make_default(path: &Path) -> Result<(), VaultError> {
    use std::io::Write as _;
    let refused = |err: std::io::Error| VaultError::KeyFile { path: path.to_owned(), message: err.to_string() };
    let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
        Err(err) => return Err(refused(err)),
    };
    file.write_all(Keyring::generate().as_bytes()).and_then(|()| file.sync_all()).map_err(refused)?;
    tracing::info!(path = %path.display(), "a new key for stored credentials was made");
    Ok(())
}

/// The key file's keys, if it is fit to hold them: a regular file of this user's, that no one
/// else may read or write.
fn read_keyring(path: &Path) -> Result<Keyring, VaultError> {
    let refused = |message: String| VaultError::KeyFile { path: path.to_owned(), message };
    let metadata = std::fs::metadata(path).map_err(|err| refused(err.to_string()))?;
    if metadata.uid() != nix::unistd::geteuid().as_raw() {
        return Err(refused(format!("owned by uid {}, not by the hangar's user: chown it", metadata.uid())));
    }
    let mode = metadata.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(refused(format!("mode {mode:04o} lets others read or write it: chmod 600 it")));
    }
    let text =
        hangar_core::small_file::read_regular(path, MAX_KEY_FILE_BYTES).map_err(|err| refused(err.to_string()))?;
    Keyring::parse(&text).map_err(|source| VaultError::Keyring { path: path.to_owned(), source })
}

fn now_ms() -> i64 {
    i64::try_from(hangar_core::time::now_ms()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(identity: &str, server: &str) -> Place {
        Place {
            identity: identity.into(),
            mcp_server: server.into(),
            issuer: "https://as.example".into(),
            resource: "https://mcp.example/mcp".into(),
        }
    }

    /// A state directory with a journal in it, and the vault over it.
    fn opened(dir: &Path, config: &CredentialsConfig) -> Result<Vault, VaultError> {
        let journal = crate::journal::Journal::open(dir).unwrap();
        Vault::open(config, dir, journal.path())
    }

    #[test]
    fn a_stored_token_is_its_owners_and_not_in_clear_in_the_database() {
        let dir = tempfile::tempdir().unwrap();
        let vault = opened(dir.path(), &CredentialsConfig::default()).unwrap();
        let key = dir.path().join(DEFAULT_KEY_FILE);
        assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
        vault.put(&place("alice", "linear"), b"alice-secret-token").unwrap();
        assert_eq!(vault.get(&place("alice", "linear")).unwrap(), b"alice-secret-token");
        assert_eq!(vault.get(&place("bob", "linear")), None);
        assert_eq!(vault.list("bob").unwrap(), vec![]);
        assert_eq!(vault.list("alice").unwrap().len(), 1);
        let db = std::fs::read(vault.db_path.clone()).unwrap();
        let wal = std::fs::read(vault.db_path.with_extension("sqlite-wal")).unwrap_or_default();
        for bytes in [db, wal] {
            assert!(!bytes.windows(18).any(|w| w == b"alice-secret-token"), "the token is in the database in clear");
        }
        assert_eq!(vault.forget("alice", "linear").unwrap(), 1);
        assert_eq!(vault.get(&place("alice", "linear")), None);
    }

    #[test]
    fn a_rotated_key_reseals_what_the_old_one_sealed() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("k");
        let old = Keyring::generate();
        std::fs::write(&key, &old).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let config = CredentialsConfig { key_file: Some(key.clone()), public_url: None };
        let vault = opened(dir.path(), &config).unwrap();
        vault.put(&place("alice", "linear"), b"v").unwrap();
        // The new key first, then a reload: what the old one sealed is sealed again.
        std::fs::write(&key, format!("{}{old}", Keyring::generate())).unwrap();
        vault.rekey(&config, dir.path()).unwrap();
        // The old key dropped: the value still opens.
        let new_only = std::fs::read_to_string(&key).unwrap().lines().next().unwrap().to_owned();
        std::fs::write(&key, new_only).unwrap();
        vault.rekey(&config, dir.path()).unwrap();
        assert_eq!(vault.get(&place("alice", "linear")).unwrap(), b"v");
        // A key the file never held: kept, unusable, listed as such.
        std::fs::write(&key, Keyring::generate()).unwrap();
        vault.rekey(&config, dir.path()).unwrap();
        assert_eq!(vault.get(&place("alice", "linear")), None);
        assert_eq!(vault.list("alice").unwrap()[0].value, None);
    }

    #[test]
    fn a_key_file_others_may_read_or_another_file_on_reload_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("k");
        std::fs::write(&key, Keyring::generate()).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
        let config = CredentialsConfig { key_file: Some(key.clone()), public_url: None };
        let refused = opened(dir.path(), &config).unwrap_err();
        assert!(refused.to_string().contains("chmod 600"), "{refused}");
        assert_eq!(refused.exit_code(), EX_CONFIG);
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400)).unwrap();
        let vault = opened(dir.path(), &config).unwrap();
        let other = CredentialsConfig { key_file: Some(dir.path().join("other")), public_url: None };
        assert!(matches!(vault.rekey(&other, dir.path()), Err(VaultError::Moved { .. })));
    }
}
