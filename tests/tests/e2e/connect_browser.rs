//! People connecting their own upstream accounts, in a real browser (`crate::browser`): the
//! upstream is a real SDK resource server (tests/fixtures/py_protected_server.py) behind a real
//! authorization server (tests/fixtures/upstream_idp.mjs, `oidc-provider`), where each person
//! signs in as themselves (`crate::upstream_login`).
//!
//! First the person's steps alone, against the authorization server with no hangar: a
//! loopback client asks for a code (PKCE S256, `resource`), alice and bob each sign in in
//! their own browser, and the code each brings back redeems for a token whose subject is who
//! they typed.
//!
//! Then through the hangar (`per: user`, the pre-registered client `hangar-web`): alice, an
//! OAuth identity (`oauth:alice`) signed in to the status page with her access token, connects
//! from its Connect button; bob, with his API key, from the URL `hangar connect` prints, in a
//! browser of his own (the CLI refuses a server without per-user accounts with the hangar's
//! reason). Each signs in at the upstream as themselves. Before either connects, a call is
//! refused with where to connect, and while only alice is, bob is still refused. alice's calls
//! then reach the upstream with alice's token and bob's with bob's (the upstream's `whoami`
//! says whose token came), and bob keeps being served with his own while alice's calls wait
//! for her expired token's slow refresh (`/_ttl`, `/_slow`).

use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use fantoccini::Client;
use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Background, Hangar, bin, free_port, key_hash, node, poll, python, repo_root};

use crate::browser::{WAIT, attribute, click, current_url, eventually, screenshot, text, with_driver};
use crate::status_page::{row, sign_in};
use crate::upstream_login::sign_in_upstream;

const BOB_KEY: &str = "bob-connect-s3cret";

/// alice and bob, each an identity of their own with no admin rights: alice an OAuth identity
/// (`oauth:alice`, her access token from the callers' IdP, tests/fixtures/idp.mjs), bob a key's;
/// `prot` is the protected upstream, each caller connecting their own account there.
const CONFIG: &str = r#"
auth:
  api_keys:
    - {name: bob, hash: "{bob}", profile: dev}
  oauth:
    issuer: {issuer}
    scopes_supported: [mcp]
    required_scopes: [mcp]
    profiles: {developers: dev}
profiles:
  dev: {servers: ["*"]}
credentials: {public_url: "{public}"}
mcp_servers:
  prot:
    mode: remote
    endpoint: {endpoint}
    auth:
      oauth: {per: user, grant: authorization_code, client: {id: hangar-web, secret_file: "{secret}"}, scopes: [read]}
  math: {command: ["{fake}", "--tools", "add"]}
"#;

/// The config with the callers' IdP at `issuer`, `prot` at `endpoint`, the client secret in
/// `secret`, the hangar's API reached by a browser at `public`.
fn config(issuer: &str, endpoint: &str, secret: &std::path::Path, public: &str) -> String {
    CONFIG
        .replace("{issuer}", issuer)
        .replace("{bob}", &key_hash(BOB_KEY))
        .replace("{public}", public)
        .replace("{endpoint}", endpoint)
        .replace("{secret}", &secret.display().to_string())
}

/// The upstream's authorization server, killed when dropped.
struct UpstreamIdp {
    _process: Background,
    /// Its issuer, `http://127.0.0.1:PORT`.
    issuer: String,
}

/// The protected upstream and its authorization server, killed when dropped.
struct Upstream {
    idp: UpstreamIdp,
    _server: Background,
    /// Its MCP endpoint (its canonical resource URI).
    endpoint: String,
    /// The JSON lines it writes, one per `whoami` call: `{sub, client_id, token}`.
    record: tempfile::NamedTempFile,
    /// The hangar's client secret at the authorization server (`hangar-web`'s).
    secret: tempfile::NamedTempFile,
}

impl Upstream {
    fn start() -> Upstream {
        let idp = UpstreamIdp::start(300);
        let port = free_port();
        let record = tempfile::NamedTempFile::new().expect("record file");
        let script = repo_root().join("tests/fixtures/py_protected_server.py").display().to_string();
        let record_path = record.path().display().to_string();
        let server = Background::spawn(&python(), &[&script, &port.to_string(), &idp.issuer, &record_path]);
        let metadata = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp");
        poll("the protected server serves its metadata", WAIT, || {
            crate::oauth::agent().get(&metadata).call().ok().filter(|r| r.status().as_u16() == 200)
        });
        let secret = tempfile::NamedTempFile::new().expect("secret file");
        std::fs::write(secret.path(), "hangar-web-secret\n").expect("write the secret");
        Upstream { idp, _server: server, endpoint: format!("http://127.0.0.1:{port}/mcp"), record, secret }
    }

