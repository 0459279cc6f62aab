//! The keys that seal the upstream credentials the hangar stores, and the sealing itself.
//!
//! A key file holds one key per line: 32 random bytes in base64. The first key seals; every key
//! opens, so a key is rotated by putting a new line first (what the old one sealed is sealed
//! again under the new one, see [`Keyring::needs_resealing`]) and then dropping the old line.
//! A key is named by its id, the first 8 bytes of its SHA-256 in hex, which is stored beside
//! what it sealed: never the key.
//!
//! Sealing is XChaCha20-Poly1305 with a random 24-byte nonce, and the associated data is what
//! the sealed value is stored under (identity, server, issuer, resource). So a sealed value moved
//! to another row, another identity's included, does not open: a row is its own owner's only.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use sha2::{Digest, Sha256};

/// A key's length in bytes.
pub const KEY_BYTES: usize = 32;
/// The most keys one file may hold.
pub const MAX_KEYS: usize = 16;
const NONCE_BYTES: usize = 24;

/// Why a key file's text is not a keyring.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyringError {
    #[error("the key file holds no key: write 32 random bytes in base64 (`head -c 32 /dev/urandom | base64`)")]
    Empty,
    #[error("line {line} of the key file is not base64")]
    NotBase64 { line: usize },
    #[error("line {line} of the key file is {found} bytes, not {KEY_BYTES}")]
    WrongLength { line: usize, found: usize },
    #[error("the key file holds more than {MAX_KEYS} keys")]
    TooMany,
}

/// Why a sealed value did not open.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("it was sealed with key {0}, which the key file no longer holds")]
    UnknownKey(String),
    #[error("it does not open under its key: damaged, or not stored where it was sealed")]
    Damaged,
}

/// The keys, the sealing one first.
pub struct Keyring {
    keys: Vec<(String, XChaCha20Poly1305)>,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The ids only: never a key.
        f.debug_list().entries(self.keys.iter().map(|(id, _)| id)).finish()
    }
}

/// A sealed value as stored: the id of the key that sealed it, and nonce + ciphertext.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    pub key_id: String,
    pub bytes: Vec<u8>,
}

impl Keyring {
    /// The keyring a key file's text holds (blank lines and `#` comments ignored).
    pub fn parse(text: &str) -> Result<Keyring, KeyringError> {
        let mut keys = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let number = index + 1;
            let bytes = STANDARD.decode(line).map_err(|_| KeyringError::NotBase64 { line: number })?;
            let key: [u8; KEY_BYTES] = bytes
                .as_slice()
                .try_into()
                .map_err(|_| KeyringError::WrongLength { line: number, found: bytes.len() })?;
            if keys.len() == MAX_KEYS {
                return Err(KeyringError::TooMany);
            }
            keys.push((key_id(&key), XChaCha20Poly1305::new(&key.into())));
        }
        if keys.is_empty() {
            return Err(KeyringError::Empty);
        }
        Ok(Keyring { keys })
    }

    /// A new key file's text: one fresh key from the OS's randomness.
    pub fn generate() -> String {
        let key = XChaCha20Poly1305::generate_key(&mut OsRng);
        format!("{}\n", STANDARD.encode(key))
    }

    /// The id of the sealing key.
    pub fn sealing_id(&self) -> &str {
        &self.keys[0].0
    }

    /// `plaintext` sealed under the first key, bound to `place` (where it is stored).
    pub fn seal(&self, place: &[u8], plaintext: &[u8]) -> Sealed {
        let (id, cipher) = &self.keys[0];
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        // Encryption of a buffer this size cannot fail (the AEAD's only error is a length overflow).
        let ciphertext = cipher.encrypt(&nonce, Payload { msg: plaintext, aad: place }).unwrap_or_default();
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&ciphertext);
        Sealed { key_id: id.clone(), bytes }
    }

    /// What `sealed` holds, if it was sealed at `place` under a key this ring holds.
    pub fn open(&self, place: &[u8], sealed: &Sealed) -> Result<Vec<u8>, OpenError> {
        let cipher = self
            .keys
            .iter()
            .find(|(id, _)| *id == sealed.key_id)
            .map(|(_, cipher)| cipher)
            .ok_or_else(|| OpenError::UnknownKey(sealed.key_id.clone()))?;
        if sealed.bytes.len() < NONCE_BYTES {
            return Err(OpenError::Damaged);
        }
        let (nonce, ciphertext) = sealed.bytes.split_at(NONCE_BYTES);
        cipher
            .decrypt(XNonce::from_slice(nonce), Payload { msg: ciphertext, aad: place })
            .map_err(|_| OpenError::Damaged)
    }

    /// Whether `sealed` was sealed under a key other than the sealing one (that this ring still
    /// holds): it is to be sealed again, so the old key can be dropped.
    pub fn needs_resealing(&self, sealed: &Sealed) -> bool {
        sealed.key_id != self.keys[0].0 && self.keys.iter().any(|(id, _)| *id == sealed.key_id)
    }
}

