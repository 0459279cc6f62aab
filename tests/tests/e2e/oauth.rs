//! The hangar as an OAuth 2.1 resource server, against a real authorization server on loopback
//! (`oidc-provider`, tests/fixtures/idp.mjs): audience-bound JWT access tokens from its
//! client-credentials grant are accepted; tokens for another resource, expired, forged or
//! under-scoped are refused with the right challenge; keys rotated at the IdP are picked up
//! without a restart, cached keys outlive the IdP, and an IdP that comes up late is found.

use std::ffi::OsStr;
use std::time::Duration;

use hangar_tests::{Background, Hangar, free_port, node, poll, repo_root, supervisor_exit};
use serde_json::Value;

/// A running `idp.mjs`, killed when dropped.
pub(super) struct Idp {
    _process: Background,
    /// `http://127.0.0.1:PORT`, its issuer.
    pub(super) url: String,
}

impl Idp {
    pub(super) fn start(port: u16) -> Idp {
        let script = repo_root().join("tests/fixtures/idp.mjs");
        let package = repo_root().join(".tools/oidc-provider/node_modules/oidc-provider/package.json");
        assert!(package.exists(), "{} is missing; run scripts/setup-clients", package.display());
        let process = Background::start(&node(), &[&script.display().to_string(), &port.to_string()], "idp listening");
        Idp { _process: process, url: format!("http://127.0.0.1:{port}") }
    }

    /// An access token from the client-credentials grant, for `resource` with `scope`.
    pub(super) fn token(&self, client: &str, scope: &str, resource: &str) -> String {
        let response = agent()
            .post(&format!("{}/token", self.url))
            .header("Authorization", format!("Basic {}", base64(&format!("{client}:{client}-secret"))))
            .send_form([("grant_type", "client_credentials"), ("scope", scope), ("resource", resource)])
            .unwrap();
        let status = response.status().as_u16();
        let body: Value = response.into_body().read_json().unwrap();
        assert_eq!(status, 200, "{body}");
        body["access_token"].as_str().unwrap().to_owned()
    }

    /// A token the fixture signs itself (`/_mint`): with the published key or one never published.
    pub(super) fn mint(&self, query: &str) -> String {
        agent().get(&format!("{}/_mint?{query}", self.url)).call().unwrap().into_body().read_to_string().unwrap()
    }

    /// How many times the key set was fetched so far.
    pub(super) fn jwks_fetches(&self) -> u64 {
        let body: Value = agent().get(&format!("{}/_stats", self.url)).call().unwrap().into_body().read_json().unwrap();
        body["jwks"].as_u64().unwrap()
    }

    /// How many introspection requests the IdP has answered.
    pub(super) fn introspections(&self) -> u64 {
        let body: Value = agent().get(&format!("{}/_stats", self.url)).call().unwrap().into_body().read_json().unwrap();
        body["introspections"].as_u64().unwrap()
    }

    /// A new signing key replaces the published one.
    fn rotate(&self) {
        let response = agent().post(&format!("{}/_rotate", self.url)).send_empty().unwrap();
        assert_eq!(response.status().as_u16(), 200);
    }
}

pub(super) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

pub(super) fn base64(text: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `(status, WWW-Authenticate, body)` of `GET path` with `token` as the bearer.
pub(super) fn get_with(hangar: &Hangar, path: &str, token: Option<&str>) -> (u16, String, Value) {
    let mut request = agent().get(&format!("{}{path}", hangar.base));
    if let Some(token) = token {
        request = request.header("Authorization", format!("Bearer {token}"));
    }
    let response = request.call().unwrap();
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap_or_default().to_owned())
        .unwrap_or_default();
    let body = response.into_body().read_json().unwrap_or(Value::Null);
    (status, challenge, body)
}

pub(super) fn config(issuer: &str) -> String {
    format!(
        r#"
auth:
  oauth:
    issuer: {issuer}
    scopes_supported: [mcp]
    required_scopes: [mcp]
    profiles: {{mcp-admins: admin}}
profiles:
  admin:
    servers: ["*"]
    admin: true
mcp_servers:
  math:
    command: ["{{fake}}", "--tools", "add"]
"#
    )
}

