//! Opaque access tokens, validated by introspection (RFC 7662) at the real authorization server
//! (`oidc-provider`, tests/fixtures/idp.mjs, whose `opaque-bot` gets opaque tokens): an active
//! token is accepted (and its answer cached), a revoked, unknown or misdirected one is refused
//! with `invalid_token`, and the hangar's client secret, read from a file, never reaches a log.

use std::ffi::OsStr;
use std::path::Path;

use hangar_tests::serde_json::Value;
use hangar_tests::{Hangar, free_port, supervisor_exit};

use super::oauth::{Idp, agent, base64, get_with};

const SECRET: &str = "hangar-secret";

fn config(issuer: &str, secret_file: &Path) -> String {
    format!(
        r#"
auth:
  oauth:
    issuer: {issuer}
    required_scopes: [mcp]
    profiles: {{mcp-admins: admin}}
    introspection:
      endpoint: {issuer}/token/introspection
      client_id: hangar
      client_secret_file: {}
profiles:
  admin: {{servers: ["*"], admin: true}}
mcp_servers:
  math:
    command: ["{{fake}}", "--tools", "add"]
"#,
        secret_file.display()
    )
}

/// How many introspection requests the IdP has answered.
fn introspections(idp: &Idp) -> u64 {
    let stats: Value = agent().get(&format!("{}/_stats", idp.url)).call().unwrap().into_body().read_json().unwrap();
    stats["introspections"].as_u64().unwrap()
}

/// Revokes `token` at the IdP, as the client it was issued to.
fn revoke(idp: &Idp, client: &str, token: &str) {
    let response = agent()
        .post(&format!("{}/token/revocation", idp.url))
        .header("Authorization", format!("Basic {}", base64(&format!("{client}:{client}-secret"))))
        .send_form([("token", token), ("token_type_hint", "access_token")])
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
}

#[test]
fn opaque_tokens_are_introspected_and_refused_once_revoked_or_unknown() {
    let idp = Idp::start(free_port());
    let secrets = tempfile::tempdir().unwrap();
    let secret_file = secrets.path().join("introspection-secret");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    let hangar = Hangar::start(&config(&idp.url, &secret_file));
    let resource = format!("{}/mcp", hangar.base);

    // An opaque token for this resource: introspected, accepted, as its client.
    let opaque = idp.token("opaque-bot", "mcp", &resource);
    assert!(!opaque.contains('.'), "the IdP minted a JWT, not an opaque token: {opaque}");
    let before = introspections(&idp);
    let (status, _, body) = get_with(&hangar, "/api/mcp_servers", Some(&opaque));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["mcp_servers"][0]["mcp_server_id"], "math", "{body}");
    assert_eq!(introspections(&idp), before + 1);
    // The answer is cached: the next calls do not ask again.
    for _ in 0..3 {
        assert_eq!(get_with(&hangar, "/api/mcp_servers", Some(&opaque)).0, 200);
    }
    assert_eq!(introspections(&idp), before + 1, "each call asked the IdP again");
    // JWTs are still checked locally, never introspected.
    let jwt = idp.token("admin-bot", "mcp", &resource);
    assert_eq!(get_with(&hangar, "/api/mcp_servers", Some(&jwt)).0, 200);
    assert_eq!(introspections(&idp), before + 1);

    let refused = |token: &str, want_status: u16, want_error: &str| {
        let (status, challenge, body) = get_with(&hangar, "/api/mcp_servers", Some(token));
        assert_eq!(status, want_status, "{body}");
        assert!(challenge.contains(&format!("error=\"{want_error}\"")), "{challenge}");
        body["error"]["message"].as_str().unwrap_or_default().to_owned()
    };
    // Revoked at the IdP: no longer active.
    let revoked = idp.token("opaque-bot", "mcp", &resource);
    revoke(&idp, "opaque-bot", &revoked);
    assert!(refused(&revoked, 401, "invalid_token").contains("not active"));
    // Unknown to the IdP.
    assert!(refused("an-opaque-token-nobody-issued", 401, "invalid_token").contains("not active"));
    // Active, but minted for another resource (the answer's `aud`).
    let elsewhere = idp.token("opaque-bot", "mcp", "http://127.0.0.1:9/mcp");
    assert!(refused(&elsewhere, 401, "invalid_token").contains("another resource"));
    // Active, without the required scope (the answer's `scope`).
    let other_scope = idp.token("opaque-bot", "other", &resource);
    refused(&other_scope, 403, "insufficient_scope");

    // Neither the client secret nor a token reaches the log.
    let log = hangar.log();
    assert!(log.contains("opaque tokens are introspected"), "{log}");
    assert!(!log.contains(SECRET), "the client secret reached the log");
    for token in [&opaque, &revoked, &elsewhere, &other_scope] {
        assert!(!log.contains(token.as_str()), "a token reached the log");
    }
}

#[test]
fn a_wrong_client_secret_refuses_opaque_tokens_with_503_and_a_missing_one_exits_78() {
    let idp = Idp::start(free_port());
    let secrets = tempfile::tempdir().unwrap();
    let secret_file = secrets.path().join("introspection-secret");
    std::fs::write(&secret_file, "not-the-secret\n").unwrap();
    let hangar = Hangar::start(&config(&idp.url, &secret_file));
    let resource = format!("{}/mcp", hangar.base);
    let opaque = idp.token("opaque-bot", "mcp", &resource);
    let (status, _, body) = get_with(&hangar, "/api/mcp_servers", Some(&opaque));
    assert_eq!(status, 503, "the IdP refused the hangar's client: {body}");
    assert!(!hangar.log().contains("not-the-secret"), "the client secret reached the log");

    let config_path = secrets.path().join("hangar.yaml");
    let missing = secrets.path().join("missing-secret");
    std::fs::write(&config_path, config(&idp.url, &missing).replace("{fake}", "/bin/true")).unwrap();
    let (code, stderr) = supervisor_exit(
        &[
            OsStr::new("--config"),
            config_path.as_os_str(),
            OsStr::new("--socket"),
            secrets.path().join("s.sock").as_os_str(),
        ],
        &[],
    );
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("auth.oauth.introspection.client_secret_file"), "{stderr}");
}
