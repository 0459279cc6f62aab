//! The hangar as an OAuth 2.1 resource server (MCP authorization, revision 2026-07-28): a bearer
//! token that is not an API key is checked as a JWT access token from the configured issuer
//! (`auth.oauth`), and names the [`Caller`].
//!
//! Checked: the signature, by a key the issuer publishes (asymmetric algorithms only: `none` and
//! HS* are refused); `iss`; `aud` against the resource (RFC 8707 audience binding); `exp` and
//! `nbf` with [`LEEWAY_S`] (and `exp`, `nbf`, `iat`, where present, must be numbers: a string
//! would otherwise be skipped as if absent); the required scopes (`scope`, space-separated, or
//! `scp`). The caller is `oauth:` and the token's `sub` (or `client_id`), so a token never takes
//! a key's name nor the hangar's own identity; its profile is the first `auth.oauth.profiles`
//! entry whose group the `profile_claim` names (an array of groups, or one string naming one
//! group), else `default_profile`. A token is never passed on to an
//! upstream, and never logged: a refusal logs its class only. An accepted token is remembered for
//! a while ([`cache`]), so a client that repeats it is not checked in full on every call. With
//! `auth.oauth.introspection`, a token that is not shaped as a JWS is introspected instead
//! (`introspection.rs`); one shaped as a JWS whose header does not parse is refused here, never
//! sent to the authorization server. The issuer's keys are fetched again every
//! `auth.oauth.jwks_refresh_s` (`issuer.rs`), and a token checked before by a key the issuer no
//! longer publishes is checked again, so refused.

mod cache;
mod challenge;
mod introspection;
mod issuer;
mod metadata;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use hangar_core::access::{Caller, OAuthConfig};
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};

pub use cache::{TokenDigest, digest};
pub use challenge::{challenge, issuer_unavailable};
pub use metadata::routes;

use introspection::Opaque;
use issuer::{Issuer, KeyLookup};

/// Clock skew tolerated on `exp` and `nbf`.
pub const LEEWAY_S: u64 = 30;

/// Why a token was refused. Says which check failed, never anything of the token itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No credential at all (401, a bare challenge).
    Missing,
    /// 401 `invalid_token`: malformed, expired, not yet valid, forged, for another resource...
    InvalidToken(&'static str),
    /// 403 `insufficient_scope`.
    InsufficientScope,
    /// 403: a valid token, but no profile for its groups and no `default_profile`.
    NoProfile,
    /// 503: the issuer's keys cannot be fetched, and none are cached.
    IssuerUnavailable,
    /// 503 with `Retry-After`: too many opaque tokens wait to be introspected already.
    Busy,
}

/// The validator of `auth.oauth`.
#[derive(Clone)]
pub struct OAuth {
    inner: Arc<Inner>,
}

struct Inner {
    config: OAuthConfig,
    /// The canonical resource URI tokens must be minted for.
    resource: String,
    /// The old HTTP+SSE transport's own resource (`…/sse`), when `resource` is the MCP
    /// endpoint's (`…/mcp`): that transport's clients ask for a token for the URL they open,
    /// and the hangar takes it as its own.
    sse_resource: Option<String>,
    issuer: Arc<Issuer>,
    /// With `auth.oauth.introspection`: opaque tokens.
    opaque: Option<Opaque>,
    /// Tokens already checked, each with the key that checked it.
    verified: cache::TokenCache<(Caller, Arc<issuer::Key>)>,
}

impl OAuth {
    /// `default_resource`: the MCP endpoint's URL, when the config names no `resource`.
    pub fn new(config: OAuthConfig, default_resource: &str) -> Result<OAuth, reqwest::Error> {
        let resource = config.resource.clone().unwrap_or_else(|| default_resource.to_owned());
        let issuer = Arc::new(Issuer::new(config.issuer.clone(), config.jwks_refresh())?);
        let opaque = config.introspection.as_deref().map(Opaque::new).transpose()?;
        let verified = cache::TokenCache::default();
        let sse_resource = resource.strip_suffix("/mcp").map(|base| format!("{base}/sse"));
        Ok(OAuth { inner: Arc::new(Inner { config, resource, sse_resource, issuer, opaque, verified }) })
    }

    pub fn resource(&self) -> &str {
        &self.inner.resource
    }

