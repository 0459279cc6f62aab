//! The hangar as an OAuth client of a protected upstream, machine to machine: a `mode: remote`
//! server with `auth.oauth` (`per: shared`, `grant: client_credentials`) in front of a real SDK
//! resource server (the Python `mcp` package, tests/fixtures/py_protected_server.py) whose
//! tokens come from a real authorization server (`oidc-provider`,
//! tests/fixtures/upstream_idp.mjs). The hangar discovers the authorization server from the
//! upstream's 401, gets an audience-bound token, sends it, renews it once however many calls
//! wait, gets a new one when the upstream refuses it, and never shows the client secret or a
//! token on any surface.

use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hangar_tests::{Background, Hangar, free_port, node, poll, python, repo_root, supervisor_exit};
use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::oauth::agent;

const SECRET: &str = "hangar-m2m-secret";

/// The upstream's authorization server and the protected server it issues tokens for, killed
/// when dropped.
pub(crate) struct Upstream {
    _idp: Background,
    _server: Background,
    /// The authorization server's issuer, `http://127.0.0.1:PORT`.
    pub(crate) idp: String,
    /// The protected server's MCP endpoint (its canonical resource URI).
    pub(crate) endpoint: String,
    /// The JSON lines the protected server writes, one per `whoami` call.
    pub(crate) record: tempfile::NamedTempFile,
    /// The client-secret file (outside the hangar's directory, as an operator's would be).
    secret: tempfile::NamedTempFile,
}

impl Upstream {
    /// Both servers, access tokens living `ttl_s` seconds.
    pub(crate) fn start(ttl_s: u32) -> Upstream {
        Upstream::start_naming(ttl_s, "127.0.0.1")
    }

    /// Both servers, the protected one naming its authorization server by `host` (the
    /// authorization server's own issuer says `127.0.0.1`).
    fn start_naming(ttl_s: u32, host: &str) -> Upstream {
        let package = repo_root().join(".tools/oidc-provider/node_modules/oidc-provider/package.json");
        assert!(package.exists(), "{} is missing; run scripts/setup-clients", package.display());
        let (idp_port, server_port) = (free_port(), free_port());
        let script = repo_root().join("tests/fixtures/upstream_idp.mjs").display().to_string();
        let idp =
            Background::start(&node(), &[&script, &idp_port.to_string(), &ttl_s.to_string()], "upstream idp listening");
        let issuer = format!("http://127.0.0.1:{idp_port}");
        let named = format!("http://{host}:{idp_port}");
        let record = tempfile::NamedTempFile::new().expect("record file");
        let script = repo_root().join("tests/fixtures/py_protected_server.py").display().to_string();
        let record_path = record.path().display().to_string();
        let server = Background::spawn(&python(), &[&script, &server_port.to_string(), &named, &record_path]);
        let metadata = format!("http://127.0.0.1:{server_port}/.well-known/oauth-protected-resource/mcp");
        poll("the protected server serves its metadata", Duration::from_secs(30), || {
            agent().get(&metadata).call().ok().filter(|r| r.status().as_u16() == 200)
        });
        let secret = tempfile::NamedTempFile::new().expect("secret file");
        std::fs::write(secret.path(), format!("{SECRET}\n")).expect("write the secret");
        Upstream {
            _idp: idp,
            _server: server,
            idp: issuer,
            endpoint: format!("http://127.0.0.1:{server_port}/mcp"),
            record,
            secret,
        }
    }

    /// A hangar config with the protected server as `prot`, its `auth.oauth` as `oauth`
    /// (`{secret}` standing for the secret file's path).
    fn config(&self, oauth: &str) -> String {
        let oauth = oauth.replace("{secret}", &self.secret.path().display().to_string());
        format!(
            "mcp_servers:\n  prot:\n    mode: remote\n    endpoint: {}\n    auth:\n      oauth: {oauth}\n",
            self.endpoint
        )
    }

