//! Each caller connects their own account to a `per: user` upstream (the authorization-code
//! flow): the person's side is a plain HTTP client with a cookie jar, through the upstream's
//! real authorization server (`oidc-provider`, tests/fixtures/upstream_idp.mjs: its dev login
//! form signs in whoever is typed, then a consent page), in front of a real SDK resource server
//! (tests/fixtures/py_protected_server.py). The hangar mints the flow for its caller, binds it to
//! the browser that opens it, checks the callback's `iss` before it redeems the code, stores the
//! token sealed under the caller's identity, registers itself once per issuer, and revokes a
//! connection before it forgets it.

use std::time::Duration;

use hangar_tests::{Hangar, free_port, key_hash, poll};
use nix::sys::signal::Signal;
use serde_json::{Value, json};

pub(crate) const ALICE: &str = "alice-key-0123456789abcdef";
pub(crate) const BOB: &str = "bob-key-0123456789abcdef01";
const WEB_SECRET: &str = "hangar-web-secret";

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// The upstream (`upstream_oauth.rs`'s), and the file holding the pre-registered
/// `hangar-web` client's secret.
pub(crate) struct Upstream {
    pub(crate) up: crate::upstream_oauth::Upstream,
    secret: tempfile::NamedTempFile,
}

impl Upstream {
    /// The pre-registered client's secret file, as a config names it.
    pub(crate) fn secret_path(&self) -> String {
        self.secret.path().display().to_string()
    }

    pub(crate) fn start() -> Upstream {
        let secret = tempfile::NamedTempFile::new().expect("secret file");
        std::fs::write(secret.path(), format!("{WEB_SECRET}\n")).expect("write the secret");
        Upstream { up: crate::upstream_oauth::Upstream::start(300), secret }
    }

    /// The authorization server's counters: grants by type, registrations, revocations.
    fn stats(&self) -> Value {
        agent().get(&format!("{}/_stats", self.up.idp)).call().unwrap().into_body().read_json().unwrap()
    }

    fn codes_redeemed(&self) -> u64 {
        self.up.grants("authorization_code")
    }
}

/// A hangar whose API listens at `listen`, its browser-facing URL the same, with alice and bob
/// as key callers and the protected server as `prot` (its `auth.oauth.client` as `client`,
/// none when empty).
fn config(upstream: &Upstream, listen: &str, client: &str) -> String {
    let client = client.replace("{secret}", &upstream.secret.path().display().to_string());
    format!(
        "auth:\n  api_keys:\n    - {{name: alice, hash: \"{}\"}}\n    - {{name: bob, hash: \"{}\"}}\n\
         credentials: {{public_url: \"http://{listen}\"}}\n\
         mcp_servers:\n  prot:\n    mode: remote\n    endpoint: {}\n    auth:\n      oauth: {{per: user, grant: authorization_code, scopes: [read]{client}}}\n",
        key_hash(ALICE),
        key_hash(BOB),
        upstream.up.endpoint,
    )
}

pub(crate) const PRE_REGISTERED: &str = ", client: {id: hangar-web, secret_file: \"{secret}\"}";

fn start(upstream: &Upstream, client: &str) -> (Hangar, String) {
    let listen = format!("127.0.0.1:{}", free_port());
    let hangar = Hangar::start_with(&config(upstream, &listen, client), &["--listen", &listen]);
    (hangar, listen)
}

/// `POST /oauth/connect/prot` as the caller with `key`: the connect URL.
fn connect_url(hangar: &Hangar, key: &str) -> String {
    let response = agent()
        .post(&format!("{}/oauth/connect/prot", hangar.base))
        .header("X-API-Key", key)
        .send_json(json!({}))
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let answer: Value = response.into_body().read_json().unwrap();
    assert!(answer["expires_at"].as_str().is_some_and(|at| at.ends_with('Z')), "{answer}");
    answer["url"].as_str().expect("a url").to_owned()
}