    /// What reached the upstream, one record per `whoami` call.
    fn calls(&self) -> Vec<Value> {
        std::fs::read_to_string(self.record.path())
            .unwrap_or_default()
            .lines()
            .filter_map(|line| hangar_tests::serde_json::from_str(line).ok())
            .collect()
    }

    /// A test-only knob of the authorization server (`/_ttl?s=N`, `/_slow?ms=N`).
    fn set(&self, knob: &str) {
        let response = crate::oauth::agent().post(&format!("{}/{knob}", self.idp.issuer)).send_empty().unwrap();
        assert_eq!(response.status().as_u16(), 200, "{knob}");
    }

    /// How many tokens the authorization server granted by `grant` so far.
    fn grants(&self, grant: &str) -> u64 {
        let url = format!("{}/_stats", self.idp.issuer);
        let stats: Value = crate::oauth::agent().get(&url).call().unwrap().into_body().read_json().unwrap();
        stats["grants"][grant].as_u64().unwrap_or(0)
    }
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
            let mut response = crate::oauth::agent()
                .post(&format!("{}/token", idp.issuer))
                .send_form(form)
                .expect("the token endpoint");
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

/// The page shows each caller's own connection state, and a Connect button, on a server where
/// each caller connects their own account, and neither on any other.
#[test]
fn the_page_offers_connect_on_a_per_user_server_only() {
    let secret = tempfile::NamedTempFile::new().expect("secret file");
    std::fs::write(secret.path(), "hangar-web-secret\n").expect("write the secret");
    let port = free_port();
    // Nothing listens at the endpoint or the issuer: the page needs only the server's config,
    // and bob is a key's.
    let nowhere = format!("http://127.0.0.1:{}", free_port());
    let config = config(&nowhere, &format!("{nowhere}/mcp"), secret.path(), &format!("http://127.0.0.1:{port}"));
    let hangar = Hangar::start_on(&config, &format!("127.0.0.1:{port}")).expect("a free port");
    crate::browser::in_browser(async |browser| {
        sign_in(browser, &format!("{}/", hangar.base), BOB_KEY).await;
        eventually("bob's row of prot to say he is not connected", || async {
            (attribute(browser, &row("prot", ".connection"), "data-connected").await? == "no").then_some(())
        })
        .await;
        let state = text(browser, &row("prot", ".connection-state")).await;
        assert_eq!(state.as_deref(), Some("not connected"));
        let label = attribute(browser, &row("prot", "button.connect"), "aria-label").await;
        assert_eq!(label.as_deref(), Some("Connect: your account at prot"));
        let math = row("math", ".state");
        eventually("math's row", || text(browser, &math)).await;
        assert_eq!(attribute(browser, &row("math", ".connection"), "hidden").await.as_deref(), Some(""));
        assert_eq!(text(browser, &row("math", "button.connect")).await, None, "math takes no connection");
    });
}

/// `whoami` on `prot` through the hangar as the caller holding `credential` (a key or an
/// access token, sent as the bearer): whose token reached the upstream (its `sub`), or the
/// hangar's refusal.
fn whoami_as(hangar: &Hangar, credential: &str) -> Result<String, String> {
    let call = json!({"mcp_server": "prot", "tool": "whoami", "arguments": {}});
    let params = json!({"name": "hangar_call", "arguments": {"calls": [call]}});
    let bearer = format!("Bearer {credential}");
    let response = hangar.mcp_with("tools/call", params, json!({}), &[("Authorization", &bearer)]);
    assert_eq!(response.status, 200, "{}", response.text);
    let result = &response.body["result"]["structuredContent"]["results"][0];
    if result["success"] != true {
        return Err(result.to_string());
    }
    let text = result["result"]["structuredContent"]["result"].as_str().ok_or_else(|| result.to_string())?;
    let who: Value = hangar_tests::serde_json::from_str(text).map_err(|_| result.to_string())?;
    who["sub"].as_str().map(str::to_owned).ok_or_else(|| result.to_string())
}

/// `GET` `path` of the API as the caller holding `credential`: its JSON (200 expected).
fn api_get_as(hangar: &Hangar, credential: &str, path: &str) -> Value {
    let url = format!("{}{path}", hangar.base);
    let request = crate::oauth::agent().get(&url).header("Authorization", format!("Bearer {credential}"));
    let mut response = request.call().expect("the API answers");
    let body = response.body_mut().read_to_string().expect("a body");
    assert_eq!(response.status().as_u16(), 200, "{body}");
    hangar_tests::serde_json::from_str(&body).expect("JSON")
}

/// `GET /api/credentials` as the caller holding `credential`: its own connections.
fn connections_of(hangar: &Hangar, credential: &str) -> Vec<Value> {
    api_get_as(hangar, credential, "/api/credentials")["credentials"].as_array().cloned().unwrap_or_default()
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_secs()
}

/// alice connects from the status page: signed in there with her access token, her row of
/// `prot` says she is not connected; its Connect button takes her to the upstream's login,
/// where she signs in as alice, and back at the hangar's callback; the page then says she is
/// connected, and not where (the upstream's issuer).
async fn alice_connects_from_the_page(browser: &Client, hangar: &Hangar, alice: &str, upstream: &Upstream) {
    sign_in(browser, &format!("{}/", hangar.base), alice).await;
    let connection = row("prot", ".connection");
    eventually("alice's row of prot to say she is not connected", || async {
        (attribute(browser, &connection, "data-connected").await? == "no").then_some(())
    })
    .await;
    assert_eq!(text(browser, &row("prot", "button.connect")).await.as_deref(), Some("Connect"));
    let page = current_url(browser).await;
    click(browser, &row("prot", "button.connect")).await;
    eventually("the Connect button to lead away from the page", || async {
        if let Some(refused) = text(browser, &row("prot", ".action-result[data-failed]")).await {
            panic!("the page could not connect: {refused}");
        }
        (current_url(browser).await != page).then_some(())
    })
    .await;
    let callback = format!("{}/oauth/callback", hangar.base);
    sign_in_upstream(browser, "alice", &callback).await;
    let landed = current_url(browser).await;
    assert!(landed.starts_with(&callback), "{landed}");
    poll("alice's connection to be stored", WAIT, || (!connections_of(hangar, alice).is_empty()).then_some(()));
    // Back on the page (the tab kept her credential): connected.
    browser.goto(&format!("{}/", hangar.base)).await.expect("the page opens");
    eventually("alice's row of prot to say she is connected", || async {
        (attribute(browser, &connection, "data-connected").await? == "yes").then_some(())
    })
    .await;
    assert_eq!(text(browser, &row("prot", "button.connect")).await.as_deref(), Some("Connect again"));
    // The page speaks in its own words: nothing of what the upstream's side named (its
    // authorization server), though the connection the page read names it.
    let shown = text(browser, "body").await.unwrap_or_default();
    assert!(connections_of(hangar, alice)[0]["issuer"] == upstream.idp.issuer.as_str());
    assert!(!shown.contains(&upstream.idp.issuer), "the page shows the upstream's issuer: {shown}");
    screenshot(browser, "connect-page").await;
}

/// `hangar connect SERVER` as bob: its exit code, stdout and stderr.
fn hangar_connect(hangar: &Hangar, server: &str) -> (Option<i32>, String, String) {
    let output = Command::new(bin("hangar"))
        .args(["--url", &hangar.base, "connect", server])
        .env("HANGAR_API_KEY", BOB_KEY)
        .output()
        .expect("hangar runs");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.code(), text(&output.stdout), text(&output.stderr))
}