    /// The resource the old HTTP+SSE transport's clients ask tokens for: `…/sse` beside an
    /// `…/mcp` resource, else the resource itself.
    pub fn sse_resource(&self) -> &str {
        self.inner.sse_resource.as_deref().unwrap_or(&self.inner.resource)
    }

    /// Every audience a token may name: the resource, and the SSE transport's.
    fn audiences(&self) -> Vec<&str> {
        let mut audiences = vec![self.inner.resource.as_str()];
        audiences.extend(self.inner.sse_resource.as_deref());
        audiences
    }

    pub fn config(&self) -> &OAuthConfig {
        &self.inner.config
    }

    /// Fetches the issuer's metadata and keys now, so the first call does not wait for them,
    /// and again on the `jwks_refresh_s` timer for as long as this validator is in use.
    pub fn keep_fresh(&self) -> impl Future<Output = ()> + Send + 'static {
        issuer::keep_fresh(Arc::downgrade(&self.inner.issuer))
    }

    /// The caller a bearer token names, or why it is refused.
    #[cfg(test)]
    pub async fn authenticate(&self, token: &str) -> Result<Caller, Refusal> {
        self.authenticate_digested(token, digest(token)).await
    }

    /// [`Self::authenticate`] for a token whose [`digest`] the caller already has (it looked the
    /// same credential up among the API keys), so it is hashed once per request.
    pub async fn authenticate_digested(&self, token: &str, digest: TokenDigest) -> Result<Caller, Refusal> {
        // Checked before: only the key that checked it must still be one the issuer publishes.
        // (Only JWTs are kept here, so this comes before telling a JWS from an opaque token.)
        if let Some((caller, key)) = self.inner.verified.get(&digest, Instant::now())
            && self.inner.issuer.holds(&key)
        {
            return Ok(caller);
        }
        // Not a JWS: an opaque token, introspected when the config says how.
        let header = match (introspection::jws_header(token), &self.inner.opaque) {
            (Some(header), _) => header,
            // Shaped as a JWS but not one: nothing an authorization server should be asked about.
            (None, _) if introspection::jws_shaped(token) => return Err(Refusal::InvalidToken("malformed")),
            (None, Some(opaque)) => {
                let (issuer, audiences) = (&self.inner.config.issuer, self.audiences());
                return opaque.authenticate(token, digest, issuer, &audiences, |claims| self.caller(claims)).await;
            }
            (None, None) => return Err(Refusal::InvalidToken("malformed")),
        };
        if !issuer::asymmetric(header.alg) {
            return Err(Refusal::InvalidToken("algorithm not accepted"));
        }
        let (key, iss) =
            self.inner.issuer.key(header.kid.as_deref(), header.alg).await.map_err(|lookup| match lookup {
                KeyLookup::Unknown => Refusal::InvalidToken("not signed by a key the issuer publishes"),
                KeyLookup::Unavailable => Refusal::IssuerUnavailable,
            })?;
        let claims =
            jsonwebtoken::decode::<Map<String, Value>>(token, &key.decoding, &self.validation(header.alg, &iss))
                .map_err(|err| Refusal::InvalidToken(failed_check(err.kind())))?
                .claims;
        numeric_dates(&claims)?;
        let caller = self.caller(&claims)?;
        let now = Instant::now();
        if let Some(until) = cache::until_exp(claims.get("exp").and_then(Value::as_u64), now) {
            self.inner.verified.insert(digest, (caller.clone(), key), until, now);
        }
        Ok(caller)
    }

    fn validation(&self, alg: Algorithm, iss: &str) -> Validation {
        let mut validation = Validation::new(alg);
        validation.leeway = LEEWAY_S;
        validation.validate_nbf = true;
        validation.set_issuer(&[iss]);
        validation.set_audience(&self.audiences());
        validation.required_spec_claims = ["exp", "iss", "aud"].into_iter().map(String::from).collect();
        validation
    }

    /// The caller of a token whose signature and time claims were checked.
    fn caller(&self, claims: &Map<String, Value>) -> Result<Caller, Refusal> {
        let config = &self.inner.config;
        let granted = scopes(claims);
        if !config.required_scopes.iter().all(|scope| granted.contains(scope.as_str())) {
            return Err(Refusal::InsufficientScope);
        }
        // A client-credentials token names no user: its client is the caller.
        let identity = ["sub", "client_id"]
            .iter()
            .find_map(|claim| claims.get(*claim).and_then(Value::as_str).filter(|s| !s.is_empty()))
            .ok_or(Refusal::InvalidToken("names no subject"))?;
        let groups = groups(claims.get(&config.profile_claim));
        let profile = config
            .profiles
            .iter()
            .find(|(group, _)| groups.contains(group.as_str()))
            .map(|(_, profile)| profile.clone())
            .or_else(|| config.default_profile.clone());
        // A token names a profile, always: a valid token whose groups name none, with no
        // `default_profile`, is refused rather than let see everything.
        let profile = profile.ok_or(Refusal::NoProfile)?;
        Ok(Caller::oauth(identity, profile))
    }
}

