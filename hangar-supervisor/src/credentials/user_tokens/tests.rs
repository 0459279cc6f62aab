//! `UserTokens` against a token endpoint on loopback that answers refreshes as a test scripts
//! it: one flight per identity, never across identities, the old refresh token kept, a refused
//! token refreshed once, `invalid_grant` forgetting.

use std::sync::atomic::{AtomicUsize, Ordering};

use hangar_core::credentials_config::CredentialsConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;

use super::*;

const ISSUER: &str = "http://as.test";
const RESOURCE: &str = "http://mcp.test/mcp";

/// The fake token endpoint's script: refresh token `gated-*` waits for `gate`; `dead-*` is
/// answered `invalid_grant`; `quiet-*` gets no new refresh token; others get `next-<n>`.
struct Endpoint {
    url: String,
    asked: Arc<AtomicUsize>,
    gate: Arc<Notify>,
}

async fn token_endpoint() -> Endpoint {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    let asked = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Notify::new());
    let (counted, gated) = (asked.clone(), gate.clone());
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
            let gate = gated.clone();
            tokio::spawn(async move {
                let body = read_request(&mut socket).await;
                let refresh =
                    body.split('&').find_map(|pair| pair.strip_prefix("refresh_token=")).unwrap_or_default().to_owned();
                if refresh.starts_with("gated-") {
                    gate.notified().await;
                }
                let (status, answer) = if refresh.starts_with("dead-") {
                    ("400 Bad Request", r#"{"error":"invalid_grant","error_description":"upstream words"}"#.to_owned())
                } else if refresh.starts_with("quiet-") {
                    ("200 OK", format!(r#"{{"access_token":"fresh-{n}","token_type":"Bearer","expires_in":300}}"#))
                } else {
                    let access = format!(r#""access_token":"fresh-{n}","token_type":"Bearer","expires_in":300"#);
                    ("200 OK", format!(r#"{{{access},"refresh_token":"next-{n}"}}"#))
                };
                let answer = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                );
                let _ = socket.write_all(answer.as_bytes()).await;
            });
        }
    });
    Endpoint { url, asked, gate }
}

/// The body of one HTTP request (by its Content-Length).
async fn read_request(socket: &mut tokio::net::TcpStream) -> String {
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let Ok(n) = socket.read(&mut buffer).await else { return String::new() };
        if n == 0 {
            return String::new();
        }
        bytes.extend_from_slice(&buffer[..n]);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|line| line.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if body.len() >= length {
                return body.to_owned();
            }
        }
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    vault: Arc<Vault>,
    tokens: Arc<UserTokens>,
    endpoint: Endpoint,
}

async fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let journal = crate::journal::Journal::open(dir.path()).unwrap();
    let vault = Arc::new(Vault::open(&CredentialsConfig::default(), dir.path(), journal.path()).unwrap());
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "web-secret").unwrap();
    let oauth: UpstreamOAuth = serde_json::from_value(serde_json::json!({
        "per": "user", "grant": "authorization_code", "client": {"id": "web", "secret_file": secret},
    }))
    .unwrap();
    let endpoint = token_endpoint().await;
    let tokens = UserTokens::new(reqwest::Client::new(), "linear", RESOURCE, &oauth, Some(vault.clone()));
    *tokens.auth_server.locked() = Some(AuthServer {
        issuer: ISSUER.into(),
        token_endpoint: endpoint.url.clone(),
        revocation_endpoint: None,
        authorization_endpoint: None,
        registration_endpoint: None,
        code_challenge_methods: vec!["S256".into()],
        client_id_metadata_document_supported: false,
        iss_parameter_supported: true,
        resource: RESOURCE.into(),
        scopes_supported: Vec::new(),
    });
    Setup { _dir: dir, vault, tokens: Arc::new(tokens), endpoint }
}

fn place(identity: &str) -> Place {
    Place { identity: identity.into(), mcp_server: "linear".into(), issuer: ISSUER.into(), resource: RESOURCE.into() }
}

/// Stores a token for `identity` as the callback does: expired when `expired`.
fn connect(vault: &Vault, identity: &str, access: &str, refresh: Option<&str>, expired: bool) {
    let expires_at_ms = if expired { now_ms() - 1 } else { now_ms() + 300_000 };
    let token = StoredToken {
        access_token: access.into(),
        refresh_token: refresh.map(str::to_owned),
        expires_at_ms: Some(expires_at_ms),
        scopes: vec!["read".into()],
    };
    vault.put(&place(identity), &serde_json::to_vec(&token).unwrap()).unwrap();
}

