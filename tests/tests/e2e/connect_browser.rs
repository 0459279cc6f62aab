//! People connecting their own upstream accounts, in a real browser (`crate::browser`): the
//! upstream is a real SDK resource server (tests/fixtures/py_protected_server.py) behind a real
//! authorization server (tests/fixtures/upstream_idp.mjs, `oidc-provider`), where each person
//! signs in as themselves (`crate::upstream_login`).
//!
//! First the person's steps alone, against the authorization server with no hangar: a
//! loopback client asks for a code (PKCE S256, `resource`), alice and bob each sign in in
//! their own browser, and the code each brings back redeems for a token whose subject is who
//! they typed.

use std::sync::mpsc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hangar_tests::serde_json::Value;
use hangar_tests::{Background, free_port, key_hash, node, repo_root};

use crate::browser::{WAIT, with_driver};
use crate::upstream_login::sign_in_upstream;

/// The upstream's authorization server, killed when dropped.
struct UpstreamIdp {
    _process: Background,
    /// Its issuer, `http://127.0.0.1:PORT`.
    issuer: String,
}

impl UpstreamIdp {
    /// Access tokens live `ttl_s` seconds.
    fn start(ttl_s: u32) -> UpstreamIdp {
        let package = repo_root().join(".tools/oidc-provider/node_modules/oidc-provider/package.json");
        assert!(package.exists(), "{} is missing; run scripts/setup-clients", package.display());
        let port = free_port();
        let script = repo_root().join("tests/fixtures/upstream_idp.mjs").display().to_string();
        let process =
            Background::start(&node(), &[&script, &port.to_string(), &ttl_s.to_string()], "upstream idp listening");
        UpstreamIdp { _process: process, issuer: format!("http://127.0.0.1:{port}") }
    }
}

/// A loopback redirect target: each request to `/oauth/callback` (as a URL on a stand-in
/// host, for its query), answered 200.
struct Callback {
    url: String,
    arrived: mpsc::Receiver<String>,
}

impl Callback {
    fn serve() -> Callback {
        let server = tiny_http::Server::http("127.0.0.1:0").expect("bind the callback");
        let port = server.server_addr().to_ip().expect("an IP address").port();
        let (tx, arrived) = mpsc::channel();
        std::thread::spawn(move || {
            for request in server.incoming_requests() {
                if request.url().starts_with("/oauth/callback?") {
                    let _ = tx.send(format!("http://callback{}", request.url()));
                }
                let _ = request.respond(tiny_http::Response::from_string("back at the client"));
            }
        });
        Callback { url: format!("http://127.0.0.1:{port}/oauth/callback"), arrived }
    }
}

/// The value of `name` in the query of `url`.
fn query_value(url: &str, name: &str) -> Option<String> {
    let url = url::Url::parse(url).ok()?;
    url.query_pairs().find(|(key, _)| key == name).map(|(_, value)| value.into_owned())
}

/// PKCE S256: base64url(SHA-256(verifier)).
fn challenge(verifier: &str) -> String {
    let hex = key_hash(verifier);
    let hex = hex.strip_prefix("sha256:").unwrap_or(&hex);
    let digest: Vec<u8> =
        (0..hex.len()).step_by(2).map(|at| u8::from_str_radix(&hex[at..at + 2], 16).expect("hex")).collect();
    URL_SAFE_NO_PAD.encode(digest)
}

/// The claims of a JWT (its signature unchecked: the test only reads whose it is).
fn jwt_claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("a JWT has three parts");
    let bytes = URL_SAFE_NO_PAD.decode(payload).expect("a base64url payload");
    hangar_tests::serde_json::from_slice(&bytes).expect("JSON claims")
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(WAIT)).build().into()
}

#[test]
fn each_person_signs_in_at_the_upstream_as_themselves_and_their_code_brings_their_token() {
    let idp = UpstreamIdp::start(300);
    let callback = Callback::serve();
    let resource = "http://127.0.0.1:9/mcp";
    with_driver(async |driver| {
        for person in ["alice", "bob"] {
            // A browser of their own: the authorization server knows nobody there yet.
            let browser = driver.session().await;
            let verifier = format!("{person}-verifier-0123456789-0123456789-0123456789");
            let state = format!("state-of-{person}");
            let authorize = url::Url::parse_with_params(
                &format!("{}/auth", idp.issuer),
                [
                    ("client_id", "hangar-web"),
                    ("response_type", "code"),
                    ("scope", "openid offline_access read"),
                    ("redirect_uri", callback.url.as_str()),
                    ("code_challenge", challenge(&verifier).as_str()),
                    ("code_challenge_method", "S256"),
                    ("state", state.as_str()),
                    ("resource", resource),
                    ("prompt", "consent"),
                ],
            )
            .expect("an authorize URL");
            browser.goto(authorize.as_str()).await.expect("the authorize URL opens");
            sign_in_upstream(&browser, person, &callback.url).await;
            let back = callback.arrived.recv_timeout(WAIT).expect("the code arrives at the callback");
            assert_eq!(query_value(&back, "state").as_deref(), Some(state.as_str()), "{back}");
            assert_eq!(query_value(&back, "iss").as_deref(), Some(idp.issuer.as_str()), "RFC 9207: {back}");
            let code = query_value(&back, "code").unwrap_or_else(|| panic!("no code: {back}"));

            let form = [
                ("grant_type", "authorization_code"),
                ("code", code.as_str()),
                ("redirect_uri", callback.url.as_str()),
                ("code_verifier", verifier.as_str()),
                ("resource", resource),
                ("client_id", "hangar-web"),
                ("client_secret", "hangar-web-secret"),
            ];
            let mut response =
                agent().post(&format!("{}/token", idp.issuer)).send_form(form).expect("the token endpoint");
            let text = response.body_mut().read_to_string().expect("a body");
            assert_eq!(response.status().as_u16(), 200, "{text}");
            let tokens: Value = hangar_tests::serde_json::from_str(&text).expect("JSON");
            let claims = jwt_claims(tokens["access_token"].as_str().expect("an access token"));
            assert_eq!(claims["sub"], person, "whose token: {claims}");
            assert_eq!(claims["aud"], resource, "bound to the resource asked for: {claims}");
            assert!(tokens["refresh_token"].is_string(), "refreshable: {}", tokens["scope"]);
            let _ = browser.close().await;
        }
    });
    // Nothing else came back.
    assert!(callback.arrived.recv_timeout(Duration::from_millis(10)).is_err());
}