    /// How many tokens the authorization server granted by `grant` so far.
    pub(crate) fn grants(&self, grant: &str) -> u64 {
        let stats: Value =
            agent().get(&format!("{}/_stats", self.idp)).call().unwrap().into_body().read_json().unwrap();
        stats["grants"][grant].as_u64().unwrap_or(0)
    }

    /// What reached the protected server, one record per `whoami` call: `{sub, client_id, token}`.
    pub(crate) fn calls(&self) -> Vec<Value> {
        std::fs::read_to_string(self.record.path())
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// Access tokens issued from now on live `ttl_s` seconds.
    pub(crate) fn set_ttl(&self, ttl_s: u32) {
        let response = agent().post(&format!("{}/_ttl?s={ttl_s}", self.idp)).send_empty().unwrap();
        assert_eq!(response.status().as_u16(), 200);
    }

    /// Each token-endpoint request waits `ms` milliseconds from now on.
    pub(crate) fn set_token_delay_ms(&self, ms: u32) {
        let response = agent().post(&format!("{}/_slow?ms={ms}", self.idp)).send_empty().unwrap();
        assert_eq!(response.status().as_u16(), 200);
    }

    /// From now on the protected server refuses every token it has accepted so far.
    pub(crate) fn refuse_seen(&self) {
        let url = self.endpoint.replace("/mcp", "/_refuse_seen");
        assert_eq!(agent().post(&url).send_empty().unwrap().status().as_u16(), 200);
    }
}

const MACHINE: &str =
    "{per: shared, grant: client_credentials, client: {id: hangar-m2m, secret_file: \"{secret}\"}, scopes: [read]}";

/// `whoami` through the hangar, which must succeed: the protected server's answer.
fn whoami(hangar: &Hangar) -> Value {
    let result = hangar.call("prot", "whoami", json!({})).expect("whoami through the hangar succeeds");
    serde_json::from_str(result["result"].as_str().expect("whoami answers text")).expect("whoami answers JSON")
}

/// Every byte the hangar wrote or showed: its log, each file under its directory (the journal
/// as its entries too, as they are compressed there), and what its surfaces answer now.
fn every_surface(hangar: &Hangar) -> Vec<String> {
    let mut seen = vec![hangar.log()];
    fn files(dir: &Path, into: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                files(&path, into);
            } else if let Ok(bytes) = std::fs::read(&path) {
                into.push(String::from_utf8_lossy(&bytes).into_owned());
            }
        }
    }
    files(hangar.dir.path(), &mut seen);
    let journal = crate::journal_audit::journal_of(hangar);
    seen.extend(crate::journal_audit::entries(&journal).iter().map(Value::to_string));
    for path in ["/api/mcp_servers", "/api/mcp_servers/prot", "/api/mcp_servers/prot/logs", "/metrics", "/"] {
        seen.push(hangar.get(path).text);
    }
    seen.extend(hangar.bodies());
    seen
}

fn assert_nowhere(hangar: &Hangar, needles: &[String]) {
    let surfaces = every_surface(hangar);
    for needle in needles {
        for surface in &surfaces {
            assert!(!surface.contains(needle.as_str()), "a surface shows a secret or token {needle:?}");
        }
    }
}

#[test]
fn a_shared_client_credentials_token_reaches_the_upstream_and_no_surface() {
    let upstream = Upstream::start(300);
    let hangar = Hangar::start(&upstream.config(MACHINE));
    // The token is the hangar's own (the client-credentials grant's subject is its client).
    let who = whoami(&hangar);
    assert_eq!(who, json!({"sub": "hangar-m2m", "client_id": "hangar-m2m"}));
    assert_eq!(whoami(&hangar)["sub"], "hangar-m2m");
    // One token served both calls.
    assert_eq!(upstream.grants("client_credentials"), 1);
    let tokens: Vec<String> =
        upstream.calls().iter().map(|call| call["token"].as_str().unwrap_or_default().to_owned()).collect();
    assert_eq!(tokens.len(), 2);
    assert_eq!(tokens[0], tokens[1]);
    let mut needles = tokens;
    needles.push(SECRET.to_owned());
    assert_nowhere(&hangar, &needles);
    // Its details say it is OAuth, checked with the shared token.
    let auth = hangar.details("prot")["auth"].clone();
    assert_eq!(auth, json!({"kind": "oauth", "checks": "its credential"}));
}

