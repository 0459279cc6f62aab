//! `credentials:`: how the hangar keeps the upstream tokens it stores.
//!
//! Tokens the hangar gets for upstreams are kept in the journal's SQLite file, each sealed
//! (ChaCha20-Poly1305) with the key in `key_file`, so that the file alone, a backup of it or a
//! copy of the state directory, gives none of them away. Without this block tokens live in the
//! supervisor's memory only, and a restart asks for new ones.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::key_error::KeyError;

/// `credentials:`: where the key that seals stored upstream tokens is.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CredentialsConfig {
    /// An absolute path to a file holding the 32-byte key as 64 hex digits (make one with
    /// `openssl rand -hex 32`; surrounding whitespace ignored). Read once, at start.
    pub key_file: PathBuf,
}

/// The bytes of a key file's text: 64 hex digits, surrounding whitespace ignored.
pub fn parse_key(text: &str) -> Option<[u8; 32]> {
    let hex = text.trim().as_bytes();
    if hex.len() != 64 || !hex.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let mut key = [0u8; 32];
    for (byte, pair) in key.iter_mut().zip(hex.chunks(2)) {
        let pair = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(key)
}

/// Refuses a relative `key_file`.
pub fn validate(credentials: &CredentialsConfig) -> Result<(), KeyError> {
    if !credentials.key_file.is_absolute() {
        return Err(KeyError {
            key: "credentials.key_file".into(),
            message: "expected an absolute path to the file holding the key".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_64_hex_digits() {
        let key = parse_key(&format!("{}\n", "0f".repeat(32))).expect("a key");
        assert_eq!(key, [0x0f; 32]);
        assert_eq!(parse_key(&"0f".repeat(31)), None);
        assert_eq!(parse_key(&"zz".repeat(32)), None);
        assert_eq!(parse_key(&"+f".repeat(32)), None);
    }
}
