//! Opaque access tokens, by introspection (RFC 7662): a bearer token that is not a JWS is POSTed
//! to `auth.oauth.introspection.endpoint`, as the hangar's client (HTTP Basic, the secret read
//! from `client_secret_file`), and must come back `active: true`. The answer's claims then go
//! through the checks a JWT's do, where it carries them (see [`super::OAuth`]).
//!
//! The same token sent many times at once is introspected once (the others wait for its
//! answer). Answers are cached by the token's SHA-256 (`cache::TokenCache`, the one token cache): an accepted token until its
//! `exp`, at most [`ACCEPTED_TTL`] (so a revoked token is refused within that time), a refused
//! one for [`REFUSED_TTL`]; an authorization server that cannot answer is not cached at all. At
//! most [`MAX_IN_FLIGHT`] requests go to it at once, and at most [`MAX_WAITING`] more wait, each
//! at most [`MAX_WAIT`]: past that a new token is refused at once with 503 and `Retry-After`
//! ([`Refusal::Busy`]), so a flood of made-up tokens builds no queue that valid ones wait behind
//! (a token accepted before is answered from the cache and never waits). What cannot be an
//! access token is refused before anyone is asked: a token longer than [`MAX_OPAQUE_BYTES`], one
//! with characters outside RFC 6750's `b64token`, and one shaped as a JWS ([`jws_shaped`]: it is
//! checked as a JWT, or refused, never introspected). An answer's `exp`, `nbf` and `iat` must
//! be numbers ([`super::numeric_dates`]).
//! Neither the token nor the secret is ever logged.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hangar_core::access::{Caller, IntrospectionConfig};
use hangar_core::sync::Unpoisoned;
use serde_json::{Map, Value};

use super::cache::{TokenCache, TokenDigest};
use super::{LEEWAY_S, Refusal};

/// How long an accepted token is trusted without asking again.
pub const ACCEPTED_TTL: Duration = Duration::from_secs(60);
/// How long a refused token is refused without asking again.
pub const REFUSED_TTL: Duration = Duration::from_secs(5);
/// The most tokens cached; past it, expired entries go, then everything.
const CACHE_CAPACITY: usize = 10_000;
/// Each request to the introspection endpoint.
const TIMEOUT: Duration = Duration::from_secs(5);
/// The largest introspection answer read.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Introspection requests in flight at once: a flood of made-up tokens (each one new to the
/// cache) waits here rather than hammering the authorization server.
const MAX_IN_FLIGHT: usize = 16;
/// Tokens waiting for one of the [`MAX_IN_FLIGHT`] slots; one more is refused at once (503).
pub const MAX_WAITING: usize = 32;
/// The longest a token waits for a slot before it is refused (503).
pub const MAX_WAIT: Duration = Duration::from_secs(2);
/// The longest opaque token sent to the authorization server.
pub const MAX_OPAQUE_BYTES: usize = 4096;

/// Opaque tokens: the introspection client and the cache of its decisions.
pub struct Opaque {
    client: Introspection,
    cache: TokenCache<Result<Caller, Refusal>>,
    /// Tokens being introspected now, each with the lock its other requests wait on: the same
    /// token sent many times at once is asked about once.
    asking: std::sync::Mutex<HashMap<TokenDigest, Arc<tokio::sync::Mutex<()>>>>,
}

impl Opaque {
    pub fn new(config: &IntrospectionConfig) -> Result<Opaque, reqwest::Error> {
        Ok(Opaque {
            client: Introspection::new(config)?,
            cache: TokenCache::with_capacity(CACHE_CAPACITY),
            asking: std::sync::Mutex::default(),
        })
    }

    /// The lock of `key`'s introspection (made if none is under way).
    fn asking(&self, key: TokenDigest) -> Arc<tokio::sync::Mutex<()>> {
        self.asking.locked().entry(key).or_default().clone()
    }

    /// The caller an opaque token names: introspected (or cached), its `iss`, `aud`, `exp` and
    /// `nbf` checked where the answer carries them, then `caller` (scopes, subject, profile).
    pub async fn authenticate(
        &self,
        token: &str,
        key: TokenDigest,
        issuer: &str,
        resources: &[&str],
        caller: impl Fn(&Map<String, Value>) -> Result<Caller, Refusal>,
    ) -> Result<Caller, Refusal> {
        if let Some(decided) = self.cache.get(&key, Instant::now()) {
            return decided;
        }
        if !b64token(token) {
            return Err(Refusal::InvalidToken("malformed"));
        }
        // One introspection per token at a time; those that waited find its answer cached.
        let lock = self.asking(key);
        let _one = lock.lock().await;
        // However this ends (a client that goes away drops it), the token is no longer asked about.
        let _done = Asked { asking: &self.asking, key, lock: &lock };
        if let Some(decided) = self.cache.get(&key, Instant::now()) {
            return decided;
        }
        let decide = |claims: &Map<String, Value>, now| {
            check_claims(claims, issuer, resources, now).and_then(|()| caller(claims))
        };
        self.introspect(token, key, decide).await
    }

