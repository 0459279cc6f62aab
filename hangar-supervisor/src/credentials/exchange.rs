//! Token exchange (RFC 8693) for a server with `auth.token_exchange`: the token a caller came
//! with (validated by the API) is exchanged for one meant for the upstream, cached per
//! (identity, audience) until it expires, in one flight per identity, with refusals kept for a
//! short while (a negative cache).
//!
//! One [`Exchanger`] serves one server, so one audience: its cache is keyed by identity. Each
//! identity has its own slot, with its own flight: however many of one identity's calls wait,
//! one exchange is made for them, and one identity's slow exchange never holds another's.
//!
//! The exchange is a POST to the configured `token_endpoint` with the
//! `urn:ietf:params:oauth:grant-type:token-exchange` grant: the caller's token as the
//! `subject_token` (an access token), the configured `audience` and `scope`, and the hangar's
//! client authenticated with HTTP Basic (RFC 6749 §2.3.1), its secret read from its file at each
//! request and dropped after it. The caller's token itself is never sent upstream
//! (`passthrough` does not exist), and neither it nor the exchanged token is ever logged or put
//! in an error: a refusal is told by its OAuth error code only, never the server's free text.
//!
//! A refusal (or a failed request) is answered to that identity's calls of the next
//! [`RETRY_AFTER`] without asking again, unless the caller has since come with another token.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hangar_core::credential::Secret;
use hangar_core::sync::Unpoisoned;
use hangar_core::upstream_auth::TokenExchange;
use sha2::{Digest, Sha256};

use super::shared_token::{MAX_RENEW_AHEAD, MAX_SECRET_BYTES, RETRY_AFTER, TOKEN_TIMEOUT, TokenError};
use super::subjects::Subjects;

/// The grant type of a token exchange (RFC 8693 §2.1).
pub const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The type of the subject token, and of the token asked for: an OAuth access token.
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// An exchanged token that says nothing of its expiry is renewed after this long (short: it
/// was got for a caller whose own token may not live longer).
const UNSTATED_LIFETIME: Duration = Duration::from_secs(300);
/// The most identities whose slot is kept; past it, the idle ones are dropped (their next call
/// exchanges again).
const MAX_IDENTITIES: usize = 10_000;
/// The most read of a token endpoint's answer.
const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// The longest OAuth error code repeated in an error.
const MAX_CODE_CHARS: usize = 64;

/// An exchanged token and when to stop using it.
struct Held {
    secret: Secret,
    renew_at: Instant,
}

/// A failed exchange: when, why (no secret in it), and the digest of the subject token it was
/// for (the caller's next token is tried at once).
struct Failed {
    at: Instant,
    why: String,
    subject: [u8; 32],
}

/// One identity's exchanged token, its flight and its last failure.
#[derive(Default)]
struct Slot {
    held: Mutex<Option<Held>>,
    /// Held by the one call exchanging for this identity; its others wait on it, then read
    /// `held` (or `failed`).
    flight: tokio::sync::Mutex<()>,
    failed: Mutex<Option<Failed>>,
}

impl Slot {
    /// The token held now, if still good.
    fn current(&self) -> Option<String> {
        self.held
            .locked()
            .as_ref()
            .filter(|held| held.renew_at > Instant::now())
            .map(|held| held.secret.expose().to_owned())
    }
}

/// One server's exchanged tokens, by identity.
pub struct Exchanger {
    http: reqwest::Client,
    exchange: TokenExchange,
    /// The tokens callers came with: the subject of each exchange.
    subjects: Arc<Subjects>,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
}

impl Exchanger {
    /// The exchanges `exchange` configures, of the tokens `subjects` holds, made with `http`.
    pub fn new(http: reqwest::Client, exchange: &TokenExchange, subjects: Arc<Subjects>) -> Exchanger {
        Exchanger { http, exchange: exchange.clone(), subjects, slots: Mutex::default() }
    }

    /// `identity`'s exchanged token held now, if still good.
    pub fn current(&self, identity: &str) -> Option<String> {
        self.slots.locked().get(identity).and_then(|slot| slot.current())
    }

