//! Static credentials for upstreams (issue 31 §1): `auth.headers` of a remote server and `env:`
//! of a stdio one take `{file: PATH}` / `{env: NAME}`, never inline text. The far end is the
//! fake upstream as a protected resource and a witness (`--require-auth-file`,
//! `--record-headers`): it sees the configured credential on every request, and never the
//! caller's own `Authorization`, API key or cookie. A refused credential is
//! `upstream_unauthorized` (its challenge summarised, the key to fix named), not a restart loop;
//! a rotated file takes effect on reload for that server only. The secret's bytes are looked for
//! on every surface, in the hangar's logs and in the journal, and found on none.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Background, Hangar, bin, free_port, key_hash, poll, supervisor_exit};

use crate::journal_audit::{entries, journal_of};

const TOKEN: &str = "ghp_static-credential-7f3a9c";
const ROTATED: &str = "ghp_rotated-credential-21be04";
const TENANT: &str = "tenant-secret-5d81";
const CALLER_KEY: &str = "caller-own-key-0c4e77";
const CALLER_COOKIE: &str = "session=caller-cookie-93aa1f";

/// The fake upstream over HTTP on a port of its own, requiring `Authorization: Bearer <token
/// file's text>` and recording every request's headers.
struct Protected {
    port: u16,
    recorded: PathBuf,
    _server: Background,
}

impl Protected {
    fn start(dir: &Path) -> Protected {
        let port = free_port();
        let expected = dir.join("expected-authorization");
        std::fs::write(&expected, format!("Bearer {TOKEN}")).unwrap();
        let recorded = dir.join("recorded-headers.jsonl");
        let server = Background::start(
            &bin("hangar-upstream-fake"),
            &[
                "--http",
                &format!("127.0.0.1:{port}"),
                "--tools",
                "add,echo",
                "--require-auth-file",
                expected.to_str().unwrap(),
                "--record-headers",
                recorded.to_str().unwrap(),
            ],
            "listening on",
        );
        Protected { port, recorded, _server: server }
    }

    /// Every request's headers the upstream has seen so far.
    fn requests(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.recorded).unwrap_or_default();
        text.lines().filter_map(|line| hangar_tests::serde_json::from_str(line).ok()).collect()
    }
}

/// A remote server `far` whose `Authorization` is read from `token_file`, and a stdio server
/// `near`, with `extra` at the top of the config.
fn config(extra: &str, port: u16, token_file: &Path) -> String {
    format!(
        r#"{extra}
mcp_servers:
  far:
    mode: remote
    endpoint: http://127.0.0.1:{port}/mcp
    health_check_interval_s: 0.2
    max_consecutive_failures: 1
    auth:
      headers:
        Authorization: {{file: "{}", prefix: "Bearer "}}
        X-Tenant: {{env: TENANT_ID}}
  near:
    command: ["sh", "-c", "printf '%s|%s' \"${{TENANT_ID-withheld}}\" \"${{CREDENTIALS_DIRECTORY-withheld}}\" > {{dir}}/near-env; exec {{fake}} --tools add"]
"#,
        token_file.display()
    )
}

/// Every read surface, the hangar's own log and its journal (the file's bytes and its entries):
/// none holds any of `secrets`.
fn assert_on_no_surface(hangar: &Hangar, key: Option<&str>, secrets: &[&str]) {
    let mut seen = Vec::new();
    let (_, _, list) = get(hangar, "/api/mcp_servers", key);
    let ids: Vec<String> = hangar_tests::serde_json::from_str::<Value>(&list).unwrap()["mcp_servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|server| server["mcp_server_id"].as_str().unwrap().to_owned())
        .collect();
    let each = ids.iter().flat_map(|id| ["", "/tools", "/logs"].map(|tail| format!("/api/mcp_servers/{id}{tail}")));
    // `/api/events` is a stream that stays open: what it replays is the journal's entries, read below.
    let everywhere = ["/api/mcp_servers", "/api/audit", "/api/whoami", "/metrics", "/"].map(str::to_owned);
    for path in each.chain(everywhere) {
        let (status, _, text) = get(hangar, &path, key);
        assert!(status < 500, "{path}: {status} {text}");
        seen.push((path, text));
    }
    seen.push(("the hangar's log".into(), hangar.log()));
    for body in hangar.bodies() {
        seen.push(("a body read earlier".into(), body));
    }
    let journal = journal_of(hangar);
    for entry in entries(&journal) {
        seen.push(("a journal entry".into(), entry.to_string()));
    }
    for file in files_under(hangar.dir.path()) {
        let bytes = std::fs::read(&file).unwrap_or_default();
        seen.push((file.display().to_string(), String::from_utf8_lossy(&bytes).into_owned()));
    }
    for (surface, text) in &seen {
        for secret in secrets {
            assert!(!text.contains(secret), "{surface} holds the secret {secret:?}");
        }
    }
}

/// Every file under `dir`, at any depth.
pub(super) fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else if path.is_file() {
            files.push(path);
        }
    }
    files
}