/// `GET /api/credentials` as the caller with `key`.
fn credentials(hangar: &Hangar, key: &str) -> Vec<Value> {
    let response = agent().get(&format!("{}/api/credentials", hangar.base)).header("X-API-Key", key).call().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let listed: Value = response.into_body().read_json().unwrap();
    listed["credentials"].as_array().cloned().unwrap_or_default()
}

/// A person's browser: a cookie jar, following redirects itself.
pub(crate) struct Browser {
    agent: ureq::Agent,
}

/// What a browser got: status, where it was sent, the page.
pub(crate) struct Got {
    pub(crate) status: u16,
    location: Option<String>,
    /// The `Set-Cookie` header, if any.
    cookie: Option<String>,
    pub(crate) body: String,
}

impl Browser {
    pub(crate) fn new() -> Browser {
        Browser { agent: agent() }
    }

    fn got(response: ureq::http::Response<ureq::Body>, from: &str) -> Got {
        let status = response.status().as_u16();
        let location =
            response.headers().get("location").and_then(|value| value.to_str().ok()).map(|to| absolute(from, to));
        let cookie = response.headers().get("set-cookie").and_then(|value| value.to_str().ok()).map(str::to_owned);
        let body = response.into_body().read_to_string().unwrap_or_default();
        Got { status, location, cookie, body }
    }

    /// A navigation, as from another site (a link in a chat, the authorization server's
    /// redirect): the hangar's cross-site guard lets such a GET reach its connect steps only.
    fn get(&self, url: &str) -> Got {
        Browser::got(self.agent.get(url).header("Sec-Fetch-Site", "cross-site").call().unwrap(), url)
    }

    /// Opens `connect_url`, signs in as `who` and consents at the authorization server, and
    /// stops where it would be sent back to the hangar: that callback URL.
    fn sign_in(&self, connect_url: &str, who: &str, hangar: &Hangar) -> String {
        let callback = format!("{}/oauth/callback", hangar.base);
        let mut url = connect_url.to_owned();
        let mut got = self.get(&url);
        for _ in 0..20 {
            if let Some(next) = got.location.clone() {
                if next.starts_with(&callback) {
                    return next;
                }
                url = next;
                got = self.get(&url);
                continue;
            }
            assert_eq!(got.status, 200, "{url}: {}", got.body);
            // The dev interactions: a login form, then a consent form, posted to the same URL.
            let form: &[(&str, &str)] = if got.body.contains("name=\"login\"") {
                &[("prompt", "login"), ("login", who), ("password", "any")]
            } else {
                &[("prompt", "consent")]
            };
            got = Browser::got(self.agent.post(&url).send_form(form.iter().copied()).unwrap(), &url);
        }
        panic!("the sign-in never came back to the hangar; last at {url}");
    }

    /// The whole flow: signed in, and back at the hangar's callback; the callback's page.
    pub(crate) fn connect(&self, connect_url: &str, who: &str, hangar: &Hangar) -> Got {
        let callback = self.sign_in(connect_url, who, hangar);
        self.get(&callback)
    }
}

/// `to` (a Location) as an absolute URL, relative to `from`.
fn absolute(from: &str, to: &str) -> String {
    if to.starts_with("http://") || to.starts_with("https://") {
        return to.to_owned();
    }
    let origin_end = from.find("://").map(|at| at + 3).and_then(|at| from[at..].find('/').map(|end| at + end));
    format!("{}{to}", &from[..origin_end.unwrap_or(from.len())])
}

/// `url` with its query parameter `name` set to `value`.
fn with_param(url: &str, name: &str, value: &str) -> String {
    let (base, query) = url.split_once('?').expect("a query");
    let mut pairs: Vec<String> =
        query.split('&').filter(|pair| !pair.starts_with(&format!("{name}="))).map(str::to_owned).collect();
    pairs.push(format!("{name}={}", value.replace(':', "%3A").replace('/', "%2F")));
    format!("{base}?{}", pairs.join("&"))
}

