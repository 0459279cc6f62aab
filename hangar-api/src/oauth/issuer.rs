//! The authorization server as the hangar knows it: its metadata, discovered (RFC 8414, then
//! OpenID Connect discovery), and its signing keys, fetched from its `jwks_uri` and cached.
//!
//! An unknown `kid` makes the keys be fetched again, at most once per [`REFETCH_INTERVAL`], so a
//! flood of forged tokens cannot turn the hangar into a JWKS hammer; while the authorization
//! server is down the cached keys keep working.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;
use serde_json::Value;

/// The least time between two fetches of the keys (or two discovery attempts).
const REFETCH_INTERVAL: Duration = Duration::from_secs(10);
/// Before the first discovery succeeded, attempts are closer together, so the hangar recovers
/// soon after the authorization server comes up.
const DISCOVERY_RETRY: Duration = Duration::from_secs(2);
/// Each request to the authorization server.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest metadata or key set read.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// Why no key can check a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyLookup {
    /// The issuer publishes no key by that id (fit for the token's algorithm).
    Unknown,
    /// The issuer's metadata or keys could not be fetched, and none are cached.
    Unavailable,
}

/// A public key the issuer publishes.
pub struct Key {
    kid: Option<String>,
    /// The key's own `alg`, when it names one: a token must then use exactly that.
    alg: Option<Algorithm>,
    pub decoding: DecodingKey,
    /// Which token algorithms this kind of key can check.
    fits: fn(Algorithm) -> bool,
}

#[derive(Debug, Clone, Deserialize)]
struct Metadata {
    issuer: String,
    jwks_uri: String,
}

#[derive(Default)]
struct Known {
    /// The `issuer` the metadata names (what tokens carry as `iss`).
    issuer: Option<Arc<str>>,
    jwks_uri: Option<String>,
    keys: Vec<Arc<Key>>,
    /// When the last fetch started (successful or not).
    last_attempt: Option<Instant>,
}

pub struct Issuer {
    configured: String,
    http: reqwest::Client,
    known: RwLock<Known>,
    /// One fetch at a time; others wait for its outcome.
    fetching: tokio::sync::Mutex<()>,
}

impl Issuer {
    /// Fails only if no HTTP client can be made (no TLS roots could be loaded, say).
    pub fn new(configured: String) -> Result<Issuer, reqwest::Error> {
        let http =
            reqwest::Client::builder().timeout(FETCH_TIMEOUT).redirect(reqwest::redirect::Policy::none()).build()?;
        Ok(Issuer { configured, http, known: RwLock::new(Known::default()), fetching: tokio::sync::Mutex::new(()) })
    }

    /// The key that checks a token signed with `alg` under `kid`; fetches the keys again (rate
    /// limited) when none fits.
    pub async fn key(&self, kid: Option<&str>, alg: Algorithm) -> Result<(Arc<Key>, Arc<str>), KeyLookup> {
        if let Some(found) = self.cached(kid, alg) {
            return Ok(found);
        }
        let _one = self.fetching.lock().await;
        // Another request may have fetched meanwhile.
        if let Some(found) = self.cached(kid, alg) {
            return Ok(found);
        }
        let due = {
            let known = self.read();
            let interval = if known.issuer.is_some() { REFETCH_INTERVAL } else { DISCOVERY_RETRY };
            known.last_attempt.is_none_or(|at| at.elapsed() >= interval)
        };
        if due {
            self.refresh().await;
        }
        self.cached(kid, alg)
            .ok_or_else(|| if self.read().issuer.is_some() { KeyLookup::Unknown } else { KeyLookup::Unavailable })
    }

    /// The first fetch, as one of [`Issuer::key`]'s: a token that comes meanwhile waits for its
    /// outcome instead of finding the attempt just made and no keys (503).
    pub async fn warm_up(&self) {
        let _one = self.fetching.lock().await;
        self.refresh().await;
    }

    /// Discovers the metadata (if not yet known) and fetches the keys; on failure keeps what is
    /// cached and logs why (never a token: nothing here sees one).
    async fn refresh(&self) {
        self.write().last_attempt = Some(Instant::now());
        let outcome = async {
            let cached_uri = self.read().jwks_uri.clone();
            let jwks_uri = match cached_uri {
                Some(uri) => uri,
                None => {
                    let metadata = self.discover().await?;
                    let mut known = self.write();
                    known.issuer = Some(metadata.issuer.into());
                    known.jwks_uri = Some(metadata.jwks_uri.clone());
                    metadata.jwks_uri
                }
            };
            let set: Value = self.fetch_json(&jwks_uri).await?;
            let keys = usable_keys(&set);
            if keys.is_empty() {
                return Err(format!("{jwks_uri} publishes no usable signing key"));
            }
            Ok(keys)
        }
        .await;
        match outcome {
            Ok(keys) => {
                tracing::info!(issuer = %self.configured, keys = keys.len(), "fetched the authorization server's signing keys");
                self.write().keys = keys;
            }
            Err(why) => {
                tracing::warn!(issuer = %self.configured, error = %why, "cannot fetch the authorization server's metadata or keys; cached keys (if any) stay in use")
            }
        }
    }