#[test]
fn tokens_from_the_issuer_are_checked_and_refused_with_the_right_challenge() {
    let idp = Idp::start(free_port());
    let hangar = Hangar::start(&config(&idp.url));
    let resource = format!("{}/mcp", hangar.base);
    let metadata_url = format!("{}/.well-known/oauth-protected-resource/mcp", hangar.base);

    // The protected-resource metadata, without a token, at both paths: each names the resource
    // its URL was derived from (RFC 9728 §3.3), the bare one the origin.
    for (path, named) in [
        ("/.well-known/oauth-protected-resource", hangar.base.as_str()),
        ("/.well-known/oauth-protected-resource/mcp", resource.as_str()),
    ] {
        let (status, _, document) = get_with(&hangar, path, None);
        assert_eq!(status, 200, "{path}: {document}");
        assert_eq!(document["resource"], named, "{path}");
        assert_eq!(document["authorization_servers"], serde_json::json!([idp.url]));
        assert_eq!(document["scopes_supported"], serde_json::json!(["mcp"]));
    }

    // No token: 401 and the challenge that points at the metadata.
    let (status, challenge, _) = get_with(&hangar, "/api/mcp_servers", None);
    assert_eq!(status, 401);
    assert_eq!(challenge, format!("Bearer resource_metadata=\"{metadata_url}\", scope=\"mcp\""));
    let mcp = hangar.mcp("tools/list", Value::Null);
    assert_eq!(mcp.status, 401, "MCP needs a token too");
    assert!(mcp.header("www-authenticate").is_some_and(|c| c.contains("resource_metadata=")));

    // A token the issuer minted for this resource: accepted, on REST and MCP.
    let good = idp.token("admin-bot", "mcp", &resource);
    let (status, _, body) = get_with(&hangar, "/api/mcp_servers", Some(&good));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["mcp_servers"][0]["mcp_server_id"], "math", "{body}");

    let refused = |token: &str, want_status: u16, want_error: &str| {
        let (status, challenge, body) = get_with(&hangar, "/api/mcp_servers", Some(token));
        assert_eq!(status, want_status, "{body}");
        assert!(challenge.contains(&format!("error=\"{want_error}\"")), "{challenge}");
        assert!(challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")), "{challenge}");
        body["error"]["message"].as_str().unwrap_or_default().to_owned()
    };
    // Minted for another resource (RFC 8707 audience binding).
    let elsewhere = idp.token("admin-bot", "mcp", "http://127.0.0.1:9/mcp");
    assert!(refused(&elsewhere, 401, "invalid_token").contains("another resource"));
    // Expired (beyond the leeway).
    let expired = idp.mint(&format!("aud={resource}&exp=-120"));
    assert!(refused(&expired, 401, "invalid_token").contains("expired"));
    // Signed by a key the issuer never published.
    let forged = idp.mint(&format!("aud={resource}&key=unpublished"));
    assert!(refused(&forged, 401, "invalid_token").contains("key the issuer publishes"));
    // A flood of tokens naming keys nobody publishes: each refused, and the keys fetched again
    // at most once for all of them (the refetch is rate-limited), so the IdP is not hammered.
    let fetched = idp.jwks_fetches();
    for n in 0..20 {
        let header = base64(&format!(r#"{{"alg":"RS256","kid":"flood-{n}"}}"#));
        let header = header.trim_end_matches('=').replace('+', "-").replace('/', "_");
        refused(&format!("{header}.{}.c2ln", good.split('.').nth(1).unwrap()), 401, "invalid_token");
    }
    assert!(idp.jwks_fetches() <= fetched + 1, "{} fetches for 20 unknown kids", idp.jwks_fetches() - fetched);
    // Garbage, and a token with the right claims but no signature.
    refused("not-a-jwt", 401, "invalid_token");
    let good_claims = good.split('.').nth(1).unwrap();
    refused(&format!("eyJhbGciOiJub25lIn0.{good_claims}."), 401, "invalid_token");
    // A valid token without the required scope: 403 insufficient_scope.
    let other_scope = idp.token("admin-bot", "other", &resource);
    let (status, challenge, _) = get_with(&hangar, "/api/mcp_servers", Some(&other_scope));
    assert_eq!(status, 403);
    assert!(challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"mcp\""), "{challenge}");
    // A valid token whose groups map to no profile, with no default_profile: 403.
    let lone = idp.token("lone-bot", "mcp", &resource);
    let (status, _, body) = get_with(&hangar, "/api/mcp_servers", Some(&lone));
    assert_eq!(status, 403, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("no profile"), "{body}");

    // Nothing in the logs that would help forge a token: no token, no signature.
    let log = hangar.log();
    for token in [&good, &elsewhere, &expired, &forged, &other_scope, &lone] {
        let signature = token.rsplit('.').next().unwrap();
        assert!(!log.contains(signature), "a token reached the log");
    }
}

#[test]
fn rotated_keys_are_picked_up_and_cached_keys_outlive_the_idp() {
    let port = free_port();
    let idp = Idp::start(port);
    let hangar = Hangar::start(&config(&idp.url));
    let resource = format!("{}/mcp", hangar.base);
    let before = idp.token("dev-bot", "mcp", &resource);
    assert_eq!(get_with(&hangar, "/api/mcp_servers", Some(&before)).0, 200);

    // The IdP rotates its key: a token signed by the new one is accepted without a restart
    // (the unknown kid makes the hangar fetch the keys again, at most every 10 s).
    idp.rotate();
    let after = idp.token("dev-bot", "mcp", &resource);
    poll("a token signed by the rotated key to be accepted", Duration::from_secs(30), || {
        (get_with(&hangar, "/api/mcp_servers", Some(&after)).0 == 200).then_some(())
    });
    // The old key is no longer published, so its tokens no longer pass.
    assert_eq!(get_with(&hangar, "/api/mcp_servers", Some(&before)).0, 401);

    // The IdP goes away: the cached key keeps checking tokens it signed.
    drop(idp);
    let (status, _, body) = get_with(&hangar, "/api/mcp_servers", Some(&after));
    assert_eq!(status, 200, "cached keys keep working while the IdP is down: {body}");
}

#[test]
fn an_idp_down_at_start_is_found_once_it_comes_up() {
    let port = free_port();
    let issuer = format!("http://127.0.0.1:{port}");
    let hangar = Hangar::start(&config(&issuer));
    let resource = format!("{}/mcp", hangar.base);
    // A well-formed RS256 token no key can check yet: the issuer cannot be reached, so 503.
    let unverifiable = "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsifQ.eyJzdWIiOiJ4In0.c2ln";
    let (status, _, body) = get_with(&hangar, "/api/mcp_servers", Some(unverifiable));
    assert_eq!(status, 503, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("authorization server"), "{body}");
    assert!(hangar.log().contains("cannot fetch the authorization server's metadata or keys"), "{}", hangar.log());
    // Health and the metadata stay up meanwhile.
    assert_eq!(hangar.get("/health/ready").status, 200);
    assert_eq!(get_with(&hangar, "/.well-known/oauth-protected-resource", None).0, 200);

    let idp = Idp::start(port);
    let token = idp.token("admin-bot", "mcp", &resource);
    poll("the hangar to find the IdP that came up", Duration::from_secs(30), || {
        (get_with(&hangar, "/api/mcp_servers", Some(&token)).0 == 200).then_some(())
    });
}

/// The TypeScript SDK's client-credentials provider: 401, protected-resource metadata,
/// authorization-server metadata, token, call. The call reaches an upstream (`witness`, which
/// remembers every header it was sent) that never sees the caller's token: no passthrough.
#[test]
fn a_real_mcp_client_goes_through_the_whole_dance_and_its_token_stays_at_the_hangar() {
    let idp = Idp::start(free_port());
    let witness_script = repo_root().join("tests/fixtures/idp_witness.mjs");
    let port = free_port();
    let _witness =
        Background::start(&node(), &[&witness_script.display().to_string(), &port.to_string()], "witness listening");
    let witness_url = format!("http://127.0.0.1:{port}/mcp");
    let hangar =
        Hangar::start(&format!("{}  witness:\n    mode: remote\n    endpoint: {witness_url}\n", config(&idp.url)));
    let script = repo_root().join("tests/fixtures/idp_client.mjs");
    // Both transports, with the default resource: the old HTTP+SSE one asks a token for `/sse`
    // and checks that the metadata it is pointed to names that URL.
    for endpoint in ["/mcp", "/sse"] {
        let output = std::process::Command::new(node())
            .arg(&script)
            .arg(format!("{}{endpoint}", hangar.base))
            .args(["admin-bot", "admin-bot-secret", "hangar_call"])
            .arg(r#"{"calls": [{"mcp_server": "witness", "tool": "seen_headers"}]}"#)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{endpoint}: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
        assert!(stdout.contains("tools: ") && stdout.contains("hangar_call"), "{endpoint}: {stdout}");
        // The witness answered with the headers it was sent: real ones, and no Authorization.
        assert!(stdout.contains("content-type"), "{endpoint}: {stdout}");
        assert!(!stdout.to_ascii_lowercase().contains("authorization"), "a token reached an upstream: {stdout}");
    }
    let metadata = hangar.get("/.well-known/oauth-protected-resource/sse").body;
    assert_eq!(metadata["resource"], format!("{}/sse", hangar.base), "{metadata}");
}

#[test]
fn an_oauth_block_that_cannot_work_exits_78_naming_the_key() {
    let temp = tempfile::tempdir().unwrap();
    let config_path = temp.path().join("hangar.yaml");
    let socket = temp.path().join("s.sock");
    let cases = [
        ("auth: {oauth: {issuer: 'http://idp.example.com'}}\n", "auth.oauth.issuer"),
        ("auth: {oauth: {issuer: 'https://idp.example.com', resource: 'https://h/mcp#f'}}\n", "auth.oauth.resource"),
        ("auth: {oauth: {issuer: 'https://idp.example.com', profiles: {ops: admin}}}\n", "auth.oauth.profiles.ops"),
        ("auth: {oauth: {issuer: 'https://idp.example.com', default_profile: dev}}\n", "auth.oauth.default_profile"),
    ];
    for (yaml, key) in cases {
        std::fs::write(&config_path, yaml).unwrap();
        let (code, stderr) = supervisor_exit(
            &[OsStr::new("--config"), config_path.as_os_str(), OsStr::new("--socket"), socket.as_os_str()],
            &[],
        );
        assert_eq!(code, Some(78), "{yaml}: {stderr}");
        assert!(stderr.contains(key), "{yaml}: {stderr}");
    }
}