    /// Asks the authorization server about `token`, has `decide` judge the answer's claims (at
    /// the Unix time given), and caches the decision (unless the server could not tell).
    async fn introspect(
        &self,
        token: &str,
        key: TokenDigest,
        decide: impl FnOnce(&Map<String, Value>, u64) -> Result<Caller, Refusal>,
    ) -> Result<Caller, Refusal> {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let (decided, ttl) = match self.client.introspect(token).await {
            Ok(claims) => {
                let decided = decide(&claims, now);
                let ttl = if decided.is_ok() { accepted_ttl(&claims, now) } else { REFUSED_TTL };
                (decided, ttl)
            }
            // The authorization server could not tell, or was not asked: ask again next time.
            Err(refusal @ (Refusal::IssuerUnavailable | Refusal::Busy)) => return Err(refusal),
            Err(refusal) => (Err(refusal), REFUSED_TTL),
        };
        let now = Instant::now();
        self.cache.insert(key, decided.clone(), now + ttl, now);
        decided
    }
}

/// Forgets a token's entry among those being asked about, when its introspection ends.
struct Asked<'a> {
    asking: &'a std::sync::Mutex<HashMap<TokenDigest, Arc<tokio::sync::Mutex<()>>>>,
    key: TokenDigest,
    /// Its lock: an entry made since (after an answer that was not cached) is not this one's.
    lock: &'a Arc<tokio::sync::Mutex<()>>,
}

impl Drop for Asked<'_> {
    fn drop(&mut self) {
        let mut asking = self.asking.locked();
        if asking.get(&self.key).is_some_and(|lock| Arc::ptr_eq(lock, self.lock)) {
            asking.remove(&self.key);
        }
    }
}

/// The checks a JWT gets, on an introspection answer: `aud` names the resource (RFC 8707; an
/// answer without `aud` cannot show the token is for this resource, and a refresh token's has
/// none, so it is refused); where the answer carries them, `iss` is the configured issuer, and
/// `exp` and `nbf` hold with [`LEEWAY_S`].
fn check_claims(claims: &Map<String, Value>, issuer: &str, resources: &[&str], now: u64) -> Result<(), Refusal> {
    super::numeric_dates(claims)?;
    if let Some(iss) = claims.get("iss")
        && iss.as_str().map(|iss| iss.trim_end_matches('/')) != Some(issuer.trim_end_matches('/'))
    {
        return Err(Refusal::InvalidToken("from another issuer"));
    }
    let audience_fits = match claims.get("aud") {
        Some(Value::String(aud)) => resources.contains(&aud.as_str()),
        Some(Value::Array(auds)) => auds.iter().filter_map(Value::as_str).any(|aud| resources.contains(&aud)),
        Some(_) | None => false,
    };
    if !audience_fits {
        return Err(Refusal::InvalidToken("minted for another resource"));
    }
    if claims.get("exp").and_then(Value::as_u64).is_some_and(|exp| exp.saturating_add(LEEWAY_S) <= now) {
        return Err(Refusal::InvalidToken("expired"));
    }
    if claims.get("nbf").and_then(Value::as_u64).is_some_and(|nbf| nbf > now.saturating_add(LEEWAY_S)) {
        return Err(Refusal::InvalidToken("not valid yet"));
    }
    Ok(())
}

/// The client of the introspection endpoint.
struct Introspection {
    endpoint: String,
    client_id: String,
    /// `None`: the secret file could not be read when `auth.oauth` was learned (logged then);
    /// opaque tokens get 503 meanwhile.
    secret: Option<String>,
    http: reqwest::Client,
    in_flight: tokio::sync::Semaphore,
    /// Tokens waiting for a slot of `in_flight`.
    waiting: std::sync::atomic::AtomicUsize,
}

/// What the authorization server said of a token: the claims of an active one.
pub type Answer = Result<Map<String, Value>, Refusal>;