    /// RFC 8414 metadata, else OpenID Connect discovery; the `issuer` it names must be the one
    /// configured (RFC 8414 §3.3), and the `jwks_uri` https unless the issuer is plain http
    /// (allowed on loopback only).
    async fn discover(&self) -> Result<Metadata, String> {
        let base = self.configured.trim_end_matches('/');
        let url = url::Url::parse(base).map_err(|e| format!("the issuer is not a URL: {e}"))?;
        let origin = url.origin().ascii_serialization();
        let path = url.path().trim_end_matches('/');
        let candidates = [
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{base}/.well-known/openid-configuration"),
        ];
        let mut last = String::new();
        for candidate in &candidates {
            match self.fetch_json::<Metadata>(candidate).await {
                Ok(metadata) => {
                    if metadata.issuer.trim_end_matches('/') != base {
                        return Err(format!("{candidate} names another issuer"));
                    }
                    let secure = metadata.jwks_uri.starts_with("https://")
                        || (url.scheme() == "http" && metadata.jwks_uri.starts_with("http://"));
                    if !secure {
                        return Err(format!("{candidate}: jwks_uri is not https"));
                    }
                    return Ok(metadata);
                }
                Err(why) => last = why,
            }
        }
        Err(last)
    }

    async fn fetch_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, String> {
        let mut response = self.http.get(url).send().await.map_err(|e| format!("{url}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("{url}: HTTP {}", response.status().as_u16()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| format!("{url}: {e}"))? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(format!("{url}: larger than {MAX_DOCUMENT_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| format!("{url}: not the expected JSON: {e}"))
    }

    fn cached(&self, kid: Option<&str>, alg: Algorithm) -> Option<(Arc<Key>, Arc<str>)> {
        let known = self.read();
        let issuer = known.issuer.clone()?;
        let fitting = |key: &&Arc<Key>| (key.fits)(alg) && key.alg.is_none_or(|own| own == alg);
        let key = match kid {
            Some(kid) => known.keys.iter().filter(fitting).find(|key| key.kid.as_deref() == Some(kid)),
            // No `kid`: only an issuer with a single fitting key leaves no doubt.
            None => {
                let mut fit = known.keys.iter().filter(fitting);
                fit.next().filter(|_| fit.next().is_none())
            }
        }?;
        Some((key.clone(), issuer))
    }

    /// `key` is still one of the issuer's keys as last fetched (not rotated away since).
    pub fn holds(&self, key: &Arc<Key>) -> bool {
        self.read().keys.iter().any(|held| Arc::ptr_eq(held, key))
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Known> {
        self.known.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Known> {
        self.known.write().unwrap_or_else(|p| p.into_inner())
    }
}

/// The signing keys of a JWKS that can check tokens: public asymmetric keys (RSA, EC, OKP) not
/// marked for encryption. A key the set holds in another shape is skipped, not fatal.
fn usable_keys(set: &Value) -> Vec<Arc<Key>> {
    let Some(keys) = set.get("keys").and_then(Value::as_array) else {
        return Vec::new();
    };
    keys.iter()
        .filter_map(|value| {
            let jwk: Jwk = serde_json::from_value(value.clone()).ok()?;
            if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
                return None;
            }
            let fits: fn(Algorithm) -> bool = match &jwk.algorithm {
                AlgorithmParameters::RSA(_) => |alg| {
                    matches!(
                        alg,
                        Algorithm::RS256
                            | Algorithm::RS384
                            | Algorithm::RS512
                            | Algorithm::PS256
                            | Algorithm::PS384
                            | Algorithm::PS512
                    )
                },
                AlgorithmParameters::EllipticCurve(_) => |alg| matches!(alg, Algorithm::ES256 | Algorithm::ES384),
                AlgorithmParameters::OctetKeyPair(_) => |alg| alg == Algorithm::EdDSA,
                // A shared secret never checks a token here: HS* is refused.
                AlgorithmParameters::OctetKey(_) => return None,
            };
            let alg = match jwk.common.key_algorithm {
                Some(own) => Some(own.to_string().parse::<Algorithm>().ok()?),
                None => None,
            };
            let decoding = DecodingKey::from_jwk(&jwk).ok()?;
            Some(Arc::new(Key { kid: jwk.common.key_id.clone(), alg, decoding, fits }))
        })
        .collect()
}

/// Whether tokens signed with `alg` are accepted at all: asymmetric algorithms only.
pub fn asymmetric(alg: Algorithm) -> bool {
    !matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512)
}

/// The keys by id, for tests.
#[cfg(test)]
fn kids(keys: &[Arc<Key>]) -> std::collections::HashMap<Option<String>, Option<Algorithm>> {
    keys.iter().map(|key| (key.kid.clone(), key.alg)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_asymmetric_signing_keys_are_kept() {
        let set = serde_json::json!({"keys": [
            {"kty": "RSA", "kid": "r", "alg": "RS256", "use": "sig", "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw", "e": "AQAB"},
            {"kty": "oct", "kid": "h", "k": "c2VjcmV0"},
            {"kty": "RSA", "kid": "e", "use": "enc", "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw", "e": "AQAB"},
            {"kty": "weird"}
        ]});
        let keys = usable_keys(&set);
        assert_eq!(kids(&keys), std::collections::HashMap::from([(Some("r".to_owned()), Some(Algorithm::RS256))]));
        assert!(!(keys[0].fits)(Algorithm::ES256));
        assert!(usable_keys(&serde_json::json!({"keys": "no"})).is_empty());
        assert!(!asymmetric(Algorithm::HS256) && asymmetric(Algorithm::ES256));
    }
}
