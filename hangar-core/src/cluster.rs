//! `cluster:`: this hangar is one of a fleet behind one Service (round robin, no affinity).
//!
//! The ids a client keeps between requests (legacy `Mcp-Session-Id`s, task ids) end in an owner
//! tag: `.` and the owner's `advertise` URL sealed with XChaCha20-Poly1305 (random nonce) under a
//! key derived from the fleet's shared secret (HKDF-SHA256), unpadded base64url. Another hangar
//! opens the tag and forwards the request to that URL. A tag that does not open is no owner at
//! all: the id is unknown where it landed, and nothing is forwarded, so a client cannot make a
//! hangar call an address of its choosing.
//!
//! ```yaml
//! cluster:
//!   advertise: http://${POD_IP}:8000       # how the other hangars reach this one's API
//!   secret_file: /etc/hangar/cluster/secret  # the same in every hangar, 32 bytes or more
//! ```

use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hkdf::Hkdf;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::key_error::KeyError;

/// What separates an id from its owner tag (not in base64url's alphabet).
pub const TAG_SEPARATOR: char = '.';
/// The header a forwarded request carries (the forwarding hangar's `advertise` URL): a request
/// with it is never forwarded again.
pub const HOP_HEADER: &str = "hangar-forwarded-by";
/// The shortest shared secret accepted.
pub const MIN_SECRET_BYTES: usize = 32;
/// The largest secret file read.
const MAX_SECRET_BYTES: u64 = 4096;
/// The longest tag opened (an advertise URL is short); longer ones are unknown unread.
const MAX_TAG_CHARS: usize = 512;
const NONCE_BYTES: usize = 24;
const AEAD_TAG_BYTES: usize = 16;
/// Binds a sealed tag to its use, so nothing else sealed under the key opens as one.
const AAD: &[u8] = b"hangar owner tag v1";
const HKDF_SALT: &[u8] = b"hangar cluster";
const HKDF_INFO: &[u8] = b"owner tag key v1";

/// The `cluster:` block as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// This hangar's API as the others reach it; `${VAR}` is expanded from the environment (the
    /// ConfigMap is shared by every pod), in this key only. An http(s) origin such as
    /// `http://${POD_IP}:8000`.
    #[schemars(regex(pattern = r"\S"))]
    pub advertise: String,
    /// The path of a file holding the fleet's shared secret, the same in every hangar (text,
    /// at least 32 bytes; surrounding whitespace ignored).
    #[schemars(length(min = 1))]
    pub secret_file: PathBuf,
}

impl ClusterConfig {
    /// What can be checked without the environment: the key is set.
    pub fn check(&self) -> Result<(), KeyError> {
        if self.advertise.trim().is_empty() {
            return Err(key_error(
                "cluster.advertise",
                "expected this hangar's API URL, such as http://${POD_IP}:8000",
            ));
        }
        if self.secret_file.as_os_str().is_empty() {
            return Err(key_error("cluster.secret_file", "expected the path of the fleet's shared secret"));
        }
        Ok(())
    }

    /// `advertise` with `${VAR}`s expanded by `env`, checked to be an http(s) origin, written
    /// without a trailing slash.
    pub fn advertise_url(&self, env: impl Fn(&str) -> Option<String>) -> Result<String, KeyError> {
        let expanded = expand(&self.advertise, env).map_err(|message| key_error("cluster.advertise", &message))?;
        origin(&expanded).map_err(|message| key_error("cluster.advertise", &message))
    }
}

/// Who an id belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// No tag: an id of a hangar outside any fleet.
    Untagged,
    /// This hangar.
    Here,
    /// Another hangar of the fleet, reached at this URL.
    Elsewhere(String),
    /// A tag that does not open under the fleet's key: an unknown id, never forwarded.
    Unknown,
}

/// This hangar's place in the fleet: its URL and the key every hangar shares.
pub struct Cluster {
    advertise: String,
    cipher: XChaCha20Poly1305,
    /// `advertise` sealed once: every id this hangar mints carries it.
    own_tag: String,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Cluster").field("advertise", &self.advertise).finish_non_exhaustive()
    }
}

impl Cluster {
    /// The block made ready: `advertise` expanded, the secret read (errors name the key).
    pub fn open(config: &ClusterConfig, env: impl Fn(&str) -> Option<String>) -> Result<Cluster, KeyError> {
        config.check()?;
        let advertise = config.advertise_url(env)?;
        let secret = read_secret(&config.secret_file)?;
        Cluster::with_secret(advertise, secret.as_bytes()).map_err(|message| key_error("cluster.secret_file", &message))
    }

