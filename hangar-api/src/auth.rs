//! Authentication: who is calling. Every route but the health probes needs a credential once
//! any is configured; the request then carries its [`Caller`] (an axum extension) to the
//! handlers, which send it to the supervisor with every request. What that caller may see and
//! do is the supervisor's decision, never this file's.
//!
//! Keys come from two places, merged: `auth.api_keys` in the config, which the supervisor hands
//! to every API instance on each connection and after each reload (so a second instance is
//! identical), and `--api-keys FILE`, one `sha256:<hex>` or `NAME:sha256:<hex>` a line (`#`
//! comments). A key's name is the caller's identity; a file key without one is named by its
//! hash prefix (`sha256:9e1ea4e8d2e5`). No key's name starts with `oauth:` (where OAuth callers'
//! identities live) or is `hangar` or `anonymous`. Only hashes are configured, so neither place holds
//! anything a reader could use. A client sends its key as `X-API-Key: <key>` or
//! `Authorization: Bearer <key>`. Keys are never logged.
//!
//! On a listener beyond loopback this file also applies the exposure rule
//! ([`crate::exposure`]): while no authentication is known there, requests are refused (503).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hangar_core::access::{AuthConfig, Caller, key_name_problem, parse_key_hash};
use hangar_core::credential::Secret;
use hangar_core::sync::UnpoisonedRw;
use hangar_runtime::exit::{EX_CONFIG, Sysexit};

use crate::error::ApiError;
use crate::exposure::{self, Exposure};
use crate::oauth::OAuth;
use crate::public::Public;

/// The largest keys file read: some thousands of keys.
const MAX_KEYS_FILE_BYTES: u64 = 1 << 20;
/// How many hex digits of its hash name a key the file does not name.
const HASH_PREFIX_DIGITS: usize = 12;

/// One key the API accepts.
#[derive(Debug, Clone)]
struct Key {
    /// The caller's identity.
    name: String,
    digest: [u8; 32],
    /// `None`: sees and does everything.
    profile: Option<String>,
}

/// The keys this API accepts: those of `--api-keys` (fixed at start) and those of the config
/// (as the supervisor last told them). Cheap to clone; every clone sees what the supervisor
/// says next.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    file: Vec<Key>,
    config: RwLock<Learned>,
    /// The supervisor told this API its `auth:` block on the current connection.
    learned: AtomicBool,
    /// The MCP endpoint's URL: the resource tokens are for, unless `auth.oauth.resource` says.
    mcp_url: OnceLock<String>,
    /// How far the listener reaches (unset: loopback).
    exposure: OnceLock<Exposure>,
}

/// The config's `auth:` block as the supervisor last told it.
#[derive(Default)]
struct Learned {
    /// The supervisor has told it at least once (it stays known across reconnections).
    known: bool,
    keys: Arc<Vec<Key>>,
    /// OAuth is configured (then nothing is anonymous either).
    oauth: bool,
    /// Its validator (kept across reloads that leave `auth.oauth` as it was, with its cached
    /// keys); `None` while OAuth is configured only if no HTTP client could be made.
    validator: Option<OAuth>,
}

impl Inner {
    /// Whether any authentication is configured: the file's keys, or the config's as `learned`.
    fn authenticates(&self, learned: &Learned) -> bool {
        !self.file.is_empty() || !learned.keys.is_empty() || learned.oauth
    }
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth").field("file_keys", &self.file.len()).finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    #[error("{path}: cannot read the API keys: {source}")]
    Read { path: String, source: hangar_core::small_file::SmallFileError },
    #[error(
        "{path}:{line}: expected `sha256:<64 hex digits>` or `NAME:sha256:<64 hex digits>` (the hash of a key, e.g. from `printf %s KEY | sha256sum`)"
    )]
    Malformed { path: String, line: usize },
    #[error("{path}:{line}: {message}")]
    Invalid { path: String, line: usize, message: String },
}

/// A key file that cannot be used is a configuration mistake.
impl Sysexit for KeysError {
    fn exit_code(&self) -> u8 {
        EX_CONFIG
    }
}

