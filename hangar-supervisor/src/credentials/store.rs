//! The encrypted token store: upstream tokens kept in the journal's SQLite file (table
//! `upstream_tokens`, see `journal/schema.rs`), so they outlive a restart.
//!
//! Each row is keyed by (identity, server, issuer, resource) and its value sealed with
//! ChaCha20-Poly1305 under the key of `credentials.key_file`, with a fresh random nonce per
//! write and the row's key as associated data: the file (or a copy of it) gives no token away,
//! and a sealed value moved to another row does not open. A value that does not open (another
//! key, a damaged row) is treated as absent, never as an error a call would fail on. The store
//! has a connection of its own to the file; the journal's writer thread never sees a token.

use std::path::Path;
use std::sync::Mutex;

use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use hangar_core::sync::Unpoisoned;
use hangar_core::time::now_ms;
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

/// The length of a nonce, stored before the ciphertext.
const NONCE_BYTES: usize = 12;

/// Whose token, for what: the row's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenKey {
    /// The identity the token is for (`hangar` for a `per: shared` server's own).
    pub identity: String,
    pub server: String,
    pub issuer: String,
    pub resource: String,
}

impl TokenKey {
    /// The associated data a sealed value is bound to.
    fn binding(&self) -> Vec<u8> {
        [&self.identity, &self.server, &self.issuer, &self.resource]
            .iter()
            .flat_map(|part| [part.as_bytes(), b"\0"])
            .flatten()
            .copied()
            .collect()
    }
}

/// What is kept of a token.
#[derive(Clone, Serialize, Deserialize)]
pub struct StoredToken {
    pub access_token: String,
    /// When to stop using it, in milliseconds since the Unix epoch.
    pub renew_at_ms: u64,
}

/// The store, open on the journal's file.
pub struct TokenStore {
    connection: Mutex<Connection>,
    cipher: ChaCha20Poly1305,
}

impl TokenStore {
    /// Opens the store in the journal at `path` (already created and migrated by the journal),
    /// sealing with `key`.
    pub fn open(path: &Path, key: &[u8; 32]) -> rusqlite::Result<TokenStore> {
        let connection = Connection::open(path)?;
        connection.busy_timeout(std::time::Duration::from_secs(5))?;
        Ok(TokenStore { connection: Mutex::new(connection), cipher: ChaCha20Poly1305::new(Key::from_slice(key)) })
    }

    /// The token kept for `key`, if there is one that opens.
    pub fn load(&self, key: &TokenKey) -> Option<StoredToken> {
        let sealed: Vec<u8> = self
            .connection
            .locked()
            .query_row(
                "SELECT sealed FROM upstream_tokens WHERE identity = ?1 AND mcp_server = ?2 AND issuer = ?3 AND resource = ?4",
                params![key.identity, key.server, key.issuer, key.resource],
                |row| row.get(0),
            )
            .optional()
            .ok()??;
        if sealed.len() < NONCE_BYTES {
            return None;
        }
        let (nonce, ciphertext) = sealed.split_at(NONCE_BYTES);
        let binding = key.binding();
        let plain = self.cipher.decrypt(Nonce::from_slice(nonce), Payload { msg: ciphertext, aad: &binding }).ok()?;
        serde_json::from_slice(&plain).ok()
    }

    /// Keeps `token` for `key`, over what was kept before. A failure is logged (without the
    /// token) and the token stays in memory only.
    pub fn save(&self, key: &TokenKey, token: &StoredToken) {
        let Ok(plain) = serde_json::to_vec(token) else { return };
        let nonce = ChaCha20Poly1305::generate_nonce(&mut OsRng);
        let binding = key.binding();
        let Ok(ciphertext) = self.cipher.encrypt(&nonce, Payload { msg: &plain, aad: &binding }) else { return };
        let mut sealed = nonce.to_vec();
        sealed.extend_from_slice(&ciphertext);
        let written = self.connection.locked().execute(
            "INSERT OR REPLACE INTO upstream_tokens (identity, mcp_server, issuer, resource, sealed, updated_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![key.identity, key.server, key.issuer, key.resource, sealed, now_ms() as i64],
        );
        if let Err(err) = written {
            tracing::warn!(server = %key.server, "cannot store an upstream token; it is kept in memory only: {err}");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn key(server: &str) -> TokenKey {
        TokenKey {
            identity: "hangar".into(),
            server: server.into(),
            issuer: "http://i".into(),
            resource: "http://r".into(),
        }
    }

    #[test]
    fn a_token_is_kept_sealed_and_opens_only_for_its_row_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.sqlite");
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "CREATE TABLE upstream_tokens (identity TEXT, mcp_server TEXT, issuer TEXT, resource TEXT,
                 sealed BLOB, updated_at_ms INTEGER, PRIMARY KEY (identity, mcp_server, issuer, resource))",
            )
            .unwrap();
        let store = TokenStore::open(&path, &[7; 32]).unwrap();
        store.save(&key("a"), &StoredToken { access_token: "tok-secret-bytes".into(), renew_at_ms: 5 });
        assert_eq!(store.load(&key("a")).unwrap().access_token, "tok-secret-bytes");
        assert!(store.load(&key("b")).is_none());
        // Moved to another row, the sealed value does not open there.
        store.connection.locked().execute_batch("UPDATE upstream_tokens SET mcp_server = 'b'").unwrap();
        assert!(store.load(&key("b")).is_none());
        store.connection.locked().execute_batch("UPDATE upstream_tokens SET mcp_server = 'a'").unwrap();
        // Another key opens nothing.
        assert!(TokenStore::open(&path, &[8; 32]).unwrap().load(&key("a")).is_none());
        drop(store);
        let bytes = std::fs::read(&path).unwrap();
        assert!(!bytes.windows(16).any(|w| w == b"tok-secret-bytes"));
    }
}