    /// A cluster member at `advertise` (an origin, as `advertise_url` returns it) under `secret`.
    pub fn with_secret(advertise: String, secret: &[u8]) -> Result<Cluster, String> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(format!("the secret must be at least {MIN_SECRET_BYTES} bytes, it has {}", secret.len()));
        }
        let mut key = [0u8; 32];
        Hkdf::<Sha256>::new(Some(HKDF_SALT), secret)
            .expand(HKDF_INFO, &mut key)
            .map_err(|_| "the key cannot be derived".to_owned())?;
        let cipher = XChaCha20Poly1305::new(&key.into());
        let own_tag = seal(&cipher, &advertise)?;
        Ok(Cluster { advertise, cipher, own_tag })
    }

    pub fn advertise(&self) -> &str {
        &self.advertise
    }

    /// `id` with this hangar's owner tag.
    pub fn tagged(&self, id: &str) -> String {
        format!("{id}{TAG_SEPARATOR}{}", self.own_tag)
    }

    /// Who holds the state `id` names.
    pub fn owner_of(&self, id: &str) -> Owner {
        let Some((_, tag)) = split_tag(id) else { return Owner::Untagged };
        match self.open_tag(tag) {
            Some(url) if url == self.advertise => Owner::Here,
            Some(url) => Owner::Elsewhere(url),
            None => Owner::Unknown,
        }
    }

    fn open_tag(&self, tag: &str) -> Option<String> {
        if tag.len() > MAX_TAG_CHARS {
            return None;
        }
        let sealed = URL_SAFE_NO_PAD.decode(tag).ok()?;
        if sealed.len() < NONCE_BYTES + AEAD_TAG_BYTES {
            return None;
        }
        let (nonce, ciphertext) = sealed.split_at(NONCE_BYTES);
        let plain = self.cipher.decrypt(XNonce::from_slice(nonce), Payload { msg: ciphertext, aad: AAD }).ok()?;
        let url = String::from_utf8(plain).ok()?;
        // Sealed by a member of the fleet, and still only ever an http(s) origin.
        origin(&url).ok().filter(|checked| *checked == url)
    }
}

/// The id and its owner tag, if it has one.
pub fn split_tag(id: &str) -> Option<(&str, &str)> {
    id.rsplit_once(TAG_SEPARATOR).filter(|(bare, tag)| !bare.is_empty() && is_tag_text(tag))
}