/// A loopback OTLP/HTTP collector keeping each export's raw bytes, to grep.
struct Collector {
    endpoint: String,
    bodies: std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
}

impl Collector {
    fn start() -> Collector {
        let server = tiny_http::Server::http("127.0.0.1:0").expect("bind the collector");
        let port = server.server_addr().to_ip().expect("an IP listener").port();
        let bodies = std::sync::Arc::<std::sync::Mutex<Vec<Vec<u8>>>>::default();
        let into = bodies.clone();
        // Serves until the test process ends; each test has its own port.
        std::thread::spawn(move || {
            for mut request in server.incoming_requests() {
                let mut body = Vec::new();
                let _ = std::io::Read::read_to_end(request.as_reader(), &mut body);
                into.lock().unwrap().push(body);
                let _ = request.respond(tiny_http::Response::empty(200));
            }
        });
        Collector { endpoint: format!("http://127.0.0.1:{port}"), bodies }
    }
}

/// A GET with the caller's key, if any: (status, `WWW-Authenticate`, body text).
fn get(hangar: &Hangar, path: &str, key: Option<&str>) -> (u16, String, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let mut request = agent.get(&format!("{}{path}", hangar.base));
    if let Some(key) = key {
        request = request.header("X-API-Key", key);
    }
    let mut response = request.call().unwrap();
    let status = response.status().as_u16();
    let challenge =
        response.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    (status, challenge, response.body_mut().read_to_string().unwrap_or_default())
}