/// bob connects from the URL `hangar connect prot` prints for him, in a browser of his own
/// (`hangar connect math`, a server with no per-user accounts, is refused with the hangar's
/// reason).
async fn bob_connects_from_the_cli(browser: &Client, hangar: &Hangar) {
    let (code, stdout, stderr) = hangar_connect(hangar, "math");
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("`math` takes no account of its callers' own"), "{stderr}");
    let (code, stdout, stderr) = hangar_connect(hangar, "prot");
    assert_eq!(code, Some(0), "hangar connect prot: {stderr}");
    let url = stdout
        .lines()
        .map(str::trim)
        .find(|line| line.starts_with(&format!("{}/oauth/connect/prot?", hangar.base)))
        .unwrap_or_else(|| panic!("no connect URL printed: {stdout}"));
    assert!(stdout.contains("It works once, until "), "{stdout}");
    browser.goto(url).await.expect("the connect URL opens");
    sign_in_upstream(browser, "bob", &format!("{}/oauth/callback", hangar.base)).await;
    poll("bob's connection to be stored", WAIT, || (!connections_of(hangar, BOB_KEY).is_empty()).then_some(()));
}

#[test]
fn alice_and_bob_each_connect_their_own_account_and_each_calls_with_their_own_token() {
    let upstream = Upstream::start();
    let port = free_port();
    let public = format!("http://127.0.0.1:{port}");
    let callers_idp = crate::oauth::Idp::start(free_port());
    let config = config(&callers_idp.url, &upstream.endpoint, upstream.secret.path(), &public);
    let hangar = Hangar::start_on(&config, &format!("127.0.0.1:{port}")).expect("a free port");
    let alice = callers_idp.token("alice", "mcp", &format!("{}/mcp", hangar.base));
    let who = api_get_as(&hangar, &alice, "/api/whoami");
    assert_eq!(who["identity"], "oauth:alice", "{who}");

    // Nobody is connected: nobody's call reaches the upstream; alice is told where to connect.
    let refused = whoami_as(&hangar, &alice).expect_err("alice has no token yet");
    assert!(refused.contains(&format!("{public}/oauth/connect/prot?")), "{refused}");
    assert!(upstream.calls().is_empty());

    // alice's first token is short-lived (a second), so that her next call must refresh it;
    // bob's lives on.
    upstream.set("_ttl?s=1");
    let alice_connected_at = with_driver(async |driver| {
        let browser = driver.session().await;
        alice_connects_from_the_page(&browser, &hangar, &alice, &upstream).await;
        let connected_at = unix_now();
        let _ = browser.close().await;
        // alice's connection serves alice alone: bob, not connected yet, is still refused.
        assert!(whoami_as(&hangar, BOB_KEY).is_err(), "bob is not served with alice's token");
        assert!(upstream.calls().is_empty());
        upstream.set("_ttl?s=300");
        let bob = driver.session().await;
        bob_connects_from_the_cli(&bob, &hangar).await;
        let _ = bob.close().await;
        connected_at
    });
    // Each sees only their own connection.
    for (credential, who) in [(alice.as_str(), "alice"), (BOB_KEY, "bob")] {
        let mine = connections_of(&hangar, credential);
        assert_eq!(mine.len(), 1, "{who}: {mine:?}");
        assert_eq!(mine[0]["mcp_server"], "prot", "{who}: {mine:?}");
    }
    assert_eq!(whoami_as(&hangar, BOB_KEY).as_deref(), Ok("bob"));

    // alice's token has expired; her refresh is slow. While her call waits for it, bob calls
    // again and again: each is served at once, with bob's own token.
    let expires = connections_of(&hangar, &alice)[0]["expires_at"].as_str().map(str::to_owned);
    assert!(expires.is_some(), "the hangar knows when alice's token expires");
    poll("alice's one-second token to expire", WAIT, || (unix_now() >= alice_connected_at + 2).then_some(()));
    let refreshed = upstream.grants("refresh_token");
    upstream.set("_slow?ms=4000");
    let bob_during = std::thread::scope(|scope| {
        let alice_call = scope.spawn(|| whoami_as(&hangar, &alice));
        let mut served = 0;
        while !alice_call.is_finished() {
            assert_eq!(whoami_as(&hangar, BOB_KEY).as_deref(), Ok("bob"), "bob is served with his own token");
            served += 1;
        }
        assert_eq!(alice_call.join().expect("alice's call").as_deref(), Ok("alice"), "after her refresh");
        served
    });
    upstream.set("_slow?ms=0");
    assert_eq!(upstream.grants("refresh_token"), refreshed + 1, "alice's token was refreshed once");
    assert!(bob_during >= 2, "bob was served while alice's refresh waited, not behind it ({bob_during} calls)");

    // As the upstream saw them: each call carried its caller's token, and no token served both.
    let calls = upstream.calls();
    let tokens_of = |who: &str| -> Vec<String> {
        calls.iter().filter(|c| c["sub"] == who).map(|c| c["token"].as_str().unwrap_or_default().to_owned()).collect()
    };
    let (alices, bobs) = (tokens_of("alice"), tokens_of("bob"));
    assert_eq!(alices.len() + bobs.len(), calls.len(), "only alice's and bob's tokens came: {calls:?}");
    assert!(!alices.is_empty() && !bobs.is_empty());
    assert!(alices.iter().all(|token| !bobs.contains(token)), "a token served both");
    for call in &calls {
        assert_eq!(call["client_id"], "hangar-web", "{call}");
    }
}