/// Whether `tag` is written in the tag's alphabet (unpadded base64url).
pub fn is_tag_text(tag: &str) -> bool {
    !tag.is_empty()
        && tag.len() <= MAX_TAG_CHARS
        && tag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn seal(cipher: &XChaCha20Poly1305, url: &str) -> Result<String, String> {
    let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
    let sealed = cipher
        .encrypt(&nonce, Payload { msg: url.as_bytes(), aad: AAD })
        .map_err(|_| "the owner tag cannot be sealed".to_owned())?;
    let mut bytes = nonce.to_vec();
    bytes.extend_from_slice(&sealed);
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

fn read_secret(path: &Path) -> Result<String, KeyError> {
    // The error names the file and what is wrong with it, never what it holds.
    let text = crate::small_file::read_regular(path, MAX_SECRET_BYTES)
        .map_err(|err| key_error("cluster.secret_file", &format!("{}: {err}", path.display())))?;
    let secret = text.trim();
    if secret.len() < MIN_SECRET_BYTES {
        return Err(key_error(
            "cluster.secret_file",
            &format!(
                "{}: the secret must be at least {MIN_SECRET_BYTES} bytes, it has {}",
                path.display(),
                secret.len()
            ),
        ));
    }
    Ok(secret.to_owned())
}

/// `text` with every `${NAME}` replaced by `env(NAME)`; an unset or malformed one is an error.
fn expand(text: &str, env: impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or("a `${` is not closed by `}`")?;
        let name = &after[..end];
        let well_formed = name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !well_formed {
            return Err(format!("`${{{}}}` is not a variable name", crate::echo::bounded(name)));
        }
        let value =
            env(name).filter(|v| !v.is_empty()).ok_or_else(|| format!("the environment variable {name} is not set"))?;
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `text` as an http(s) origin (`scheme://host[:port]`), or why it is not one.
fn origin(text: &str) -> Result<String, String> {
    let url =
        url::Url::parse(text).map_err(|err| format!("expected an http(s) URL such as http://10.0.0.7:8000: {err}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("expected an http or https URL, not `{}:`", crate::echo::bounded(url.scheme())));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("the URL names no host".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("put no credentials in the URL".into());
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return Err("expected no path, query or fragment (the request's own path is appended)".into());
    }
    Ok(url.origin().ascii_serialization())
}

fn key_error(key: &str, message: &str) -> KeyError {
    KeyError { key: key.into(), message: message.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn member(url: &str) -> Cluster {
        Cluster::with_secret(url.into(), SECRET).unwrap()
    }

    #[test]
    fn a_tagged_id_names_its_owner_to_every_member() {
        let a = member("http://10.0.0.1:8000");
        let b = member("http://10.0.0.2:8000");
        let id = a.tagged("hgr1-2025-06-18-0123456789abcdef0123456789abcdef");
        assert_eq!(split_tag(&id).unwrap().0, "hgr1-2025-06-18-0123456789abcdef0123456789abcdef");
        assert_eq!(a.owner_of(&id), Owner::Here);
        assert_eq!(b.owner_of(&id), Owner::Elsewhere("http://10.0.0.1:8000".into()));
        assert_eq!(b.owner_of("0123456789abcdef"), Owner::Untagged);
        // The sealed tag reveals nothing of the URL.
        assert!(!id.contains("10.0.0.1"));
    }

    #[test]
    fn a_tampered_or_foreign_tag_is_unknown_never_an_owner() {
        let a = member("http://10.0.0.1:8000");
        let id = a.tagged("abc");
        let (bare, tag) = split_tag(&id).unwrap();
        let mut bytes = URL_SAFE_NO_PAD.decode(tag).unwrap();
        for at in [0, NONCE_BYTES, bytes.len() - 1] {
            bytes[at] ^= 1;
            let tampered = format!("{bare}.{}", URL_SAFE_NO_PAD.encode(&bytes));
            assert_eq!(a.owner_of(&tampered), Owner::Unknown, "byte {at}");
            bytes[at] ^= 1;
        }
        let other_fleet =
            Cluster::with_secret("http://10.0.0.9:8000".into(), b"another secret of thirty-two bytes!").unwrap();
        assert_eq!(a.owner_of(&other_fleet.tagged("abc")), Owner::Unknown);
        // A client's own "tag": the URL in the clear, or in plain base64url.
        let plain = URL_SAFE_NO_PAD.encode("http://169.254.169.254");
        for id in [format!("abc.{plain}"), "abc.AAAA".into(), "abc._-_-".into()] {
            assert_eq!(a.owner_of(&id), Owner::Unknown, "{id}");
        }
        // Not tag text: no tag at all (the id is simply unknown where it lands).
        let too_long = format!("abc.{}", "A".repeat(600));
        for id in ["abc.http://x", "abc.", ".AAAA", "abc.a=b", &too_long] {
            assert_eq!(a.owner_of(id), Owner::Untagged, "{id}");
        }
    }

    #[test]
    fn two_seals_differ_and_both_open() {
        let a = member("http://10.0.0.1:8000");
        let again = member("http://10.0.0.1:8000");
        assert_ne!(a.tagged("x"), again.tagged("x"), "a random nonce each time");
        assert_eq!(a.owner_of(&again.tagged("x")), Owner::Here);
    }

    #[test]
    fn a_short_secret_is_refused() {
        assert!(Cluster::with_secret("http://a:1".into(), &SECRET[..31]).is_err());
    }

    #[test]
    fn advertise_expands_the_environment_and_must_be_an_origin() {
        let config = |advertise: &str| ClusterConfig { advertise: advertise.into(), secret_file: "/s".into() };
        let env = |name: &str| (name == "POD_IP").then(|| "10.1.2.3".to_owned());
        assert_eq!(config("http://${POD_IP}:8000").advertise_url(env).unwrap(), "http://10.1.2.3:8000");
        assert_eq!(config("http://${POD_IP}:8000/").advertise_url(env).unwrap(), "http://10.1.2.3:8000");
        for bad in [
            "http://${NOPE}:8000",
            "http://${POD_IP:8000",
            "http://${1X}:8000",
            "ftp://${POD_IP}",
            "http://${POD_IP}:8000/mcp",
            "http://u:p@${POD_IP}:8000",
            "${POD_IP}",
        ] {
            let err = config(bad).advertise_url(env).unwrap_err();
            assert_eq!(err.key, "cluster.advertise", "{bad}");
        }
    }

    #[test]
    fn the_secret_file_is_read_checked_and_never_echoed() {
        let dir = std::env::temp_dir().join(format!("hangar-cluster-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good");
        std::fs::write(&good, "  0123456789abcdef0123456789abcdef\n").unwrap();
        let short = dir.join("short");
        std::fs::write(&short, "tooshort-secret-value").unwrap();
        let config = |file: &Path| ClusterConfig { advertise: "http://127.0.0.1:1".into(), secret_file: file.into() };
        let cluster = Cluster::open(&config(&good), |_| None).unwrap();
        assert_eq!(cluster.advertise(), "http://127.0.0.1:1");
        assert!(!format!("{cluster:?}").contains("0123456789abcdef"));
        let err = Cluster::open(&config(&short), |_| None).unwrap_err();
        assert_eq!(err.key, "cluster.secret_file");
        assert!(!err.message.contains("tooshort"), "{}", err.message);
        let err = Cluster::open(&config(&dir.join("missing")), |_| None).unwrap_err();
        assert_eq!(err.key, "cluster.secret_file");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