#[test]
fn each_caller_connects_their_own_account_once_registered_and_it_survives_a_restart_sealed() {
    let upstream = Upstream::start();
    // No client configured: the authorization server takes no Client ID Metadata Document, so
    // the hangar registers itself (RFC 7591).
    let (hangar, listen) = start(&upstream, "");
    assert!(credentials(&hangar, ALICE).is_empty());
    let alice = Browser::new();
    let page = alice.connect(&connect_url(&hangar, ALICE), "alice-account", &hangar);
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Connected") && page.body.contains("prot"), "{}", page.body);
    let listed = credentials(&hangar, ALICE);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["mcp_server"], "prot");
    assert_eq!(listed[0]["issuer"], upstream.up.idp);
    assert_eq!(listed[0]["resource"], upstream.up.endpoint);
    assert_eq!(listed[0]["refreshable"], true);
    assert_eq!(listed[0]["usable"], true);
    assert!(credentials(&hangar, BOB).is_empty(), "bob sees none of alice's");
    let bob = Browser::new();
    assert_eq!(bob.connect(&connect_url(&hangar, BOB), "bob-account", &hangar).status, 200);
    assert_eq!(credentials(&hangar, BOB).len(), 1);
    let stats = upstream.stats();
    assert_eq!(stats["registrations"], 1, "registered once for the issuer: {stats}");
    assert_eq!(stats["grants"]["authorization_code"], 2);

    // Nothing stored in clear: the access and refresh tokens are JWTs and opaque strings the
    // hangar never shows; no JWT (`eyJ`) and no client secret lies in any file.
    let files = crate::upstream_credentials::files_under(hangar.dir.path());
    assert!(files.iter().any(|path| path.extension().is_some_and(|ext| ext == "sqlite")), "the journal is there");
    for path in &files {
        let bytes = std::fs::read(path).unwrap_or_default();
        assert!(!String::from_utf8_lossy(&bytes).contains("eyJ"), "{} holds a JWT in clear", path.display());
    }

    // After a restart: still connected, and another flow reuses the kept registration.
    let hangar = hangar.restart(Signal::SIGTERM, &["--listen", &listen]);
    assert_eq!(credentials(&hangar, ALICE).len(), 1);
    assert_eq!(credentials(&hangar, BOB).len(), 1);
    assert_eq!(whoami(&hangar, ALICE)["sub"], "alice-account", "the kept token serves alice's calls");
    assert_eq!(whoami(&hangar, BOB)["sub"], "bob-account");
    assert_eq!(Browser::new().connect(&connect_url(&hangar, ALICE), "alice-account", &hangar).status, 200);
    assert_eq!(upstream.stats()["registrations"], 1, "still one registration after the restart");
    assert_eq!(credentials(&hangar, ALICE).len(), 1, "connecting again replaces the token");
}