/// Why a request is not served: 401 for a key, or an OAuth refusal with its challenge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Missing,
    Invalid,
    /// With `auth.oauth`: no credential, or a bearer token that is no key and not a valid token.
    Token(crate::oauth::Refusal),
}

impl Refusal {
    fn message(self) -> &'static str {
        match self {
            Refusal::Missing => "an API key is required: send it as X-API-Key or Authorization: Bearer",
            Refusal::Invalid => "the API key is not valid",
            Refusal::Token(_) => "the bearer token is not valid",
        }
    }
}

/// What authentication the API knows of, for the exposure rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protection {
    /// The config's `auth:` block is not learned yet, and `--api-keys` named no key.
    Unknown,
    /// Learned: no keys, no OAuth, and no `--api-keys`.
    None,
    Configured,
}

/// The OAuth access token a request came with, once the validator accepted it: a request
/// extension beside its [`Caller`], set only for an OAuth caller (never for a key caller), so
/// its tool calls can carry it to the servers that exchange it (`auth.token_exchange`). Never
/// logged (`Secret`).
#[derive(Clone)]
pub struct InboundToken(pub Secret);

/// A credential as the request presents it.
enum Credential<'a> {
    /// `X-API-Key`: only ever a key.
    Key(&'a str),
    /// `Authorization: Bearer`: a key, or (with OAuth) an access token.
    Bearer(&'a str),
}

impl Auth {
    /// The keys of `--api-keys FILE`.
    pub fn load(path: &Path) -> Result<Auth, KeysError> {
        let shown = path.display().to_string();
        // A regular file only: `/dev/zero` filled the memory, a FIFO held the start for good.
        let text = hangar_core::small_file::read_regular(path, MAX_KEYS_FILE_BYTES)
            .map_err(|source| KeysError::Read { path: shown.clone(), source })?;
        let file = parse(&text).map_err(|(line, message)| match message {
            None => KeysError::Malformed { path: shown.clone(), line },
            Some(message) => KeysError::Invalid { path: shown.clone(), line, message },
        })?;
        Ok(Auth::with_file_keys(file))
    }

    fn with_file_keys(file: Vec<Key>) -> Auth {
        Auth { inner: Arc::new(Inner { file, ..Inner::default() }) }
    }

    /// No keys at all, and the supervisor's settings taken as known (tests).
    #[cfg(test)]
    pub fn none_learned() -> Auth {
        let auth = Auth::default();
        auth.learn(&AuthConfig::default());
        auth
    }

    /// How far the listener reaches, once it is bound: beyond loopback (without
    /// `--unsafe-no-auth`) requests are refused while no authentication is known.
    pub fn expose(&self, exposure: Exposure) {
        let _ = self.inner.exposure.set(exposure);
        if exposure.requires_auth() && self.inner.file.is_empty() {
            tracing::info!(
                "listening beyond loopback: every request but /health/* is refused (503) until the supervisor tells the auth settings, and while they configure none"
            );
        }
    }

    /// Whether the exposure rule refuses requests now: the listener reaches beyond loopback
    /// (without `--unsafe-no-auth`) and no authentication is known (none configured, or the
    /// config's not learned yet and no `--api-keys`).
    pub fn unprotected(&self) -> bool {
        let guarded = self.inner.exposure.get().is_some_and(|exposure| exposure.requires_auth());
        guarded && self.protection() != Protection::Configured
    }

    /// What authentication is known: the file's keys count at once, the config's once learned.
    fn protection(&self) -> Protection {
        let learned = self.inner.config.reading();
        if self.inner.authenticates(&learned) {
            Protection::Configured
        } else if learned.known {
            Protection::None
        } else {
            Protection::Unknown
        }
    }

    /// The MCP endpoint's URL, once the listener is bound: the resource tokens must be minted
    /// for when `auth.oauth.resource` names none.
    pub fn serve_at(&self, mcp_url: String) {
        let _ = self.inner.mcp_url.set(mcp_url);
    }

    /// The OAuth validator, when the config sets `auth.oauth` (as last learned).
    pub fn oauth(&self) -> Option<OAuth> {
        self.inner.config.reading().validator.clone()
    }

    /// The validator for `config`: the current one if nothing it depends on changed (its
    /// cached keys kept), else a new one, warmed up at once.
    fn validator_for(&self, config: &AuthConfig) -> Option<OAuth> {
        let wanted = config.oauth.as_ref()?;
        if let Some(current) = self.oauth().filter(|current| current.config() == wanted) {
            return Some(current);
        }
        let mcp_url = self.inner.mcp_url.get().map_or("http://127.0.0.1:8000/mcp", String::as_str);
        let oauth = match OAuth::new(wanted.clone(), mcp_url) {
            Ok(oauth) => oauth,
            Err(err) => {
                tracing::error!(error = %err, "cannot make an HTTP client for the authorization server; tokens are refused");
                return None;
            }
        };
        tracing::info!(issuer = %wanted.issuer, resource = %oauth.resource(), "OAuth: tokens from this issuer, for this resource, are accepted");
        if let Some(introspection) = &wanted.introspection {
            tracing::info!(endpoint = %introspection.endpoint, client_id = %introspection.client_id, "OAuth: opaque tokens are introspected");
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(oauth.keep_fresh());
        }
        Some(oauth)
    }

    /// Takes the config's `auth:` block, as the supervisor tells it.
    pub fn learn(&self, config: &AuthConfig) {
        let validator = self.validator_for(config);
        let keys = config
            .api_keys
            .iter()
            .filter_map(|key| {
                // The supervisor validated the config; a hash that does not parse is skipped.
                let digest = parse_key_hash(&key.hash)?;
                Some(Key { name: key.name.clone(), digest, profile: key.profile.clone() })
            })
            .collect();
        let before = self.protection();
        *self.inner.config.writing() =
            Learned { known: true, keys: Arc::new(keys), oauth: config.oauth.is_some(), validator };
        self.inner.learned.store(true, Ordering::SeqCst);
        self.log_exposure(before, self.protection());
    }

    /// Logs the exposure rule's state where it changes (not on every reconnection).
    fn log_exposure(&self, before: Protection, now: Protection) {
        if !self.inner.exposure.get().is_some_and(|exposure| exposure.requires_auth()) || before == now {
            return;
        }
        match now {
            Protection::None => tracing::error!(
                "{}: every request but /health/* is refused (503) until a reload configures authentication",
                exposure::UNPROTECTED
            ),
            Protection::Configured => tracing::info!("authentication is configured: serving beyond loopback"),
            Protection::Unknown => {}
        }
    }

    /// The connection is gone: what comes next must be learned again (the keys stay meanwhile,
    /// and no request reaches the supervisor anyway).
    pub fn unlearn(&self) {
        self.inner.learned.store(false, Ordering::SeqCst);
    }

    /// The supervisor has told this API its `auth:` block on the current connection.
    pub fn learned(&self) -> bool {
        self.inner.learned.load(Ordering::SeqCst)
    }

    /// Who the request comes from (tests): [`Auth::authenticate_with_token`]'s caller.
    #[cfg(test)]
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, Refusal> {
        self.authenticate_with_token(headers).await.map(|(caller, _)| caller)
    }

    /// Who the request comes from, and the OAuth access token it came with when it is one the
    /// validator accepted (`None` for a key, or the anonymous caller). With nothing configured,
    /// everyone is [`Caller::anonymous`] (on loopback, or with `--unsafe-no-auth`: beyond it the
    /// exposure rule refuses first). Before the supervisor's settings are known only the file's
    /// keys count; an anonymous caller is then refused by the supervisor itself if its config
    /// does configure authentication.
    async fn authenticate_with_token(&self, headers: &HeaderMap) -> Result<(Caller, Option<InboundToken>), Refusal> {
        let (authenticates, config_keys, oauth, validator) = {
            let learned = self.inner.config.reading();
            (self.inner.authenticates(&learned), learned.keys.clone(), learned.oauth, learned.validator.clone())
        };
        if !authenticates {
            return Ok((Caller::anonymous(), None));
        }
        let missing = if oauth { Refusal::Token(crate::oauth::Refusal::Missing) } else { Refusal::Missing };
        let credential = presented(headers).ok_or(missing)?;
        let secret = match credential {
            Credential::Key(secret) | Credential::Bearer(secret) => secret,
        };
        // Hashed once: the keys are looked up by it, and so are the tokens OAuth checked before.
        let digest = crate::oauth::digest(secret);
        if let Some(key) = find(config_keys.iter().chain(&self.inner.file), &digest) {
            return Ok((Caller { identity: key.name.clone(), profile: key.profile.clone() }, None));
        }
        match (credential, validator) {
            // With OAuth, a bearer token that is no key is an access token.
            (Credential::Bearer(token), Some(validator)) if oauth => {
                let caller = validator.authenticate_digested(token, digest).await.map_err(Refusal::Token)?;
                Ok((caller, Some(InboundToken(Secret::new(token)))))
            }
            (Credential::Bearer(_), None) if oauth => Err(Refusal::Token(crate::oauth::Refusal::IssuerUnavailable)),
            _ => Err(Refusal::Invalid),
        }
    }
}

/// The credential a request presents: `X-API-Key`, else `Authorization: Bearer`.
fn presented(headers: &HeaderMap) -> Option<Credential<'_>> {
    if let Some(key) = headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
        return Some(Credential::Key(key.trim()));
    }
    let bearer = headers.get(AUTHORIZATION)?.to_str().ok()?.strip_prefix("Bearer ")?;
    Some(Credential::Bearer(bearer.trim()))
}