impl Introspection {
    /// Reads the client secret now; fails only if no HTTP client can be made.
    pub fn new(config: &IntrospectionConfig) -> Result<Introspection, reqwest::Error> {
        let http = reqwest::Client::builder().timeout(TIMEOUT).redirect(reqwest::redirect::Policy::none()).build()?;
        let secret = match hangar_core::access::read_client_secret(&config.client_secret_file) {
            Ok(secret) => Some(secret),
            Err(why) => {
                tracing::error!(file = %config.client_secret_file.display(), error = %why, "cannot read auth.oauth.introspection.client_secret_file; opaque tokens are refused (503)");
                None
            }
        };
        Ok(Introspection {
            endpoint: config.endpoint.clone(),
            client_id: config.client_id.clone(),
            secret,
            http,
            in_flight: tokio::sync::Semaphore::new(MAX_IN_FLIGHT),
            waiting: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// A slot to ask the authorization server in: at once if one is free, else after a wait in
    /// a bounded line ([`MAX_WAITING`], [`MAX_WAIT`]); [`Refusal::Busy`] past either bound.
    async fn slot(&self) -> Result<tokio::sync::SemaphorePermit<'_>, Refusal> {
        use std::sync::atomic::Ordering;
        if let Ok(permit) = self.in_flight.try_acquire() {
            return Ok(permit);
        }
        if self.waiting.fetch_add(1, Ordering::SeqCst) >= MAX_WAITING {
            self.waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(Refusal::Busy);
        }
        let waited = tokio::time::timeout(MAX_WAIT, self.in_flight.acquire()).await;
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        match waited {
            Ok(Ok(permit)) => Ok(permit),
            Ok(Err(_)) => Err(Refusal::IssuerUnavailable),
            Err(_) => Err(Refusal::Busy),
        }
    }

    /// Asks the authorization server about `token`: its claims when active, `InvalidToken` when
    /// not, `IssuerUnavailable` when it cannot tell.
    pub async fn introspect(&self, token: &str) -> Answer {
        let secret = self.secret.as_deref().ok_or(Refusal::IssuerUnavailable)?;
        let _permit = self.slot().await?;
        let body: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("token", token)
            .append_pair("token_type_hint", "access_token")
            .finish();
        // RFC 6749 §2.3.1: the client id and secret are form-encoded before Basic.
        let user = url::form_urlencoded::byte_serialize(self.client_id.as_bytes()).collect::<String>();
        let password = url::form_urlencoded::byte_serialize(secret.as_bytes()).collect::<String>();
        let sent = self
            .http
            .post(&self.endpoint)
            .basic_auth(user, Some(password))
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(reqwest::header::ACCEPT, "application/json")
            .body(body)
            .send()
            .await;
        let mut response = match sent {
            Ok(response) => response,
            Err(err) => {
                // reqwest's error names the URL, never the body or the credentials.
                tracing::warn!(endpoint = %self.endpoint, error = %err, "cannot reach the introspection endpoint");
                return Err(Refusal::IssuerUnavailable);
            }
        };
        if !response.status().is_success() {
            tracing::warn!(endpoint = %self.endpoint, status = response.status().as_u16(), "the introspection endpoint refused to answer (are auth.oauth.introspection.client_id and its secret right?)");
            return Err(Refusal::IssuerUnavailable);
        }
        let mut bytes = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) if bytes.len() + chunk.len() <= MAX_ANSWER_BYTES => bytes.extend_from_slice(&chunk),
                Ok(Some(_)) | Err(_) => {
                    tracing::warn!(endpoint = %self.endpoint, "the introspection endpoint's answer is too large or cut short");
                    return Err(Refusal::IssuerUnavailable);
                }
                Ok(None) => break,
            }
        }
        let Ok(Value::Object(claims)) = serde_json::from_slice::<Value>(&bytes) else {
            tracing::warn!(endpoint = %self.endpoint, "the introspection endpoint's answer is not a JSON object");
            return Err(Refusal::IssuerUnavailable);
        };
        if claims.get("active") != Some(&Value::Bool(true)) {
            return Err(Refusal::InvalidToken("not active"));
        }
        Ok(claims)
    }
}

/// The header of `token` if it is a JWS (three base64url parts with a header that parses): it
/// is then checked as a JWT. Anything else goes to introspection, unless [`jws_shaped`].
pub fn jws_header(token: &str) -> Option<jsonwebtoken::Header> {
    jsonwebtoken::decode_header(token).ok()
}

/// Whether `token` is shaped as a compact JWS (RFC 7515 §7.1): three parts split by dots, of
/// base64url characters, the first two not empty. Such a token whose header does not parse is a
/// broken or forged JWT, never an opaque token: it is not sent to the authorization server.
pub fn jws_shaped(token: &str) -> bool {
    let parts: Vec<&str> = token.split('.').collect();
    let base64url = |part: &str| part.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'='));
    parts.len() == 3 && !parts[0].is_empty() && !parts[1].is_empty() && parts.iter().all(|part| base64url(part))
}