    /// `identity`'s exchanged token: the cached one, or a new exchange (one flight per
    /// identity); [`TokenError::NoSubject`] when the caller came with no token (`Subjects::of`).
    pub async fn get(&self, identity: &str) -> Result<String, TokenError> {
        let slot = self.slot(identity);
        if let Some(token) = slot.current() {
            return Ok(token);
        }
        let _flight = slot.flight.lock().await;
        // Whoever held the flight before may have exchanged meanwhile, or just failed to.
        if let Some(token) = slot.current() {
            return Ok(token);
        }
        let subject = self.subjects.of(identity).ok_or(TokenError::NoSubject)?;
        let digest: [u8; 32] = Sha256::digest(subject.expose().as_bytes()).into();
        if let Some(failed) = slot.failed.locked().as_ref()
            && failed.at.elapsed() < RETRY_AFTER
            && failed.subject == digest
        {
            return Err(TokenError::Recent { why: failed.why.clone() });
        }
        match self.request(&subject).await {
            Ok(held) => {
                let token = held.secret.expose().to_owned();
                *slot.held.locked() = Some(held);
                *slot.failed.locked() = None;
                tracing::debug!(%identity, audience = %self.exchange.audience, "exchanged a caller's token");
                Ok(token)
            }
            Err(err) => {
                tracing::debug!(%identity, audience = %self.exchange.audience, "a token exchange failed: {err}");
                *slot.failed.locked() = Some(Failed { at: Instant::now(), why: err.to_string(), subject: digest });
                Err(err)
            }
        }
    }

    /// The upstream refused `token`: the next `get` exchanges again.
    pub fn refused(&self, identity: &str, token: &str) {
        if let Some(slot) = self.slots.locked().get(identity) {
            let mut held = slot.held.locked();
            if held.as_ref().is_some_and(|held| held.secret.expose() == token) {
                *held = None;
            }
        }
    }

    /// `identity`'s slot, made on first use.
    fn slot(&self, identity: &str) -> Arc<Slot> {
        let mut slots = self.slots.locked();
        if let Some(slot) = slots.get(identity) {
            return slot.clone();
        }
        if slots.len() >= MAX_IDENTITIES {
            // Those no call is using now; a waiting call keeps its own slot alive meanwhile.
            slots.retain(|_, slot| Arc::strong_count(slot) > 1);
        }
        slots.entry(identity.to_owned()).or_default().clone()
    }

    /// One exchange of `subject` at the token endpoint.
    async fn request(&self, subject: &Secret) -> Result<Held, TokenError> {
        let endpoint = &self.exchange.token_endpoint;
        let failed = |why: &str| TokenError::Request { endpoint: endpoint.clone(), why: why.into() };
        let client = &self.exchange.client;
        let secret = hangar_core::small_file::read_regular(&client.secret_file, MAX_SECRET_BYTES).map_err(|err| {
            TokenError::Secret { path: client.secret_file.display().to_string(), why: err.to_string() }
        })?;
        let mut form = vec![
            ("grant_type", GRANT_TYPE),
            ("subject_token", subject.expose()),
            ("subject_token_type", ACCESS_TOKEN_TYPE),
            ("requested_token_type", ACCESS_TOKEN_TYPE),
            ("audience", self.exchange.audience.as_str()),
        ];
        let scope = self.exchange.scopes.join(" ");
        if !scope.is_empty() {
            form.push(("scope", scope.as_str()));
        }
        let asked = Instant::now();
        let sent = self
            .http
            .post(endpoint)
            .header(reqwest::header::ACCEPT, "application/json")
            // RFC 6749 §2.3.1: the id and secret are form-encoded before they are joined.
            .basic_auth(form_encoded(&client.id), Some(form_encoded(secret.trim())))
            .form(&form)
            .timeout(TOKEN_TIMEOUT)
            .send()
            .await
            .map_err(|err| failed(if err.is_timeout() { "timed out" } else { "the request did not complete" }))?;
        drop(secret);
        let status = sent.status();
        let body = read_bounded(sent).await.ok_or_else(|| failed("the answer could not be read"))?;
        let answer: Answer = serde_json::from_slice(&body).unwrap_or_default();
        if !status.is_success() {
            return Err(failed(&match answer.error.as_deref().filter(|code| is_error_code(code)) {
                Some(code) => format!("refused: {code}"),
                None => format!("refused with HTTP {}", status.as_u16()),
            }));
        }
        let Some(token) = answer.access_token.filter(|token| !token.is_empty()) else {
            return Err(failed("the answer was not a token response"));
        };
        if !answer.token_type.as_deref().is_some_and(|kind| kind.eq_ignore_ascii_case("bearer")) {
            return Err(failed("the exchanged token is not a bearer token"));
        }
        let lifetime = answer.expires_in.map(Duration::from_secs).unwrap_or(UNSTATED_LIFETIME);
        let ahead = (lifetime / 10).min(MAX_RENEW_AHEAD);
        Ok(Held { secret: Secret::new(token), renew_at: asked + (lifetime - ahead) })
    }
}

/// The parts of a token endpoint's answer read (RFC 6749 §5.1 and §5.2, RFC 8693 §2.2).
#[derive(Default, serde::Deserialize)]
struct Answer {
    access_token: Option<String>,
    token_type: Option<String>,
    expires_in: Option<u64>,
    error: Option<String>,
}