#[test]
fn static_headers_reach_the_upstream_and_never_the_callers_own_credentials_nor_any_surface() {
    let secrets = tempfile::tempdir().unwrap();
    let protected = Protected::start(secrets.path());
    let token_file = secrets.path().join("github-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let collector = Collector::start();
    let extra = format!(
        "auth:\n  api_keys:\n    - {{name: ops, hash: \"{}\"}}\naudit: {{arguments: full}}\ntelemetry: {{otlp_endpoint: \"{}\"}}\n",
        key_hash(CALLER_KEY),
        collector.endpoint
    );
    let hangar = Hangar::start_with_env(
        &config(&extra, protected.port, &token_file),
        &[],
        &[("TENANT_ID", TENANT), ("HANGAR_LOG", "debug")],
    );
    // The caller comes with its key three ways and a cookie; the upstream must see none of them.
    let bearer = format!("Bearer {CALLER_KEY}");
    let calls = json!({"calls": [{"mcp_server": "far", "tool": "add", "arguments": {"a": 40, "b": 2}}]});
    let answer = hangar.mcp_with(
        "tools/call",
        json!({"name": "hangar_call", "arguments": calls}),
        json!({}),
        &[("Authorization", &bearer), ("X-API-Key", CALLER_KEY), ("Cookie", CALLER_COOKIE)],
    );
    assert_eq!(answer.status, 200, "{}", answer.text);
    let result = &answer.body["result"]["structuredContent"]["results"][0];
    assert_eq!(result["result"]["structuredContent"], json!({"result": 42}), "{}", answer.text);
    let requests = protected.requests();
    assert!(requests.len() >= 2, "the handshake and the call reached the upstream: {requests:?}");
    for request in &requests {
        assert_eq!(request["authorization"], format!("Bearer {TOKEN}"), "{request}");
        assert_eq!(request["x-tenant"], TENANT, "{request}");
        let text = request.to_string();
        for own in [CALLER_KEY, CALLER_COOKIE] {
            assert!(!text.contains(own), "the caller's own credential reached the upstream: {text}");
        }
        assert!(request.get("cookie").is_none() && request.get("x-api-key").is_none(), "{request}");
    }
    // The hangar's own `hangar_status` and every other surface: never the token or the tenant.
    let status = hangar.mcp_with(
        "tools/call",
        json!({"name": "hangar_status", "arguments": {}}),
        json!({}),
        &[("X-API-Key", CALLER_KEY)],
    );
    assert_eq!(status.status, 200, "{}", status.text);
    // The traces the call exported, and the event stream from its start: neither holds them.
    let exported = poll("the call's spans at the collector", Duration::from_secs(20), || {
        let bodies = collector.bodies.lock().unwrap().clone();
        bodies.iter().any(|body| body.windows(26).any(|w| w == b"hangar.upstream.round_trip")).then_some(bodies)
    });
    for body in &exported {
        for secret in [TOKEN, TENANT] {
            assert!(!body.windows(secret.len()).any(|w| w == secret.as_bytes()), "a span holds {secret:?}");
        }
    }
    let stream = crate::events::EventStream::open(&hangar, "?since=0", &[("X-API-Key", CALLER_KEY)]);
    let events = stream.until("the call's audit event", |event| event.kind == "audit");
    stream.close();
    for event in &events {
        let text = event.data.to_string();
        for secret in [TOKEN, TENANT] {
            assert!(!text.contains(secret), "an event holds {secret:?}: {text}");
        }
    }
    // The token file was written with the usual umask (0644): said aloud, by path and mode.
    let warned = hangar.log();
    let warning = warned.lines().find(|line| line.contains("a credential file others may read")).unwrap_or_default();
    assert!(warning.contains(&token_file.display().to_string()) && warning.contains("0644"), "{warned}");
    // Its details say how it proves itself, by header name only.
    let (_, _, details) = get(&hangar, "/api/mcp_servers/far", Some(CALLER_KEY));
    let auth = hangar_tests::serde_json::from_str::<Value>(&details).unwrap()["auth"].clone();
    assert_eq!(auth, json!({"kind": "headers", "headers": ["Authorization", "X-Tenant"], "checks": "its credential"}));
    assert_on_no_surface(&hangar, Some(CALLER_KEY), &[TOKEN, TENANT]);
}

#[test]
fn a_refused_credential_is_upstream_unauthorized_then_a_rotated_file_takes_effect_on_reload() {
    let secrets = tempfile::tempdir().unwrap();
    let protected = Protected::start(secrets.path());
    let token_file = secrets.path().join("github-token");
    std::fs::write(&token_file, format!("{ROTATED}\n")).unwrap();
    std::fs::set_permissions(&token_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let unused = tempfile::tempdir().unwrap();
    let hangar = Hangar::start_with_env(
        &config("", protected.port, &token_file),
        &[],
        &[("TENANT_ID", TENANT), ("CREDENTIALS_DIRECTORY", unused.path().to_str().unwrap())],
    );
    assert_eq!(hangar.call("near", "add", json!({"a": 1, "b": 1})), Some(json!({"result": 2})));
    assert!(!hangar.log().contains("a credential file others may read"), "a 0600 file is not warned of");
    let near_pid = hangar.details("near")["meta"]["pid"].clone();
    // Another server's child does not inherit the variable `far`'s credential is read from.
    let inherited = poll("near's environment", Duration::from_secs(10), || {
        std::fs::read_to_string(hangar.path("near-env")).ok().filter(|s| !s.is_empty())
    });
    assert_eq!(inherited, "withheld|withheld");

    // The upstream refuses the configured token: the call's own error type, the challenge's
    // parameters and the key to fix, never the upstream's free text.
    let (kind, message) = hangar.call_error("far", "add", json!({"a": 1, "b": 2}));
    assert_eq!(kind, "upstream_unauthorized", "{message}");
    for part in [
        "HTTP 401",
        r#"realm="fake-upstream""#,
        r#"scope="mcp:tools""#,
        r#"resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/mcp""#,
        r#"error="invalid_token""#,
        "mcp_servers.far.auth.headers",
    ] {
        assert!(message.contains(part), "{part:?} missing from {message}");
    }
    assert!(!message.contains("FAKE-FREE-TEXT"), "{message}");
    // Its record: dead for that reason, revived by a start, no backoff; not crashed.
    let dead = hangar.details("far")["dead"].clone();
    assert_eq!(dead["reason"], "upstream_unauthorized", "{dead}");
    assert_eq!((dead["revived_by"].as_str(), &dead["retry_allowed_at"]), (Some("start"), &Value::Null), "{dead}");
    assert!(dead["detail"].as_str().unwrap_or_default().contains("mcp_servers.far.auth.headers"), "{dead}");
    // No restart loop: a second call is refused by the record, without asking the upstream again.
    let asked = protected.requests().len();
    let (kind, _) = hangar.call_error("far", "add", json!({"a": 1, "b": 2}));
    assert_eq!(kind, "upstream_unauthorized");
    assert_eq!(protected.requests().len(), asked, "a call to the refused server asked the upstream again");
    // REST says the same, with its own code.
    let start = hangar.post("/api/mcp_servers/far/start", None);
    assert_eq!(start.body["error"]["code"], "UpstreamUnauthorized", "{}", start.text);
    assert_eq!(hangar.metric(r#"hangar_mcp_server_deaths_total{mcp_server="far",reason="crashed"}"#), None);
    // The refusal's body, which quotes the credential it got, is in the server's log, cleaned.
    let logs = hangar.get("/api/mcp_servers/far/logs");
    assert!(logs.text.contains("FAKE-FREE-TEXT"), "the refusal's body is in the server's log: {}", logs.text);
    assert_on_no_surface(&hangar, None, &[ROTATED, TENANT]);

    // The operator rotates the file and reloads: `far` alone is replaced, and now it is let in.
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let reloaded = hangar.post("/api/config/reload", None);
    assert_eq!(reloaded.status, 200, "{}", reloaded.text);
    assert_eq!(reloaded.body["changed"], json!(["far"]), "{}", reloaded.text);
    assert_eq!(hangar.call("far", "add", json!({"a": 20, "b": 22})), Some(json!({"result": 42})));
    assert_eq!(hangar.details("near")["meta"]["pid"], near_pid, "the other server was left running");

    // The upstream revokes the token while `far` runs: the call says so in its own type, and
    // the health checks' recovery ends at `upstream_unauthorized`, not in a loop of restarts.
    std::fs::write(secrets.path().join("expected-authorization"), "Bearer revoked-elsewhere").unwrap();
    let (kind, message) = hangar.call_error("far", "add", json!({"a": 1, "b": 2}));
    assert_eq!(kind, "upstream_unauthorized", "{message}");
    assert!(message.contains("mcp_servers.far.auth.headers"), "{message}");
    let dead = poll("far dead for its credential", Duration::from_secs(20), || {
        let details = hangar.details("far");
        (details["dead"]["reason"] == "upstream_unauthorized").then(|| details["dead"].clone())
    });
    assert_eq!(dead["retry_allowed_at"], Value::Null, "{dead}");
    let asked = protected.requests().len();
    let (kind, _) = hangar.call_error("far", "add", json!({"a": 1, "b": 2}));
    assert_eq!(kind, "upstream_unauthorized");
    assert_eq!(protected.requests().len(), asked, "the dead server asked the upstream again");
    assert_on_no_surface(&hangar, None, &[TOKEN, ROTATED, TENANT]);
}

#[test]
fn a_credential_that_cannot_be_read_stops_the_start_and_is_a_refused_reload() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let exit = |yaml: &str, env: &[(&str, Option<&str>)]| {
        let config = dir.path().join("hangar.yaml");
        std::fs::write(&config, yaml).unwrap();
        supervisor_exit(&["--config".as_ref(), config.as_os_str(), "--socket".as_ref(), socket.as_os_str()], env)
    };
    let remote = |auth: &str| {
        format!("mcp_servers:\n  far:\n    mode: remote\n    endpoint: http://127.0.0.1:9/mcp\n    auth: {auth}\n")
    };
    let no_credentials_dir = [("CREDENTIALS_DIRECTORY", None)];
    for (yaml, key, words) in [
        (
            remote("{headers: {Authorization: 'Bearer ghp_pasted-inline-0001'}}"),
            "mcp_servers.far.auth.headers.Authorization",
            "never inline",
        ),
        (
            remote("{headers: {Authorization: {file: /nonexistent/token}}}"),
            "mcp_servers.far.auth.headers.Authorization.file",
            "cannot read /nonexistent/token",
        ),
        (
            remote("{headers: {Authorization: {file: token}}}"),
            "mcp_servers.far.auth.headers.Authorization.file",
            "CREDENTIALS_DIRECTORY",
        ),
        (
            remote("{oauth: {per: user, grant: client_credentials, client: {id: h, secret_file: /s}}}"),
            "mcp_servers.far.auth.oauth.grant",
            "not for a user",
        ),
        (remote("{token_exchange: {audience: x}}"), "mcp_servers.far.auth.token_exchange", "token_endpoint"),
        (remote("{oauth: {per: user, grant: authorization_code}}"), "credentials.public_url", "in a browser"),
        (remote("{headers: {Host: {env: X}}}"), "mcp_servers.far.auth.headers.Host", "set by the hangar"),
        (
            "mcp_servers:\n  far: {mode: remote, endpoint: 'http://127.0.0.1:9/mcp', env: {T: x}}\n".into(),
            "mcp_servers.far.env",
            "auth.headers",
        ),
        (
            "mcp_servers:\n  far: {mode: remote, endpoint: 'http://user:pw-in-url-77@127.0.0.1:9/mcp'}\n".into(),
            "mcp_servers.far.endpoint",
            "auth.headers",
        ),
        (
            "mcp_servers:\n  n:\n    command: [x]\n    env: {NOTES_TOKEN: {env: UNSET_CREDENTIAL_VAR}}\n".into(),
            "mcp_servers.n.env.NOTES_TOKEN.env",
            "UNSET_CREDENTIAL_VAR",
        ),
    ] {
        let (code, stderr) = exit(&yaml, &no_credentials_dir);
        assert_eq!(code, Some(78), "{yaml}\n{stderr}");
        assert!(stderr.contains(&format!("{key}: ")) && stderr.contains(words), "{yaml}\n{stderr}");
        for secret in ["ghp_pasted-inline-0001", "pw-in-url-77"] {
            assert!(!stderr.contains(secret), "{stderr}");
        }
    }

    // A box may not be granted a credential file, nor a directory above one: it would read
    // another upstream's credential (its own reaches it in its environment).
    let credentials = tempfile::tempdir().unwrap();
    let token_file = credentials.path().join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let boxed = format!(
        "mcp_servers:\n  far:\n    mode: remote\n    endpoint: http://127.0.0.1:9/mcp\n    auth: {{headers: {{Authorization: {{file: \"{}\"}}}}}}\n  \
         boxed:\n    command: [x]\n    sandbox: {{preset: strict, filesystem: {{read: [/usr, \"{}\"]}}}}\n",
        token_file.display(),
        credentials.path().display()
    );
    let (code, stderr) = exit(&boxed, &no_credentials_dir);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("mcp_servers.boxed.sandbox.filesystem.read[1]: "), "{stderr}");
    assert!(stderr.contains("a credential file"), "{stderr}");
    // Nor an OAuth client's secret.
    let client_secret = credentials.path().join("client-secret");
    std::fs::write(&client_secret, "client-secret").unwrap();
    let boxed = format!(
        "mcp_servers:\n  far:\n    mode: remote\n    endpoint: http://127.0.0.1:9/mcp\n    auth: {{oauth: {{per: shared, grant: client_credentials, client: {{id: h, secret_file: \"{}\"}}}}}}\n  \
         boxed:\n    command: [x]\n    sandbox: {{preset: strict, filesystem: {{read: [/usr, \"{}\"]}}}}\n",
        client_secret.display(),
        credentials.path().display()
    );
    let (code, stderr) = exit(&boxed, &no_credentials_dir);
    assert_eq!(code, Some(78), "{stderr}");
    assert!(stderr.contains("mcp_servers.boxed.sandbox.filesystem.read[1]: "), "{stderr}");
    assert!(stderr.contains("a credential file"), "{stderr}");

    // Running, a file gone missing refuses the reload; the running config stays.
    let port = free_port();
    let hangar = Hangar::start_with_env(&config("", port, &token_file), &[], &[("TENANT_ID", TENANT)]);
    std::fs::remove_file(&token_file).unwrap();
    let refused = hangar.post("/api/config/reload", None);
    assert_eq!(refused.status, 400, "{}", refused.text);
    let message = refused.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("mcp_servers.far.auth.headers.Authorization.file"), "{message}");
    assert!(message.contains("the running one stays"), "{message}");
    assert_eq!(hangar.call("near", "add", json!({"a": 2, "b": 2})), Some(json!({"result": 4})));
}

#[test]
fn a_stdio_servers_env_credential_comes_from_the_credentials_directory() {
    let credentials = tempfile::tempdir().unwrap();
    std::fs::write(credentials.path().join("notes-token"), "notes-secret-4412\n").unwrap();
    let hangar = Hangar::start_with_env(
        r#"
mcp_servers:
  notes:
    command: ["sh", "-c", "printf '%s|%s' \"$NOTES_TOKEN\" \"$PLAIN\" > {dir}/seen-env; exec {fake} --tools add"]
    env:
      NOTES_TOKEN: {file: notes-token, prefix: "tok:"}
      PLAIN: as-before
"#,
        &[],
        &[("CREDENTIALS_DIRECTORY", credentials.path().to_str().unwrap())],
    );
    assert_eq!(hangar.call("notes", "add", json!({"a": 1, "b": 2})), Some(json!({"result": 3})));
    let seen = poll("the child's environment", Duration::from_secs(10), || {
        std::fs::read_to_string(hangar.path("seen-env")).ok().filter(|s| !s.is_empty())
    });
    assert_eq!(seen, "tok:notes-secret-4412|as-before");
    std::fs::remove_file(hangar.path("seen-env")).unwrap();
    assert_on_no_surface(&hangar, None, &["notes-secret-4412"]);
}

#[test]
fn a_managed_http_server_gets_its_headers_from_the_hangars_environment() {
    let secrets = tempfile::tempdir().unwrap();
    let (expected, recorded) = (secrets.path().join("expected"), secrets.path().join("recorded.jsonl"));
    std::fs::write(&expected, format!("Bearer {TOKEN}")).unwrap();
    let port = free_port();
    let hangar = Hangar::start_with_env(
        &format!(
            r#"
mcp_servers:
  web:
    mode: http
    command: ["{{fake}}", "--http", "127.0.0.1:{port}", "--tools", "add", "--require-auth-file", "{}", "--record-headers", "{}"]
    endpoint: http://127.0.0.1:{port}/mcp
    auth:
      headers:
        Authorization: {{env: WEB_TOKEN, prefix: "Bearer "}}
"#,
            expected.display(),
            recorded.display()
        ),
        &[],
        &[("WEB_TOKEN", TOKEN)],
    );
    assert_eq!(hangar.call("web", "add", json!({"a": 2, "b": 3})), Some(json!({"result": 5})));
    let requests = std::fs::read_to_string(&recorded).unwrap();
    assert!(!requests.is_empty());
    for line in requests.lines() {
        let request: Value = hangar_tests::serde_json::from_str(line).unwrap();
        assert_eq!(request["authorization"], format!("Bearer {TOKEN}"), "{request}");
    }
    assert_on_no_surface(&hangar, None, &[TOKEN]);
}