/// Whether `token` can be an opaque access token worth asking about: at most
/// [`MAX_OPAQUE_BYTES`] of RFC 6750's `b64token` (`1*( ALPHA / DIGIT / "-" / "." / "_" / "~" /
/// "+" / "/" ) *"="`).
fn b64token(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty()
        && token.len() <= MAX_OPAQUE_BYTES
        && body.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/'))
}

/// How long to trust an accepted token: until its `exp` (a Unix time), at most [`ACCEPTED_TTL`].
pub fn accepted_ttl(claims: &Map<String, Value>, now_unix: u64) -> Duration {
    match claims.get("exp").and_then(Value::as_u64) {
        Some(exp) => Duration::from_secs(exp.saturating_sub(now_unix)).min(ACCEPTED_TTL),
        None => ACCEPTED_TTL,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn an_accepted_token_is_trusted_until_its_exp_at_most_a_minute() {
        let claims = |exp: u64| serde_json::json!({"exp": exp}).as_object().unwrap().clone();
        assert_eq!(accepted_ttl(&claims(1_030), 1_000), Duration::from_secs(30));
        assert_eq!(accepted_ttl(&claims(9_000), 1_000), ACCEPTED_TTL);
        assert_eq!(accepted_ttl(&claims(900), 1_000), Duration::ZERO);
        assert_eq!(accepted_ttl(&Map::new(), 1_000), ACCEPTED_TTL);
    }

    #[test]
    fn an_answer_is_checked_like_a_jwt_and_must_name_the_resource() {
        let check = |claims: Value| {
            check_claims(claims.as_object().unwrap(), "https://idp.example.com/", &["https://h/mcp"], 1_000)
        };
        let another_resource = Err(Refusal::InvalidToken("minted for another resource"));
        assert_eq!(check(serde_json::json!({"active": true})), another_resource, "no aud");
        assert_eq!(check(serde_json::json!({"aud": "https://other/mcp"})), another_resource);
        assert_eq!(check(serde_json::json!({"aud": "https://h/mcp"})), Ok(()));
        let fits = serde_json::json!({"iss": "https://idp.example.com", "aud": ["x", "https://h/mcp"], "exp": 1_001, "nbf": 1_020});
        assert_eq!(check(fits), Ok(()));
        let with = |claim: &str, value: Value| serde_json::json!({"aud": "https://h/mcp", claim: value});
        assert_eq!(check(with("iss", "https://evil".into())), Err(Refusal::InvalidToken("from another issuer")));
        assert_eq!(check(with("exp", 900.into())), Err(Refusal::InvalidToken("expired")));
        assert_eq!(check(with("nbf", 1_100.into())), Err(Refusal::InvalidToken("not valid yet")));
        for claim in ["exp", "nbf", "iat"] {
            let refused = check(with(claim, "99999999999".into()));
            assert!(matches!(refused, Err(Refusal::InvalidToken(_))), "{claim} as a string: {refused:?}");
        }
    }

    #[test]
    fn what_cannot_be_an_access_token_is_never_asked_about() {
        assert!(b64token("GjR1y0pQf3-opaque_token") && b64token("a.b~c+d/e=="));
        for junk in ["", "==", "has space", "quote\"", "ctl\u{7}", "é", &"a".repeat(MAX_OPAQUE_BYTES + 1)] {
            assert!(!b64token(junk), "{junk:?}");
        }
        for shaped in ["a.b.c", "eyJhbGciOiJub25lIn0.e30.", "x.y.sig=="] {
            assert!(jws_shaped(shaped), "{shaped}");
        }
        for opaque in ["GjR1y0pQf3", "ya29.a0Af", "a.b.c.d.e", ".b.c", "a..c", "a.b.c d"] {
            assert!(!jws_shaped(opaque), "{opaque}");
        }
    }

    #[test]
    fn only_a_jws_is_checked_as_a_jwt() {
        assert!(jws_header("GjR1y0pQf3-opaque_token").is_none());
        assert!(jws_header("a.b.c").is_none());
        let key = jsonwebtoken::EncodingKey::from_secret(b"k");
        let jws =
            jsonwebtoken::encode(&jsonwebtoken::Header::default(), &serde_json::json!({"sub": "x"}), &key).unwrap();
        assert!(jws_header(&jws).is_some());
    }
}