fn key_id(key: &[u8; KEY_BYTES]) -> String {
    Sha256::digest(key).iter().take(8).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(lines: &[&str]) -> Keyring {
        Keyring::parse(&lines.join("\n")).unwrap()
    }

    #[test]
    fn a_sealed_value_opens_only_where_it_was_sealed() {
        let keys = Keyring::generate();
        let ring = ring(&[keys.trim()]);
        let sealed = ring.seal(b"alice\0linear", b"the token");
        assert!(!sealed.bytes.windows(9).any(|w| w == b"the token"), "the plaintext is not in the sealed bytes");
        assert_eq!(ring.open(b"alice\0linear", &sealed).unwrap(), b"the token");
        assert_eq!(ring.open(b"bob\0linear", &sealed), Err(OpenError::Damaged), "moved to bob's row, it does not open");
        let mut flipped = sealed.clone();
        let last = flipped.bytes.len() - 1;
        flipped.bytes[last] ^= 1;
        assert_eq!(ring.open(b"alice\0linear", &flipped), Err(OpenError::Damaged));
    }

    #[test]
    fn a_rotated_ring_opens_the_old_keys_seals_and_seals_with_the_new() {
        let (old, new) = (Keyring::generate(), Keyring::generate());
        let before = ring(&[old.trim()]);
        let sealed = before.seal(b"p", b"v");
        let after = ring(&[new.trim(), old.trim()]);
        assert!(after.needs_resealing(&sealed));
        assert_eq!(after.open(b"p", &sealed).unwrap(), b"v");
        let again = after.seal(b"p", b"v");
        assert_eq!(again.key_id, after.sealing_id());
        assert!(!after.needs_resealing(&again));
        let dropped = ring(&[new.trim()]);
        assert_eq!(dropped.open(b"p", &sealed), Err(OpenError::UnknownKey(sealed.key_id.clone())));
        assert!(!dropped.needs_resealing(&sealed), "a key no longer held cannot be resealed from");
    }

    #[test]
    fn a_bad_key_file_is_refused_with_its_line() {
        assert_eq!(Keyring::parse("").unwrap_err(), KeyringError::Empty);
        assert_eq!(Keyring::parse("# only a comment\n\n").unwrap_err(), KeyringError::Empty);
        assert_eq!(Keyring::parse("not base64!").unwrap_err(), KeyringError::NotBase64 { line: 1 });
        assert_eq!(Keyring::parse("\naGVsbG8=").unwrap_err(), KeyringError::WrongLength { line: 2, found: 5 });
        let many = (0..=MAX_KEYS).map(|_| Keyring::generate()).collect::<String>();
        assert_eq!(Keyring::parse(&many).unwrap_err(), KeyringError::TooMany);
    }

    #[test]
    fn its_debug_shows_ids_never_keys() {
        let text = Keyring::generate();
        let ring = ring(&[text.trim()]);
        let shown = format!("{ring:?}");
        assert!(shown.contains(ring.sealing_id()));
        assert!(!shown.contains(text.trim()));
    }
}