#[test]
fn a_one_second_token_under_twenty_concurrent_calls_is_renewed_exactly_once() {
    let upstream = Upstream::start(1);
    let hangar = Hangar::start(&upstream.config(MACHINE));
    whoami(&hangar);
    // Wait (bounded) until the token the hangar holds (the last one it sent) has expired.
    let held = upstream.calls().last().expect("a call")["token"].as_str().unwrap().to_owned();
    let expiry = jwt_exp(&held);
    poll("the held token expires", Duration::from_secs(10), || (unix_now() > expiry).then_some(()));
    // The next token is slow to come, so that all twenty calls wait for it together, and lives
    // long, so that however slowly the calls go none outlives it.
    upstream.set_ttl(300);
    upstream.set_token_delay_ms(500);
    let before = upstream.grants("client_credentials");
    let called = upstream.calls().len();
    std::thread::scope(|scope| {
        let calls: Vec<_> = (0..20).map(|_| scope.spawn(|| whoami(&hangar))).collect();
        for call in calls {
            assert_eq!(call.join().expect("a call thread")["sub"], "hangar-m2m");
        }
    });
    assert_eq!(upstream.grants("client_credentials"), before + 1, "one new token for the twenty waiting calls");
    let later: Vec<String> =
        upstream.calls()[called..].iter().map(|call| call["token"].as_str().unwrap_or_default().to_owned()).collect();
    assert_eq!(later.len(), 20);
    assert!(later.iter().all(|token| *token == later[0] && *token != held));
    assert!(jwt_exp(&later[0]) > unix_now() + 60, "the renewed token is a long one");
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_secs()
}

#[test]
fn a_token_the_upstream_refuses_is_replaced_once_and_the_call_retried() {
    let upstream = Upstream::start(300);
    let hangar = Hangar::start(&upstream.config(MACHINE));
    whoami(&hangar);
    upstream.refuse_seen();
    // The held token is refused with 401 `invalid_token`: the call still succeeds, on a new one.
    assert_eq!(whoami(&hangar)["sub"], "hangar-m2m");
    assert_eq!(upstream.grants("client_credentials"), 2);
    let calls = upstream.calls();
    assert_eq!(calls.len(), 2);
    assert_ne!(calls[0]["token"], calls[1]["token"]);
}

#[test]
fn an_authorization_server_whose_metadata_names_another_issuer_is_refused() {
    // The upstream names `http://localhost:PORT`; the metadata found there says its issuer is
    // `http://127.0.0.1:PORT`: the hangar asks it for no token.
    let upstream = Upstream::start_naming(300, "localhost");
    let hangar = Hangar::start(&upstream.config(MACHINE));
    let (_, error) = hangar.call_error("prot", "whoami", json!({}));
    assert!(!error.is_empty());
    let logs = poll("the refusal is in the server's log", Duration::from_secs(10), || {
        let logs = hangar.get("/api/mcp_servers/prot/logs").text;
        logs.contains("says its issuer is").then_some(logs)
    });
    assert!(logs.contains(&format!("`{}`", upstream.idp)), "{logs}");
    assert_eq!(upstream.grants("client_credentials"), 0);
    assert!(upstream.calls().is_empty());
}