#[test]
fn a_foreign_iss_a_browser_without_the_cookie_and_a_used_flow_never_get_a_code_redeemed() {
    let upstream = Upstream::start();
    let (hangar, _) = start(&upstream, PRE_REGISTERED);

    // The answer names another authorization server: refused, and the code never redeemed.
    let browser = Browser::new();
    let callback = browser.sign_in(&connect_url(&hangar, ALICE), "alice-account", &hangar);
    assert!(
        callback.contains(&format!("iss={}", upstream.up.idp.replace(':', "%3A").replace('/', "%2F"))),
        "{callback}"
    );
    let forged = browser.get(&with_param(&callback, "iss", "http://127.0.0.1:9"));
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert!(forged.body.contains("another authorization server"), "{}", forged.body);
    assert!(!forged.body.contains("code="), "no code shown");
    // The flow is used up: the genuine answer is refused too.
    let replayed = browser.get(&callback);
    assert_eq!(replayed.status, 404, "{}", replayed.body);
    assert_eq!(upstream.codes_redeemed(), 0);
    assert!(credentials(&hangar, ALICE).is_empty());

    // A browser that did not open the flow (no binding cookie) cannot finish it, even with the
    // genuine answer; nor can the one that did, afterwards (the flow is used up).
    let browser = Browser::new();
    let callback = browser.sign_in(&connect_url(&hangar, ALICE), "alice-account", &hangar);
    let stranger = Browser::new().get(&callback);
    assert_eq!(stranger.status, 403, "{}", stranger.body);
    assert!(stranger.body.contains("did not start this sign-in"), "{}", stranger.body);
    assert_eq!(browser.get(&callback).status, 404);
    assert_eq!(upstream.codes_redeemed(), 0);

    // The authorization server's refusal is told in the hangar's words: its error code if it is
    // one, nothing else it sent.
    let browser = Browser::new();
    let callback = browser.sign_in(&connect_url(&hangar, ALICE), "alice-account", &hangar);
    let refused = browser.get(&with_param(&with_param(&callback, "code", ""), "error", "%3Cb%3Ebold%3C/b%3E"));
    assert_eq!(refused.status, 502, "the upstream's refusal: {}", refused.body);
    assert!(refused.body.contains("did not grant access (error)"), "{}", refused.body);
    assert!(!refused.body.contains("bold"), "{}", refused.body);
    assert_eq!(upstream.codes_redeemed(), 0);

    // A connect link opened by a second browser after the first: refused.
    let url = connect_url(&hangar, ALICE);
    let first = Browser::new().get(&url);
    assert_eq!(first.status, 302);
    let cookie = first.cookie.expect("the binding cookie");
    assert!(cookie.starts_with("hangar_connect="), "{cookie}");
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/oauth"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "not over http: {cookie}");
    let second = Browser::new().get(&url);
    assert_eq!(second.status, 403, "{}", second.body);

    // A flow is single use: done once, its link and its answer are refused after.
    let browser = Browser::new();
    let url = connect_url(&hangar, ALICE);
    let callback = browser.sign_in(&url, "alice-account", &hangar);
    assert_eq!(browser.get(&callback).status, 200);
    assert_eq!(upstream.codes_redeemed(), 1);
    assert_eq!(browser.get(&callback).status, 404);
    assert_eq!(browser.get(&url).status, 404);
    assert_eq!(upstream.codes_redeemed(), 1);
    assert_eq!(credentials(&hangar, ALICE).len(), 1);
    assert!(credentials(&hangar, BOB).is_empty());
}

#[test]
fn forgetting_a_connection_revokes_it_at_the_authorization_server_first() {
    let upstream = Upstream::start();
    let (hangar, _) = start(&upstream, PRE_REGISTERED);
    assert_eq!(Browser::new().connect(&connect_url(&hangar, ALICE), "alice-account", &hangar).status, 200);
    assert_eq!(Browser::new().connect(&connect_url(&hangar, BOB), "bob-account", &hangar).status, 200);
    assert_eq!(whoami(&hangar, ALICE)["sub"], "alice-account");
    assert_eq!(upstream.stats()["revocations"], 0);
    // Bob cannot forget alice's; alice forgets her own.
    let forget = |key: &str| {
        agent().delete(&format!("{}/api/credentials/prot", hangar.base)).header("X-API-Key", key).call().unwrap()
    };
    assert_eq!(forget(ALICE).status().as_u16(), 204);
    assert!(
        upstream.stats()["revocations"].as_u64().unwrap_or(0) >= 1,
        "revoked: {}\n{}",
        upstream.stats(),
        hangar.log()
    );
    assert!(credentials(&hangar, ALICE).is_empty());
    assert_eq!(credentials(&hangar, BOB).len(), 1, "bob's stays");
    assert_eq!(whoami(&hangar, BOB)["sub"], "bob-account");
    // Alice's next call carries no forgotten token: she is asked to connect again.
    let asked = whoami_result(&hangar, ALICE);
    assert_eq!(asked["success"], false, "{asked}");
    assert!(asked.to_string().contains("/oauth/connect/prot?flow="), "{asked}");
    assert_eq!(forget(ALICE).status().as_u16(), 404);
}

