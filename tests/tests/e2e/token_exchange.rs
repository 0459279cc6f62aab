//! Token exchange (issue 31 §3): a `mode: remote` server with `auth.token_exchange` is called on
//! each OAuth caller's behalf. The callers' IdP is a real authorization server
//! (`oidc-provider`, tests/fixtures/idp.mjs, which registers the RFC 8693 grant); the upstream
//! is a real SDK resource server (the Python `mcp` package,
//! tests/fixtures/py_protected_server.py) that trusts that IdP and checks that a token's `aud`
//! is itself, recording whose `sub` each call came with and the token it got.
//!
//! From where each party stands: alice and bob each reach the upstream as themselves, never with
//! their inbound token; twenty concurrent calls of one caller make one exchange; a key caller,
//! with nothing to exchange, is told so and the upstream sees nothing; a refused exchange is not
//! asked again by every call of the next seconds; and no token, inbound or exchanged, nor the
//! client secret, nor the IdP's refusal text, shows on any surface.

use std::time::Duration;

use hangar_tests::{Background, Hangar, free_port, key_hash, poll, python, repo_root};
use serde_json::{Value, json};

use crate::journal_audit::{entries, journal_of};
use crate::oauth::{Idp, agent};
use crate::upstream_credentials::files_under;

/// The hangar's client secret at the IdP (idp.mjs's client `exchanger`).
const SECRET: &str = "exchanger-secret";
/// An API key: the key caller, and the operator who reads every surface.
const KEY: &str = "ops-key-for-token-exchange-5c1e";
/// What idp.mjs says beside `invalid_grant` when it refuses an exchange.
const REFUSAL_TEXT: &str = "exchange refused by the test fixture";

/// The callers' IdP and the protected upstream that trusts it, killed when dropped.
struct Parts {
    idp: Idp,
    _server: Background,
    /// The protected server's MCP endpoint: its canonical resource URI, the audience.
    endpoint: String,
    /// The JSON lines the protected server writes, one per `whoami` call.
    record: tempfile::NamedTempFile,
    /// The client-secret file (outside the hangar's directory, as an operator's would be).
    secret: tempfile::NamedTempFile,
}

impl Parts {
    fn start() -> Parts {
        let idp = Idp::start(free_port());
        let port = free_port();
        let record = tempfile::NamedTempFile::new().expect("record file");
        let script = repo_root().join("tests/fixtures/py_protected_server.py").display().to_string();
        let record_path = record.path().display().to_string();
        let server = Background::spawn(&python(), &[&script, &port.to_string(), &idp.url, &record_path]);
        let metadata = format!("http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp");
        poll("the protected server serves its metadata", Duration::from_secs(30), || {
            agent().get(&metadata).call().ok().filter(|r| r.status().as_u16() == 200)
        });
        let secret = tempfile::NamedTempFile::new().expect("secret file");
        std::fs::write(secret.path(), format!("{SECRET}\n")).expect("write the secret");
        Parts { idp, _server: server, endpoint: format!("http://127.0.0.1:{port}/mcp"), record, secret }
    }

    /// The hangar's config: OAuth callers of the IdP (group `developers`: profile `dev`), the
    /// key `ops`, and the protected server `prot` whose calls exchange the caller's token.
    fn config(&self) -> String {
        format!(
            r#"
auth:
  api_keys: [{{name: ops, hash: "{hash}"}}]
  oauth:
    issuer: {issuer}
    scopes_supported: [mcp]
    required_scopes: [mcp]
    profiles: {{developers: dev}}
profiles:
  dev: {{servers: [prot]}}
audit: {{arguments: full}}
mcp_servers:
  prot:
    mode: remote
    endpoint: {endpoint}
    auth:
      token_exchange:
        token_endpoint: {issuer}/token
        client: {{id: exchanger, secret_file: "{secret}"}}
        audience: {endpoint}
        scopes: [read]
"#,
            hash = key_hash(KEY),
            issuer = self.idp.url,
            endpoint = self.endpoint,
            secret = self.secret.path().display(),
        )
    }

    /// `who`'s access token for the hangar, from the IdP.
    fn inbound(&self, hangar: &Hangar, who: &str) -> String {
        self.idp.token(who, "mcp", &format!("{}/mcp", hangar.base))
    }