#[test]
fn mismatched_oauth_modes_and_a_bad_key_file_are_refused_at_load_with_their_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cases = [
        // Client credentials get the hangar's token, never a user's; a person's sign-in never
        // serves everyone.
        ("per: user", "per: shared", "mcp_servers.prot.auth.oauth.grant"),
        ("grant: authorization_code", "grant: client_credentials", "mcp_servers.prot.auth.oauth.per"),
        ("secret_file: relative", "secret_file: \"{secret}\"", "mcp_servers.prot.auth.oauth.client.secret_file"),
    ];
    for (with, instead_of, key) in cases {
        let oauth = MACHINE.replace(instead_of, with).replace("{secret}", "/etc/secret");
        let yaml = format!(
            "mcp_servers:\n  prot:\n    mode: remote\n    endpoint: http://127.0.0.1:9/mcp\n    auth:\n      oauth: {oauth}\n"
        );
        let config = dir.path().join("hangar.yaml");
        std::fs::write(&config, yaml).expect("write the config");
        let socket = dir.path().join("s.sock");
        let (code, stderr) = supervisor_exit(
            &[OsStr::new("--config"), config.as_os_str(), OsStr::new("--socket"), socket.as_os_str()],
            &[],
        );
        assert_eq!(code, Some(78), "{with}: {stderr}");
        assert!(stderr.contains(key), "{with}: the refusal names {key}: {stderr}");
    }
    // A key file that holds no key (here: too short) is a bad config too.
    let key = dir.path().join("short.key");
    std::fs::write(&key, "5a5a\n").expect("write the key");
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).expect("chmod the key");
    let config = dir.path().join("hangar.yaml");
    std::fs::write(&config, format!("credentials: {{key_file: \"{}\"}}\n", key.display())).expect("write the config");
    let socket = dir.path().join("s.sock");
    let (code, stderr) =
        supervisor_exit(&[OsStr::new("--config"), config.as_os_str(), OsStr::new("--socket"), socket.as_os_str()], &[]);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("credentials.key_file") && stderr.contains("not 32"), "{stderr}");
}

/// The `exp` claim of a JWT (the test reads its own upstream's tokens, to wait for expiry).
pub(crate) fn jwt_exp(token: &str) -> u64 {
    let payload = token.split('.').nth(1).expect("a JWT has a payload");
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).expect("the payload is base64url");
    let claims: Value = serde_json::from_slice(&bytes).expect("the payload is JSON");
    claims["exp"].as_u64().expect("the token has `exp`")
}

#[test]
fn a_stored_token_is_sealed_in_the_journal_and_outlives_a_restart() {
    let upstream = Upstream::start(300);
    // No `credentials:`: the key is the one the hangar makes in its state directory.
    let hangar = Hangar::start(&upstream.config(MACHINE));
    whoami(&hangar);
    assert_eq!(upstream.grants("client_credentials"), 1);
    let token = upstream.calls()[0]["token"].as_str().unwrap().to_owned();
    // Not in clear in the journal's files (nor anywhere else the hangar wrote or shows).
    assert_nowhere(&hangar, &[token.clone(), SECRET.to_owned()]);
    let state = hangar.path("state");
    let stored = poll("the token is stored", Duration::from_secs(10), || {
        let db = rusqlite::Connection::open_with_flags(
            state.join("journal.sqlite"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .ok()?;
        db.query_row("SELECT identity, mcp_server, length(sealed) FROM credentials", [], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?, row.get::<_, i64>(2)?))
        })
        .ok()
    });
    assert_eq!((stored.0.as_str(), stored.1.as_str()), ("hangar", "prot"));
    assert!(stored.2 > token.len() as i64, "the sealed value holds the token");

    // After a restart the kept token is used: no new grant, the same token upstream.
    let hangar = hangar.restart(Signal::SIGTERM, &[]);
    assert_eq!(whoami(&hangar)["sub"], "hangar-m2m");
    assert_eq!(upstream.grants("client_credentials"), 1);
    assert_eq!(upstream.calls()[1]["token"], token.as_str());
    assert_nowhere(&hangar, &[token, SECRET.to_owned()]);
}