#[test]
fn connecting_is_refused_for_a_server_that_takes_no_account_or_is_outside_the_callers_view() {
    let upstream = Upstream::start();
    let listen = format!("127.0.0.1:{}", free_port());
    let yaml = config(&upstream, &listen, PRE_REGISTERED).replace(
        "mcp_servers:\n",
        "profiles:\n  wide: {servers: [\"*\"]}\n  narrow: {servers: [plain]}\nmcp_servers:\n  plain:\n    command: [\"{fake}\", --tools, add]\n",
    );
    let yaml = yaml
        .replace("{name: alice, hash:", "{name: alice, profile: wide, hash:")
        .replace("{name: bob, hash:", "{name: bob, profile: narrow, hash:");
    let hangar = Hangar::start_with(&yaml, &["--listen", &listen]);
    let begin = |server: &str, key: &str| {
        agent()
            .post(&format!("{}/oauth/connect/{server}", hangar.base))
            .header("X-API-Key", key)
            .send_json(json!({}))
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(begin("plain", ALICE), 400, "not a per-user server");
    assert_eq!(begin("prot", BOB), 404, "outside bob's view");
    assert_eq!(begin("prot", "not-a-key"), 401);
    assert_eq!(begin("prot", ALICE), 200);
    // Minting stays behind the cross-site guard: a page of another site cannot mint a flow
    // with a browser's key.
    let forged = agent()
        .post(&format!("{}/oauth/connect/prot", hangar.base))
        .header("X-API-Key", ALICE)
        .header("Origin", "https://evil.example")
        .send_json(json!({}))
        .unwrap();
    assert_eq!(forged.status().as_u16(), 403);
    // And a cross-site GET of anything but the connect steps is refused as before.
    let elsewhere = agent()
        .get(&format!("{}/api/credentials", hangar.base))
        .header("X-API-Key", ALICE)
        .header("Sec-Fetch-Site", "cross-site")
        .call()
        .unwrap();
    assert_eq!(elsewhere.status().as_u16(), 403);
    // The document an authorization server would fetch names the hangar's callback.
    let document: Value =
        agent().get(&format!("{}/oauth/client.json", hangar.base)).call().unwrap().into_body().read_json().unwrap();
    assert_eq!(document["client_id"], format!("http://{listen}/oauth/client.json"));
    assert_eq!(document["redirect_uris"], json!([format!("http://{listen}/oauth/callback")]));
}

/// `prot`'s `whoami` through `hangar_call` as the caller with `key`, which must succeed: whose
/// token reached the upstream, `{sub, client_id}`.
pub(crate) fn whoami(hangar: &Hangar, key: &str) -> Value {
    let result = whoami_result(hangar, key);
    assert_eq!(result["success"], true, "{result}");
    let text = result["result"]["structuredContent"]["result"].as_str().expect("whoami answers text");
    serde_json::from_str(text).expect("whoami answers JSON")
}

/// `prot`'s `whoami` through `hangar_call` as the caller with `key`: the batch's one result.
pub(crate) fn whoami_result(hangar: &Hangar, key: &str) -> Value {
    let calls = json!({"calls": [{"mcp_server": "prot", "tool": "whoami", "arguments": {}}]});
    let answer = hangar.mcp_with(
        "tools/call",
        json!({"name": "hangar_call", "arguments": calls}),
        json!({}),
        &[("X-API-Key", key)],
    );
    assert_eq!(answer.status, 200, "{}", answer.text);
    answer.body["result"]["structuredContent"]["results"][0].clone()
}

/// The tokens the upstream got, in order.
fn tokens(upstream: &Upstream) -> Vec<String> {
    upstream.up.calls().iter().map(|call| call["token"].as_str().unwrap_or_default().to_owned()).collect()
}

#[test]
fn each_callers_calls_carry_their_own_token_and_a_one_second_token_is_refreshed_once_for_twenty() {
    use crate::upstream_oauth::{jwt_exp, unix_now};
    let upstream = Upstream::start();
    let (hangar, _) = start(&upstream, PRE_REGISTERED);
    assert_eq!(Browser::new().connect(&connect_url(&hangar, BOB), "bob-account", &hangar).status, 200);
    // Alice's access tokens live one second from now on.
    upstream.up.set_ttl(1);
    assert_eq!(Browser::new().connect(&connect_url(&hangar, ALICE), "alice-account", &hangar).status, 200);
    assert_eq!(whoami(&hangar, BOB)["sub"], "bob-account");
    assert_eq!(whoami(&hangar, ALICE)["sub"], "alice-account");
    let seen = tokens(&upstream);
    assert_eq!(seen.len(), 2);
    assert_ne!(seen[0], seen[1], "each caller's own token");
    let held = seen[1].clone();
    // Wait (bounded) until alice's token has expired; the next one comes slowly (so that all
    // her calls wait for it together) and lives long (so that none outlives it).
    let expiry = jwt_exp(&held);
    poll("alice's token expires", Duration::from_secs(10), || (unix_now() > expiry).then_some(()));
    upstream.up.set_ttl(300);
    upstream.up.set_token_delay_ms(500);
    let refreshed = upstream.up.grants("refresh_token");
    let called = upstream.up.calls().len();
    std::thread::scope(|scope| {
        let alices: Vec<_> = (0..20).map(|_| scope.spawn(|| whoami(&hangar, ALICE))).collect();
        // Bob's calls meanwhile, while alice's refresh is in flight: his own token, always.
        let bobs: Vec<_> = (0..5).map(|_| scope.spawn(|| whoami(&hangar, BOB))).collect();
        for call in alices {
            assert_eq!(call.join().expect("a call thread")["sub"], "alice-account");
        }
        for call in bobs {
            assert_eq!(call.join().expect("a call thread")["sub"], "bob-account");
        }
    });
    assert_eq!(upstream.up.grants("refresh_token"), refreshed + 1, "one refresh for alice's twenty waiting calls");
    let records = upstream.up.calls()[called..].to_vec();
    assert_eq!(records.len(), 25);
    let alices: Vec<&Value> = records.iter().filter(|call| call["sub"] == "alice-account").collect();
    let bobs: Vec<&Value> = records.iter().filter(|call| call["sub"] == "bob-account").collect();
    assert_eq!((alices.len(), bobs.len()), (20, 5));
    assert!(alices.iter().all(|call| call["token"] == alices[0]["token"] && call["token"] != held.as_str()));
    assert!(bobs.iter().all(|call| call["token"] == seen[0].as_str()), "bob kept his own token");
    assert!(jwt_exp(alices[0]["token"].as_str().unwrap()) > unix_now() + 60, "the refreshed token is a long one");
    // The upstream refuses every token it has seen (401 `invalid_token`, as if revoked): alice's
    // next call refreshes once and goes through.
    upstream.up.set_token_delay_ms(0);
    upstream.up.refuse_seen();
    let refreshed = upstream.up.grants("refresh_token");
    assert_eq!(whoami(&hangar, ALICE)["sub"], "alice-account");
    assert_eq!(upstream.up.grants("refresh_token"), refreshed + 1);
    // No token the upstream saw lies in clear in any file of the hangar's.
    let mut needles = tokens(&upstream);
    needles.dedup();
    for path in crate::upstream_credentials::files_under(hangar.dir.path()) {
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap_or_default()).into_owned();
        for needle in &needles {
            assert!(!text.contains(needle.as_str()), "{} holds a token in clear", path.display());
        }
    }
}