/// `exp`, `nbf` and `iat`, where a token (or an introspection answer) carries them, are
/// NumericDates (RFC 7519 §2): non-negative numbers. A string is refused, never skipped as if
/// the claim were absent.
pub fn numeric_dates(claims: &Map<String, Value>) -> Result<(), Refusal> {
    for claim in ["exp", "nbf", "iat"] {
        if let Some(value) = claims.get(claim)
            && !value.as_f64().is_some_and(|date| date.is_finite() && date >= 0.0)
        {
            return Err(Refusal::InvalidToken("a time claim (exp, nbf, iat) is not a number"));
        }
    }
    Ok(())
}

/// The groups a token names: an array of strings, or one string naming one group (a group's
/// name may hold spaces: "former admins" is not `admins`).
fn groups(claim: Option<&Value>) -> HashSet<&str> {
    match claim {
        Some(Value::String(group)) => HashSet::from([group.as_str()]),
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => HashSet::new(),
    }
}

/// The scopes a token grants: `scope` (space-separated, RFC 9068) or `scp` (an array, or a string).
fn scopes(claims: &Map<String, Value>) -> HashSet<&str> {
    let mut granted = strings(claims.get("scope"));
    granted.extend(strings(claims.get("scp")));
    granted
}

/// A claim as a set of strings: an array of strings, or one space-separated string.
fn strings(claim: Option<&Value>) -> HashSet<&str> {
    match claim {
        Some(Value::String(text)) => text.split_whitespace().collect(),
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => HashSet::new(),
    }
}