    /// What reached the protected server, one record per `whoami` call: `{sub, client_id, token}`.
    fn calls(&self) -> Vec<Value> {
        std::fs::read_to_string(self.record.path())
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// How many token-exchange requests the IdP has had.
    fn exchanges(&self) -> u64 {
        let stats: Value =
            agent().get(&format!("{}/_stats", self.idp.url)).call().unwrap().into_body().read_json().unwrap();
        stats["exchanges"].as_u64().expect("the IdP counts exchanges")
    }

    /// A test-only switch of the IdP: `POST path`.
    fn switch(&self, path: &str) {
        let response = agent().post(&format!("{}{path}", self.idp.url)).send_empty().unwrap();
        assert_eq!(response.status().as_u16(), 200, "{path}");
    }
}

/// `prot`'s `whoami` through `hangar_call`, with `credential` (`("Authorization", "Bearer …")`
/// or `("X-API-Key", …)`): the batch's one result.
fn whoami(hangar: &Hangar, credential: (&str, &str)) -> Value {
    let calls = json!({"calls": [{"mcp_server": "prot", "tool": "whoami", "arguments": {}}]});
    let answer =
        hangar.mcp_with("tools/call", json!({"name": "hangar_call", "arguments": calls}), json!({}), &[credential]);
    assert_eq!(answer.status, 200, "{}", answer.text);
    answer.body["result"]["structuredContent"]["results"][0].clone()
}

/// `whoami` as the caller with the OAuth `token`, which must succeed: whose token reached the
/// upstream, `{sub, client_id}`.
fn whoami_as(hangar: &Hangar, token: &str) -> Value {
    let result = whoami(hangar, ("Authorization", &format!("Bearer {token}")));
    assert_eq!(result["success"], true, "{result}");
    let text = result["result"]["structuredContent"]["result"].as_str().expect("whoami answers text");
    serde_json::from_str(text).expect("whoami answers JSON")
}

/// Twenty concurrent `whoami` calls with the OAuth `token`: each reaches the upstream as `sub`.
fn twenty_at_once(hangar: &Hangar, token: &str, sub: &str) {
    std::thread::scope(|scope| {
        let calls: Vec<_> = (0..20).map(|_| scope.spawn(|| whoami_as(hangar, token))).collect();
        for call in calls {
            assert_eq!(call.join().expect("a call thread")["sub"], sub);
        }
    });
}

/// The tokens the upstream got, from its record `calls`.
fn tokens_of(calls: &[Value]) -> Vec<String> {
    calls.iter().map(|call| call["token"].as_str().unwrap_or_default().to_owned()).collect()
}

/// Every read surface (as the operator), the hangar's log, the bodies read so far, the
/// journal's entries and every file under the hangar's directory (its SQLite files among them),
/// and the events replayed from the start: none holds any of `needles`.
fn assert_on_no_surface(hangar: &Hangar, needles: &[String]) {
    let mut seen: Vec<(String, String)> = Vec::new();
    let paths = [
        "/api/mcp_servers",
        "/api/mcp_servers/prot",
        "/api/mcp_servers/prot/tools",
        "/api/mcp_servers/prot/logs",
        "/api/audit",
        "/api/whoami",
        "/api/credentials",
        "/metrics",
        "/",
    ];
    for path in paths {
        let mut response = agent().get(&format!("{}{path}", hangar.base)).header("X-API-Key", KEY).call().unwrap();
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        assert!(status < 500, "{path}: {status} {text}");
        seen.push((path.to_owned(), text));
    }
    seen.push(("the hangar's log".into(), hangar.log()));
    seen.extend(hangar.bodies().into_iter().map(|body| ("a body read earlier".into(), body)));
    seen.extend(entries(&journal_of(hangar)).iter().map(|entry| ("a journal entry".into(), entry.to_string())));
    for file in files_under(hangar.dir.path()) {
        let bytes = std::fs::read(&file).unwrap_or_default();
        seen.push((file.display().to_string(), String::from_utf8_lossy(&bytes).into_owned()));
    }
    let stream = crate::events::EventStream::open(hangar, "?since=0", &[("X-API-Key", KEY)]);
    let events = stream.until("a call's audit event", |event| event.kind == "audit");
    stream.close();
    seen.extend(events.iter().map(|event| ("an event".into(), event.data.to_string())));
    for (surface, text) in &seen {
        for needle in needles {
            assert!(!text.contains(needle.as_str()), "{surface} holds {needle:?}");
        }
    }
}

#[test]
fn each_oauth_caller_reaches_the_upstream_as_itself_and_no_token_shows_anywhere() {
    let parts = Parts::start();
    // At debug, so that the log holds all it can: still no token.
    let hangar = Hangar::start_with_env(&parts.config(), &[], &[("HANGAR_LOG", "debug")]);
    let alice = parts.inbound(&hangar, "alice");
    let bob = parts.inbound(&hangar, "bob");

    // alice's call reaches the upstream as alice, with a token exchanged for it (the hangar's
    // client is the actor), never her own.
    assert_eq!(whoami_as(&hangar, &alice), json!({"sub": "alice", "client_id": "exchanger"}));
    assert_eq!(parts.exchanges(), 1);

    // Twenty concurrent first calls of bob's, while the IdP is slow to answer: one exchange.
    parts.switch("/_slow_exchange?ms=500");
    twenty_at_once(&hangar, &bob, "bob");
    assert_eq!(parts.exchanges(), 2, "one exchange for bob's twenty concurrent calls");
    parts.switch("/_slow_exchange?ms=0");

    // alice again: her cached token, no new exchange.
    assert_eq!(whoami_as(&hangar, &alice)["sub"], "alice");
    assert_eq!(parts.exchanges(), 2);

    let calls = parts.calls();
    assert_eq!(calls.len(), 22);
    let tokens = tokens_of(&calls);
    let (alices, bobs): (Vec<_>, Vec<_>) = calls.iter().zip(&tokens).partition(|(call, _)| call["sub"] == "alice");
    assert_eq!((alices.len(), bobs.len()), (2, 20));
    assert!(alices.iter().all(|(_, token)| *token == alices[0].1), "alice's calls share her exchanged token");
    assert!(bobs.iter().all(|(_, token)| *token == bobs[0].1), "bob's calls share his exchanged token");
    assert_ne!(alices[0].1, bobs[0].1);
    let (alice_first, bob_first) = (alices[0].1.clone(), bobs[0].1.clone());

    // The upstream refuses every token it has seen: twenty concurrent calls of alice's, on her
    // open connection, each told 401 `invalid_token`, are retried on one new exchange.
    let url = parts.endpoint.replace("/mcp", "/_refuse_seen");
    assert_eq!(agent().post(&url).send_empty().unwrap().status().as_u16(), 200);
    parts.switch("/_slow_exchange?ms=500");
    twenty_at_once(&hangar, &alice, "alice");
    assert_eq!(parts.exchanges(), 3, "one new exchange for alice's twenty refused calls");
    let renewed: Vec<String> = tokens_of(&parts.calls()[22..]);
    assert_eq!(renewed.len(), 20);
    assert!(renewed.iter().all(|token| *token == renewed[0] && *token != alice_first));

    for token in tokens.iter().chain(&renewed) {
        assert!(*token != alice && *token != bob, "an inbound token reached the upstream");
    }
    // The log tells of the exchanges (at debug), without a token.
    assert!(hangar.log().contains("exchanged a caller's token"), "{}", hangar.log());
    let mut needles = vec![alice, bob, SECRET.to_owned()];
    needles.extend([alice_first, bob_first, renewed[0].clone()]);
    assert_on_no_surface(&hangar, &needles);
}

#[test]
fn a_key_caller_is_told_it_has_no_token_to_exchange_and_the_upstream_sees_nothing() {
    let parts = Parts::start();
    let hangar = Hangar::start(&parts.config());
    // alice has called: her token is the hangar's to exchange for her, and for no one else.
    let alice = parts.inbound(&hangar, "alice");
    assert_eq!(whoami_as(&hangar, &alice)["sub"], "alice");
    assert_eq!(parts.exchanges(), 1);
    let result = whoami(&hangar, ("X-API-Key", KEY));
    assert_eq!(result["success"], false, "{result}");
    assert_eq!(result["error_type"], "upstream_unauthorized", "{result}");
    let error = result["error"].as_str().unwrap_or_default();
    assert!(error.contains("API key, which cannot be exchanged"), "the error says why: {result}");
    assert_eq!(parts.exchanges(), 1, "nothing was asked of the IdP for the key caller");
    let calls = parts.calls();
    assert_eq!(calls.len(), 1, "the upstream saw alice's call only: {calls:?}");
    assert_eq!(calls[0]["sub"], "alice");
}

#[test]
fn a_refused_exchange_is_not_asked_again_by_every_call_of_the_next_seconds() {
    let parts = Parts::start();
    // At debug, so that the log holds all it can: still no token.
    let hangar = Hangar::start_with_env(&parts.config(), &[], &[("HANGAR_LOG", "debug")]);
    let alice = parts.inbound(&hangar, "alice");
    parts.switch("/_refuse_exchange?on=1");
    for _ in 0..3 {
        // The caller hears that the exchange failed, not that the upstream refused it.
        let result = whoami(&hangar, ("Authorization", &format!("Bearer {alice}")));
        assert_eq!(result["error_type"], "upstream_unauthorized", "{result}");
        assert!(result["error"].as_str().unwrap_or_default().contains("the exchange failed"), "{result}");
    }
    assert_eq!(parts.exchanges(), 1, "the refusal was kept: the IdP was asked once for three calls");
    assert!(parts.calls().is_empty(), "the upstream saw no call");
    // The server's log says why, by the OAuth error code only.
    let logs = poll("the refusal is in the server's log", Duration::from_secs(10), || {
        let mut response =
            agent().get(&format!("{}/api/mcp_servers/prot/logs", hangar.base)).header("X-API-Key", KEY).call().ok()?;
        let text = response.body_mut().read_to_string().ok()?;
        text.contains("invalid_grant").then_some(text)
    });
    assert!(!logs.contains(REFUSAL_TEXT), "{logs}");

    // Once the IdP serves again, a call after the window is exchanged and served.
    parts.switch("/_refuse_exchange?on=0");
    let who = poll("a later call is served", Duration::from_secs(30), || {
        let result = whoami(&hangar, ("Authorization", &format!("Bearer {alice}")));
        (result["success"] == true).then_some(result)
    });
    assert_eq!(who["success"], true);
    assert_eq!(parts.exchanges(), 2, "calls within the window were answered without asking");
    assert_on_no_surface(&hangar, &[alice, SECRET.to_owned(), REFUSAL_TEXT.to_owned()]);
}