/// `text` as `application/x-www-form-urlencoded` encodes it.
fn form_encoded(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// Whether `code` is an OAuth error code as RFC 6749 §5.2 allows one (printable ASCII without
/// `"` or `\`), short: only such a code is repeated in an error.
fn is_error_code(code: &str) -> bool {
    !code.is_empty()
        && code.len() <= MAX_CODE_CHARS
        && code.bytes().all(|b| matches!(b, 0x20..=0x21 | 0x23..=0x5B | 0x5D..=0x7E))
}

/// The answer's body, if it is not larger than [`MAX_ANSWER_BYTES`].
async fn read_bounded(mut response: reqwest::Response) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.ok()? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    Some(body)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::post;
    use base64::Engine as _;

    use super::*;

    /// What the fake token endpoint does and saw.
    #[derive(Default)]
    struct Endpoint {
        /// Exchanges asked for, by subject token.
        asked: Mutex<Vec<HashMap<String, String>>>,
        /// The `Authorization` headers it got.
        auth: Mutex<Vec<String>>,
        /// Refuse every exchange with `invalid_grant` (and a free text that must not show).
        refuse: std::sync::atomic::AtomicBool,
        /// Answers for a subject starting `slow` are held until this many exchanges came.
        slow_until: AtomicUsize,
        /// `expires_in` of the tokens it issues.
        expires_in: AtomicUsize,
        count: AtomicUsize,
    }

    async fn token(State(endpoint): State<Arc<Endpoint>>, headers: HeaderMap, body: String) -> (StatusCode, String) {
        let form: HashMap<String, String> = form_urlencoded::parse(body.as_bytes()).into_owned().collect();
        let n = endpoint.count.fetch_add(1, Ordering::SeqCst) + 1;
        endpoint
            .auth
            .locked()
            .push(headers.get("authorization").and_then(|value| value.to_str().ok()).unwrap_or_default().to_owned());
        endpoint.asked.locked().push(form.clone());
        let subject = form.get("subject_token").cloned().unwrap_or_default();
        if subject.starts_with("slow") {
            // Held until another identity's exchange has been answered.
            while endpoint.count.load(Ordering::SeqCst) < endpoint.slow_until.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        if endpoint.refuse.load(Ordering::SeqCst) {
            let body = r#"{"error":"invalid_grant","error_description":"SERVER FREE TEXT"}"#;
            return (StatusCode::BAD_REQUEST, body.into());
        }
        let body = serde_json::json!({
            "access_token": format!("exchanged-{subject}-{n}"),
            "issued_token_type": ACCESS_TOKEN_TYPE,
            "token_type": "Bearer",
            "expires_in": endpoint.expires_in.load(Ordering::SeqCst),
        });
        (StatusCode::OK, body.to_string())
    }

    /// A token endpoint on loopback, and an exchanger of `subjects` that uses it.
    async fn exchanger(subjects: Arc<Subjects>) -> (Arc<Exchanger>, Arc<Endpoint>, tempfile::TempDir) {
        let endpoint = Arc::new(Endpoint::default());
        endpoint.expires_in.store(3600, Ordering::SeqCst);
        let app = axum::Router::new().route("/token", post(token)).with_state(endpoint.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "s3cret:&\n").unwrap();
        let config: TokenExchange = serde_json::from_value(serde_json::json!({
            "token_endpoint": url,
            "client": {"id": "hangar", "secret_file": secret},
            "audience": "https://internal.example/mcp",
            "scopes": ["mcp", "read"],
        }))
        .unwrap();
        (Arc::new(Exchanger::new(reqwest::Client::new(), &config, subjects)), endpoint, dir)
    }

    #[tokio::test]
    async fn a_caller_with_no_token_gets_no_subject_and_nothing_is_asked() {
        let (exchanger, endpoint, _dir) = exchanger(Arc::default()).await;
        assert!(matches!(exchanger.get("key-caller").await, Err(TokenError::NoSubject)));
        assert_eq!(endpoint.count.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn the_exchange_asks_for_the_audience_and_scopes_as_the_authenticated_client() {
        let subjects = Arc::new(Subjects::default());
        subjects.offer("oauth:alice", Secret::new("alice-inbound"));
        let (exchanger, endpoint, _dir) = exchanger(subjects).await;
        let token = exchanger.get("oauth:alice").await.unwrap();
        assert_eq!(token, "exchanged-alice-inbound-1");
        assert_eq!(exchanger.current("oauth:alice").as_deref(), Some(token.as_str()));
        let asked = endpoint.asked.locked()[0].clone();
        assert_eq!(asked["grant_type"], GRANT_TYPE);
        assert_eq!(asked["subject_token"], "alice-inbound");
        assert_eq!(asked["subject_token_type"], ACCESS_TOKEN_TYPE);
        assert_eq!(asked["audience"], "https://internal.example/mcp");
        assert_eq!(asked["scope"], "mcp read");
        let basic = base64::engine::general_purpose::STANDARD.encode("hangar:s3cret%3A%26");
        assert_eq!(endpoint.auth.locked()[0], format!("Basic {basic}"));
    }

    #[tokio::test]
    async fn twenty_calls_of_one_identity_make_one_exchange_and_identities_keep_their_own() {
        let subjects = Arc::new(Subjects::default());
        subjects.offer("oauth:alice", Secret::new("alice-inbound"));
        subjects.offer("oauth:bob", Secret::new("bob-inbound"));
        let (exchanger, endpoint, _dir) = exchanger(subjects).await;
        let calls: Vec<_> = (0..40)
            .map(|n| {
                let exchanger = exchanger.clone();
                let identity = if n % 2 == 0 { "oauth:alice" } else { "oauth:bob" };
                tokio::spawn(async move { (identity, exchanger.get(identity).await.unwrap()) })
            })
            .collect();
        for call in calls {
            let (identity, token) = call.await.unwrap();
            let own = identity.trim_start_matches("oauth:");
            assert!(token.starts_with(&format!("exchanged-{own}-inbound-")), "{identity} got {token}");
        }
        assert_eq!(endpoint.count.load(Ordering::SeqCst), 2, "one exchange per identity");
    }

    #[tokio::test]
    async fn one_identitys_slow_exchange_does_not_hold_anothers() {
        let subjects = Arc::new(Subjects::default());
        subjects.offer("oauth:slow", Secret::new("slow-inbound"));
        subjects.offer("oauth:bob", Secret::new("bob-inbound"));
        let (exchanger, endpoint, _dir) = exchanger(subjects).await;
        // The slow one is answered only once a second exchange has come in.
        endpoint.slow_until.store(2, Ordering::SeqCst);
        let slow = tokio::spawn({
            let exchanger = exchanger.clone();
            async move { exchanger.get("oauth:slow").await }
        });
        while endpoint.count.load(Ordering::SeqCst) < 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let bob = tokio::time::timeout(Duration::from_secs(10), exchanger.get("oauth:bob")).await;
        assert_eq!(bob.expect("bob was not held").unwrap(), "exchanged-bob-inbound-2");
        assert_eq!(slow.await.unwrap().unwrap(), "exchanged-slow-inbound-1");
    }

    #[tokio::test]
    async fn a_refusal_is_kept_for_a_while_and_tells_the_code_only() {
        let subjects = Arc::new(Subjects::default());
        subjects.offer("oauth:alice", Secret::new("alice-inbound"));
        let (exchanger, endpoint, _dir) = exchanger(subjects.clone()).await;
        endpoint.refuse.store(true, Ordering::SeqCst);
        for n in 0..5 {
            let err = exchanger.get("oauth:alice").await.expect_err("refused");
            let text = err.to_string();
            assert!(text.contains("invalid_grant"), "{text}");
            assert!(!text.contains("FREE TEXT") && !text.contains("alice-inbound") && !text.contains("s3cret"));
            assert_eq!(matches!(err, TokenError::Recent { .. }), n > 0, "{text}");
        }
        assert_eq!(endpoint.count.load(Ordering::SeqCst), 1, "the refusal was not asked again");
        // A caller who came back with another token is tried again at once.
        endpoint.refuse.store(false, Ordering::SeqCst);
        subjects.offer("oauth:alice", Secret::new("alice-renewed"));
        assert_eq!(exchanger.get("oauth:alice").await.unwrap(), "exchanged-alice-renewed-2");
    }

    #[tokio::test]
    async fn a_refused_or_expiring_token_is_exchanged_again() {
        let subjects = Arc::new(Subjects::default());
        subjects.offer("oauth:alice", Secret::new("alice-inbound"));
        let (exchanger, endpoint, _dir) = exchanger(subjects).await;
        let first = exchanger.get("oauth:alice").await.unwrap();
        exchanger.refused("oauth:alice", "someone else's");
        assert_eq!(exchanger.get("oauth:alice").await.unwrap(), first, "another token's refusal changes nothing");
        exchanger.refused("oauth:alice", &first);
        assert_eq!(exchanger.current("oauth:alice"), None);
        let second = exchanger.get("oauth:alice").await.unwrap();
        assert_eq!(second, "exchanged-alice-inbound-2");
        // A token that is already due for renewal is not kept.
        endpoint.expires_in.store(0, Ordering::SeqCst);
        exchanger.refused("oauth:alice", &second);
        assert_eq!(exchanger.get("oauth:alice").await.unwrap(), "exchanged-alice-inbound-3");
        assert_eq!(exchanger.get("oauth:alice").await.unwrap(), "exchanged-alice-inbound-4");
    }
}