/// Which check a token failed, in words that help no one forge one.
fn failed_check(kind: &jsonwebtoken::errors::ErrorKind) -> &'static str {
    use jsonwebtoken::errors::ErrorKind;
    match kind {
        ErrorKind::ExpiredSignature => "expired",
        ErrorKind::ImmatureSignature => "not valid yet",
        ErrorKind::InvalidAudience => "minted for another resource",
        ErrorKind::InvalidIssuer => "from another issuer",
        ErrorKind::InvalidSignature => "bad signature",
        ErrorKind::MissingRequiredClaim(_) => "a required claim (exp, iss, aud) is missing",
        ErrorKind::InvalidAlgorithm => "algorithm does not fit the key",
        _ => "malformed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oauth(profiles: &[(&str, &str)], default_profile: Option<&str>) -> OAuth {
        let config = OAuthConfig {
            issuer: "https://idp.example.com".into(),
            resource: None,
            scopes_supported: vec!["mcp".into()],
            required_scopes: vec!["mcp".into()],
            profile_claim: "groups".into(),
            profiles: profiles.iter().map(|(g, p)| ((*g).to_owned(), (*p).to_owned())).collect(),
            default_profile: default_profile.map(str::to_owned),
            introspection: None,
            jwks_refresh_s: hangar_core::access::DEFAULT_JWKS_REFRESH_S,
        };
        OAuth::new(config, "http://127.0.0.1:8000/mcp").unwrap()
    }

    fn claims(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn the_first_matching_group_in_config_order_names_the_profile() {
        let oauth = oauth(&[("ops", "admin"), ("developers", "dev")], None);
        let caller = oauth
            .caller(&claims(serde_json::json!({"sub": "alice", "scope": "mcp x", "groups": ["developers", "ops"]})));
        assert_eq!(caller, Ok(Caller { identity: "oauth:alice".into(), profile: Some("admin".into()) }));
        let caller =
            oauth.caller(&claims(serde_json::json!({"client_id": "bot", "scp": ["mcp"], "groups": "developers"})));
        assert_eq!(caller, Ok(Caller { identity: "oauth:bot".into(), profile: Some("dev".into()) }));
        assert_eq!(
            oauth.caller(&claims(serde_json::json!({"sub": "eve", "scope": "mcp", "groups": ["guests"]}))),
            Err(Refusal::NoProfile)
        );
        assert_eq!(
            oauth.caller(&claims(serde_json::json!({"sub": "eve", "scope": "other", "groups": ["ops"]}))),
            Err(Refusal::InsufficientScope)
        );
        assert_eq!(
            oauth.caller(&claims(serde_json::json!({"scope": "mcp"}))),
            Err(Refusal::InvalidToken("names no subject"))
        );
    }

    #[test]
    fn a_groups_string_is_one_group_and_a_token_never_takes_a_reserved_identity() {
        let oauth = oauth(&[("admins", "admin"), ("former admins", "dev")], None);
        let with = |groups: Value| claims(serde_json::json!({"sub": "eve", "scope": "mcp", "groups": groups}));
        let profile = |groups: Value| oauth.caller(&with(groups)).map(|caller| caller.profile);
        assert_eq!(profile("former admins".into()), Ok(Some("dev".into())), "one string, one group");
        assert_eq!(profile("admins".into()), Ok(Some("admin".into())));
        assert_eq!(profile(serde_json::json!(["former admins"])), Ok(Some("dev".into())));
        let strict = super::tests::oauth(&[("admins", "admin")], None);
        assert_eq!(strict.caller(&with("former admins".into())), Err(Refusal::NoProfile));
        assert_eq!(strict.caller(&with("admins other".into())), Err(Refusal::NoProfile));
        let hangar = oauth.caller(&claims(serde_json::json!({"sub": "hangar", "scope": "mcp", "groups": "admins"})));
        assert_eq!(hangar.map(|caller| caller.identity), Ok("oauth:hangar".to_owned()));
    }

    #[test]
    fn time_claims_must_be_numbers() {
        let check = |value: Value| numeric_dates(&claims(value));
        assert_eq!(check(serde_json::json!({"exp": 1_900_000_000, "nbf": 1.5, "iat": 0})), Ok(()));
        assert_eq!(check(serde_json::json!({"sub": "x"})), Ok(()), "absent claims are not this check's");
        for claim in ["exp", "nbf", "iat"] {
            for bad in [serde_json::json!("1700000000"), serde_json::json!(-1), serde_json::json!(null)] {
                let refused = check(serde_json::json!({claim: bad}));
                assert!(matches!(refused, Err(Refusal::InvalidToken(_))), "{claim}: {bad}");
            }
        }
    }

    #[test]
    fn default_profile_catches_the_rest() {
        let oauth = oauth(&[("ops", "admin")], Some("dev"));
        let caller = oauth.caller(&claims(serde_json::json!({"sub": "bob", "scope": "mcp"})));
        assert_eq!(caller, Ok(Caller { identity: "oauth:bob".into(), profile: Some("dev".into()) }));
        // No mapping and no default: a token never sees everything by default.
        let unmapped = super::tests::oauth(&[], None);
        assert_eq!(
            unmapped.caller(&claims(serde_json::json!({"sub": "bob", "scope": "mcp"}))),
            Err(Refusal::NoProfile)
        );
    }

    #[tokio::test]
    async fn unsigned_and_shared_secret_tokens_are_refused_before_any_key_lookup() {
        let oauth = oauth(&[], None);
        // alg none: jsonwebtoken knows no such algorithm.
        let none = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.";
        assert_eq!(oauth.authenticate(none).await, Err(Refusal::InvalidToken("malformed")));
        let key = jsonwebtoken::EncodingKey::from_secret(b"secret");
        let hs =
            jsonwebtoken::encode(&jsonwebtoken::Header::default(), &serde_json::json!({"sub": "x"}), &key).unwrap();
        assert_eq!(oauth.authenticate(&hs).await, Err(Refusal::InvalidToken("algorithm not accepted")));
        assert_eq!(oauth.authenticate("not a token").await, Err(Refusal::InvalidToken("malformed")));
        assert_eq!(oauth.authenticate("a.b.c").await, Err(Refusal::InvalidToken("malformed")));
        assert_eq!(oauth.inner.verified.len(), 0, "a refused token is never remembered");
    }
}