fn kept(vault: &Vault, identity: &str) -> Option<StoredToken> {
    vault.get(&place(identity)).map(|bytes| serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn a_token_stored_by_the_callback_is_found_and_none_is_not_connected() {
    let setup = setup().await;
    assert!(matches!(setup.tokens.get("alice").await, Err(TokenError::NotConnected)));
    assert!(!setup.tokens.connected("alice"));
    connect(&setup.vault, "alice", "alice-1", Some("r-1"), false);
    assert_eq!(setup.tokens.get("alice").await.unwrap(), "alice-1");
    assert!(setup.tokens.connected("alice"));
    assert_eq!(setup.tokens.current("alice").as_deref(), Some("alice-1"));
    assert!(matches!(setup.tokens.get("bob").await, Err(TokenError::NotConnected)));
    // Connected again: the new token replaces the copy in memory.
    connect(&setup.vault, "alice", "alice-2", Some("r-2"), false);
    assert_eq!(setup.tokens.get("alice").await.unwrap(), "alice-2");
    // Forgotten: no longer served.
    setup.vault.forget("alice", "linear").unwrap();
    assert_eq!(setup.tokens.current("alice"), None);
    assert!(matches!(setup.tokens.get("alice").await, Err(TokenError::NotConnected)));
    assert_eq!(setup.endpoint.asked.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn one_refresh_per_identity_however_many_wait_and_bob_never_waits_on_alice() {
    let setup = setup().await;
    connect(&setup.vault, "alice", "alice-old", Some("gated-alice"), true);
    connect(&setup.vault, "bob", "bob-old", Some("bob-r"), true);
    let alices: Vec<_> = (0..20)
        .map(|_| {
            let tokens = setup.tokens.clone();
            tokio::spawn(async move { tokens.get("alice").await })
        })
        .collect();
    // Alice's refresh is held at the endpoint: bob's own refresh goes through meanwhile.
    tokio::time::timeout(Duration::from_secs(1), async {
        while setup.endpoint.asked.load(Ordering::SeqCst) < 1 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap();
    let bob = tokio::time::timeout(Duration::from_secs(5), setup.tokens.get("bob")).await.expect("bob never waits");
    let bob = bob.unwrap();
    assert!(bob.starts_with("fresh-"), "{bob}");
    assert_eq!(kept(&setup.vault, "bob").unwrap().access_token, bob);
    setup.endpoint.gate.notify_one();
    let mut got = Vec::new();
    for alice in alices {
        got.push(alice.await.unwrap().unwrap());
    }
    assert!(got.iter().all(|token| *token == got[0] && *token != bob), "{got:?}");
    assert_eq!(setup.endpoint.asked.load(Ordering::SeqCst), 2, "one refresh each");
    assert_eq!(kept(&setup.vault, "alice").unwrap().access_token, got[0]);
}

#[tokio::test]
async fn the_old_refresh_token_is_kept_when_none_comes_and_a_refused_token_is_refreshed_once() {
    let setup = setup().await;
    connect(&setup.vault, "alice", "alice-old", Some("quiet-r"), true);
    let fresh = setup.tokens.get("alice").await.unwrap();
    let stored = kept(&setup.vault, "alice").unwrap();
    assert_eq!((stored.access_token.as_str(), stored.refresh_token.as_deref()), (fresh.as_str(), Some("quiet-r")));
    assert_eq!(stored.scopes, ["read"]);
    // Good for 300 s: no request.
    assert_eq!(setup.tokens.get("alice").await.unwrap(), fresh);
    assert_eq!(setup.endpoint.asked.load(Ordering::SeqCst), 1);
    // Another identity's token refused changes nothing of alice's.
    setup.tokens.refused("bob", &fresh);
    assert_eq!(setup.tokens.get("alice").await.unwrap(), fresh);
    setup.tokens.refused("alice", &fresh);
    assert_eq!(setup.tokens.current("alice"), None);
    let again = setup.tokens.get("alice").await.unwrap();
    assert_ne!(again, fresh);
    assert_eq!(setup.tokens.get("alice").await.unwrap(), again, "refreshed once");
    assert_eq!(setup.endpoint.asked.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn invalid_grant_forgets_the_token_and_no_refresh_token_is_not_connected() {
    let setup = setup().await;
    connect(&setup.vault, "alice", "alice-old", Some("dead-r"), true);
    let refused = setup.tokens.get("alice").await.expect_err("refused");
    assert!(matches!(refused, TokenError::NotConnected), "{refused}");
    assert_eq!(kept(&setup.vault, "alice"), None, "forgotten");
    assert!(!refused.to_string().contains("upstream words"));
    connect(&setup.vault, "bob", "bob-old", None, true);
    assert!(matches!(setup.tokens.get("bob").await, Err(TokenError::NotConnected)));
    assert_eq!(setup.endpoint.asked.load(Ordering::SeqCst), 1);
}
