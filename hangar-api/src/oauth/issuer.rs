//! The authorization server as the hangar knows it: its metadata, discovered (RFC 8414, then
//! OpenID Connect discovery), and its signing keys, fetched from its `jwks_uri` and cached.
//!
//! The keys are fetched again on a timer ([`keep_fresh`]): every `auth.oauth.jwks_refresh_s`,
//! sooner when the key set's answer says so (`Cache-Control: max-age`, `no-cache`, `no-store`),
//! but never more often than every [`MIN_REFRESH`], so an authorization server cannot make the
//! hangar hammer it. A fetched set replaces the cached one whole: a key the issuer stopped
//! publishing is no longer trusted, and a token it checked before is checked again (and refused;
//! [`Issuer::holds`]). A key published unchanged keeps its identity, so tokens it checked stay
//! cached. An unknown `kid` also makes the keys be fetched again, at most once per
//! [`REFETCH_INTERVAL`], so a flood of forged tokens cannot turn the hangar into a JWKS hammer;
//! while the authorization server is down (or answers with something that is not a key set) the
//! cached keys keep working.

use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

use hangar_core::sync::UnpoisonedRw;
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;
use serde_json::Value;

/// The least time between two fetches of the keys (or two discovery attempts).
const REFETCH_INTERVAL: Duration = Duration::from_secs(10);
/// The least time between two timed fetches, whatever the key set's `Cache-Control` says.
pub const MIN_REFRESH: Duration = Duration::from_secs(10);
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
    /// The key as published, to tell it unchanged in the next fetch.
    published: Value,
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
    /// The `max-age` the last key set fetched came with (`no-cache`, `no-store`: zero).
    max_age: Option<Duration>,
}

pub struct Issuer {
    configured: String,
    /// `auth.oauth.jwks_refresh_s`.
    refresh_every: Duration,
    http: reqwest::Client,
    known: RwLock<Known>,
    /// One fetch at a time; others wait for its outcome.
    fetching: tokio::sync::Mutex<()>,
}