/// The first key whose hash is `digest` (the SHA-256 of the secret presented). Every hash is
/// compared in full, and the scan never stops early, so timing says nothing about which key
/// matched, or where.
fn find<'k>(keys: impl Iterator<Item = &'k Key>, digest: &[u8; 32]) -> Option<&'k Key> {
    keys.fold(None, |found, key| {
        let matches = constant_time_eq(&key.digest, digest);
        if found.is_none() && matches { Some(key) } else { found }
    })
}

/// Parses a keys file; `Err((line, message))` on a bad line (`None`: malformed).
fn parse(text: &str) -> Result<Vec<Key>, (usize, Option<String>)> {
    let mut keys: Vec<Key> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let (name, hash) = match line.split_once(":sha256:") {
            Some((name, hex)) => (Some(name), format!("sha256:{hex}")),
            None => (None, line.to_owned()),
        };
        let digest = parse_key_hash(&hash).ok_or((n + 1, None))?;
        let name = match name.map(|name| (name, key_name_problem(name))) {
            Some((name, None)) => name.to_owned(),
            Some((_, Some(problem))) => return Err((n + 1, Some(problem.into()))),
            None => format!("sha256:{}", hash.get(7..7 + HASH_PREFIX_DIGITS).unwrap_or_default()),
        };
        if keys.iter().any(|k| k.name == name) {
            return Err((n + 1, Some(format!("`{name}` names an earlier key too"))));
        }
        keys.push(Key { name, digest, profile: None });
    }
    Ok(keys)
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// Names the request's caller for the handlers (an `Extension<Caller>`, and with an OAuth
/// caller its [`InboundToken`]), or refuses it (401,
/// the error envelope; with OAuth, 401 or 403 with a `WWW-Authenticate` challenge; 503 beyond
/// loopback while no authentication is known, by the exposure rule). The paths of
/// [`crate::public`] need none: health probes and the protected-resource metadata stay open and
/// carry no caller, so load balancers, systemd and OAuth clients need no credential; the page's
/// files are open once authentication is known.
pub async fn authenticate(State(auth): State<Auth>, mut request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let public = crate::public::public(path);
    // A browser's step of the connect flow names no caller: the flow names its identity.
    let browser_step = public == Some(Public::Browser) && crate::public::open_to(public, request.method());
    if matches!(public, Some(Public::Probe | Public::Metadata)) || browser_step {
        return next.run(request).await;
    }
    if auth.unprotected() {
        let refused = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "Unprotected", exposure::UNPROTECTED);
        return crate::body::refuse_unread(request, refused.into_response()).await;
    }
    // The status page's files hold no data (the page asks /api for everything, with the
    // operator's credential), so a browser loads them without one.
    if public == Some(Public::PageFile) {
        return next.run(request).await;
    }
    match auth.authenticate_with_token(request.headers()).await {
        Ok((caller, token)) => {
            request.extensions_mut().insert(caller);
            if let Some(token) = token {
                request.extensions_mut().insert(token);
            }
            next.run(request).await
        }
        Err(refusal) => {
            let response = match (refusal, auth.oauth()) {
                (Refusal::Token(refused), Some(oauth)) => {
                    // The class of the refusal only, at debug: a flood of bad tokens must not
                    // flood the log, and nothing of a token is ever logged.
                    tracing::debug!(?refused, "token refused");
                    crate::oauth::challenge(&oauth, refused, request.uri().path())
                }
                (Refusal::Token(_), None) => crate::oauth::issuer_unavailable(),
                (refusal, _) => {
                    ApiError::new(StatusCode::UNAUTHORIZED, "Unauthorized", refusal.message()).into_response()
                }
            };
            crate::body::refuse_unread(request, response).await
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use hangar_core::access::NamedKey;
    use sha2::{Digest, Sha256};

    use super::*;

    fn hex_of(key: &str) -> String {
        let hash: [u8; 32] = Sha256::digest(key.as_bytes()).into();
        hash.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn headers(name: &str, value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
        headers
    }

    #[test]
    fn parses_hashes_and_names_the_bad_line() {
        let keys = parse("# ops\n\nsha256:9e1ea4e8d2e5b1bbcd8b3a8ed2a7b1c1bf2fce40c9a2bbc0c53e0d3e9a0d8e1c # alice\n")
            .unwrap();
        assert_eq!(keys[0].name, "sha256:9e1ea4e8d2e5", "a key without a name is named by its hash prefix");
        assert_eq!(parse("sha256:abc\n").unwrap_err(), (1, None));
        assert_eq!(parse("# x\nplain-key\n").unwrap_err(), (2, None), "a plain key is refused: only hashes");
    }

    #[test]
    fn a_line_may_name_its_key() {
        let text = format!("ci-bot:sha256:{}\nsha256:{}\n", hex_of("one"), hex_of("two"));
        let keys = parse(&text).unwrap();
        assert_eq!(keys[0].name, "ci-bot");
        assert_eq!(keys[1].name, format!("sha256:{}", &hex_of("two")[..12]));
        let twice = format!("a:sha256:{}\na:sha256:{}\n", hex_of("one"), hex_of("two"));
        assert!(parse(&twice).unwrap_err().1.unwrap().contains("`a` names an earlier key"));
        assert!(parse(&format!("anonymous:sha256:{}\n", hex_of("one"))).unwrap_err().1.is_some());
        assert!(parse(&format!("bad name:sha256:{}\n", hex_of("one"))).unwrap_err().1.is_some());
    }

    #[tokio::test]
    async fn accepts_exactly_the_keys_whose_hash_is_configured_and_names_the_caller() {
        let auth = Auth::with_file_keys(parse(&format!("sha256:{}\n", hex_of("secret-key"))).unwrap());
        let caller = auth.authenticate(&headers("x-api-key", "secret-key")).await.unwrap();
        assert_eq!(
            (caller.identity.as_str(), caller.profile),
            (&*format!("sha256:{}", &hex_of("secret-key")[..12]), None)
        );
        assert_eq!(auth.authenticate(&headers("x-api-key", "secret-kez")).await, Err(Refusal::Invalid));
        assert_eq!(auth.authenticate(&headers("authorization", "Bearer ")).await, Err(Refusal::Invalid));
        assert_eq!(auth.authenticate(&HeaderMap::new()).await, Err(Refusal::Missing));
    }

    #[tokio::test]
    async fn config_keys_learned_from_the_supervisor_carry_their_profile() {
        let auth = Auth::default();
        assert_eq!(auth.authenticate(&HeaderMap::new()).await, Ok(Caller::anonymous()), "nothing configured");
        assert!(!auth.learned());
        auth.learn(&AuthConfig {
            api_keys: vec![NamedKey {
                name: "ci-bot".into(),
                hash: format!("sha256:{}", hex_of("ci")),
                profile: Some("ci".into()),
            }],
            oauth: None,
        });
        assert!(auth.learned());
        let (caller, token) = auth.authenticate_with_token(&headers("authorization", "Bearer ci")).await.unwrap();
        assert_eq!(caller, Caller { identity: "ci-bot".into(), profile: Some("ci".into()) });
        assert!(token.is_none(), "a key is no token to exchange");
        assert_eq!(
            auth.authenticate(&HeaderMap::new()).await,
            Err(Refusal::Missing),
            "configured: nothing is anonymous"
        );
        auth.learn(&AuthConfig::default());
        assert_eq!(auth.authenticate(&HeaderMap::new()).await, Ok(Caller::anonymous()), "a reload removed every key");
    }

    /// The status of GET `path` through the middleware, with `headers`.
    async fn status(auth: &Auth, path: &str, headers: &[(&str, &str)]) -> u16 {
        use tower::ServiceExt;
        let app = axum::Router::new()
            .route("/health/live", axum::routing::get(|| async { "live" }))
            .route("/api/mcp_servers", axum::routing::get(|| async { "servers" }))
            .layer(axum::middleware::from_fn_with_state(auth.clone(), authenticate));
        let mut request = axum::http::Request::get(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        app.oneshot(request.body(axum::body::Body::empty()).unwrap()).await.unwrap().status().as_u16()
    }

    fn key_config(key: &str) -> AuthConfig {
        AuthConfig {
            api_keys: vec![NamedKey { name: "ops".into(), hash: format!("sha256:{}", hex_of(key)), profile: None }],
            oauth: None,
        }
    }

    #[tokio::test]
    async fn beyond_loopback_nothing_is_anonymous_until_authentication_is_configured() {
        let auth = Auth::default();
        auth.expose(Exposure::Guarded);
        assert!(auth.unprotected(), "not learned yet");
        assert_eq!(status(&auth, "/api/mcp_servers", &[]).await, 503);
        assert_eq!(status(&auth, "/health/live", &[]).await, 200, "probes stay open");
        auth.learn(&AuthConfig::default());
        assert_eq!(status(&auth, "/api/mcp_servers", &[]).await, 503, "learned: none configured");
        auth.learn(&key_config("k"));
        assert!(!auth.unprotected());
        assert_eq!(status(&auth, "/api/mcp_servers", &[]).await, 401);
        assert_eq!(status(&auth, "/api/mcp_servers", &[("x-api-key", "k")]).await, 200);
        auth.unlearn();
        assert_eq!(status(&auth, "/api/mcp_servers", &[("x-api-key", "k")]).await, 200, "keys stay meanwhile");
        auth.learn(&AuthConfig::default());
        assert_eq!(status(&auth, "/api/mcp_servers", &[("x-api-key", "k")]).await, 503, "a reload removed every key");
    }

    #[tokio::test]
    async fn file_keys_protect_at_once_and_loopback_or_unsafe_no_auth_stay_anonymous() {
        let file = Auth::with_file_keys(parse(&format!("sha256:{}\n", hex_of("f"))).unwrap());
        file.expose(Exposure::Guarded);
        assert_eq!(status(&file, "/api/mcp_servers", &[("x-api-key", "f")]).await, 200, "before learning");
        file.learn(&AuthConfig::default());
        assert_eq!(status(&file, "/api/mcp_servers", &[]).await, 401);
        for exposure in [Exposure::Loopback, Exposure::Unguarded] {
            let auth = Auth::default();
            auth.expose(exposure);
            assert_eq!(status(&auth, "/api/mcp_servers", &[]).await, 200, "{exposure:?}");
            auth.learn(&AuthConfig::default());
            assert_eq!(status(&auth, "/api/mcp_servers", &[]).await, 200, "{exposure:?}");
        }
    }
}