impl Issuer {
    /// Fails only if no HTTP client can be made (no TLS roots could be loaded, say).
    pub fn new(configured: String, refresh_every: Duration) -> Result<Issuer, reqwest::Error> {
        let http =
            reqwest::Client::builder().timeout(FETCH_TIMEOUT).redirect(reqwest::redirect::Policy::none()).build()?;
        Ok(Issuer {
            configured,
            refresh_every,
            http,
            known: RwLock::new(Known::default()),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    /// How long after the last fetch the next timed one is due.
    fn refresh_interval(&self) -> Duration {
        next_refresh(self.refresh_every, self.read().max_age)
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
            let (set, max_age): (Value, _) = self.fetch_json_aged(&jwks_uri).await?;
            if !set.get("keys").is_some_and(Value::is_array) {
                return Err(format!("{jwks_uri} is not a key set (no `keys` array)"));
            }
            Ok((jwks_uri, usable_keys(&set), max_age))
        }
        .await;
        match outcome {
            Ok((jwks_uri, fetched, max_age)) => {
                let mut known = self.write();
                // A key published unchanged stays the same key: what it checked stays checked.
                let keys: Vec<Arc<Key>> = fetched
                    .into_iter()
                    .map(|key| {
                        let same = known.keys.iter().find(|old| old.kid == key.kid && old.published == key.published);
                        same.cloned().unwrap_or(key)
                    })
                    .collect();
                let dropped = known.keys.iter().filter(|old| !keys.iter().any(|new| Arc::ptr_eq(old, new))).count();
                if keys.is_empty() {
                    tracing::warn!(issuer = %self.configured, %jwks_uri, "the authorization server publishes no usable signing key: every token is refused");
                } else if dropped > 0 || known.keys.len() != keys.len() {
                    tracing::info!(issuer = %self.configured, keys = keys.len(), dropped, "fetched the authorization server's signing keys");
                } else {
                    tracing::debug!(issuer = %self.configured, keys = keys.len(), "the authorization server's signing keys are unchanged");
                }
                known.keys = keys;
                known.max_age = max_age;
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
        self.fetch_json_aged(url).await.map(|(document, _)| document)
    }

    /// The JSON document at `url`, and the `max-age` its answer's `Cache-Control` gives it.
    async fn fetch_json_aged<T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
    ) -> Result<(T, Option<Duration>), String> {
        let mut response = self.http.get(url).send().await.map_err(|e| format!("{url}: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("{url}: HTTP {}", response.status().as_u16()));
        }
        let max_age = response
            .headers()
            .get_all(reqwest::header::CACHE_CONTROL)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .filter_map(max_age)
            .min();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| format!("{url}: {e}"))? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(format!("{url}: larger than {MAX_DOCUMENT_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        let document = serde_json::from_slice(&body).map_err(|e| format!("{url}: not the expected JSON: {e}"))?;
        Ok((document, max_age))
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
        self.known.reading()
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Known> {
        self.known.writing()
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
            Some(Arc::new(Key { kid: jwk.common.key_id.clone(), alg, decoding, fits, published: value.clone() }))
        })
        .collect()
}

/// Fetches `issuer`'s keys now, then again whenever they are due ([`next_refresh`] after the
/// last fetch, timed or not), for as long as anything else holds the issuer: a reload that
/// replaces `auth.oauth` drops it, and this ends at its next turn.
/// Each fetch holds the same lock as [`Issuer::key`]'s, so a token that comes during the first
/// waits for its outcome instead of finding the attempt just made and no keys (503).
pub async fn keep_fresh(issuer: Weak<Issuer>) {
    loop {
        let due = {
            let Some(issuer) = issuer.upgrade() else { return };
            let last = issuer.read().last_attempt;
            last.map(|at| at + issuer.refresh_interval())
        };
        if let Some(due) = due {
            tokio::time::sleep_until(due.into()).await;
        }
        let Some(issuer) = issuer.upgrade() else { return };
        let _one = issuer.fetching.lock().await;
        // A fetch for an unknown `kid` may have come meanwhile: then this turn is not due yet.
        let still_due = issuer.read().last_attempt.is_none_or(|at| at.elapsed() >= issuer.refresh_interval());
        if still_due {
            issuer.refresh().await;
        }
    }
}

/// How long after a fetch the next timed one comes: `every` (`auth.oauth.jwks_refresh_s`), or
/// the key set's `max_age` when that is sooner, never sooner than [`MIN_REFRESH`] (unless
/// `every` itself is).
fn next_refresh(every: Duration, max_age: Option<Duration>) -> Duration {
    match max_age {
        Some(max_age) if max_age < every => max_age.max(MIN_REFRESH).min(every),
        _ => every,
    }
}

/// What a `Cache-Control` value says of how long the answer stays fresh: its `max-age`
/// (`no-cache` and `no-store`: zero); `None` if it says neither.
fn max_age(cache_control: &str) -> Option<Duration> {
    cache_control
        .split(',')
        .filter_map(|directive| {
            let directive = directive.trim();
            if directive.eq_ignore_ascii_case("no-cache") || directive.eq_ignore_ascii_case("no-store") {
                return Some(Duration::ZERO);
            }
            let (name, seconds) = directive.split_once('=')?;
            if !name.trim().eq_ignore_ascii_case("max-age") {
                return None;
            }
            seconds.trim().trim_matches('"').parse::<u64>().ok().map(Duration::from_secs)
        })
        .min()
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

    #[test]
    fn cache_control_can_only_bring_the_next_fetch_closer_and_never_under_the_floor() {
        assert_eq!(max_age("public, max-age=60"), Some(Duration::from_secs(60)));
        assert_eq!(max_age("Max-Age = \"7\" , private"), Some(Duration::from_secs(7)));
        assert_eq!(max_age("no-store"), Some(Duration::ZERO));
        assert_eq!(max_age("max-age=600, no-cache"), Some(Duration::ZERO));
        assert_eq!(max_age("public"), None);
        assert_eq!(max_age("max-age=soon"), None);
        let every = Duration::from_secs(300);
        assert_eq!(next_refresh(every, None), every);
        assert_eq!(next_refresh(every, Some(Duration::from_secs(3600))), every, "never later than configured");
        assert_eq!(next_refresh(every, Some(Duration::from_secs(60))), Duration::from_secs(60));
        assert_eq!(next_refresh(every, Some(Duration::ZERO)), MIN_REFRESH, "never under the floor");
        let short = Duration::from_secs(2);
        assert_eq!(next_refresh(short, Some(Duration::ZERO)), short, "the configured time stands");
    }
}
