//! API keys: with keys configured every route but the health probes needs one; beyond loopback
//! the API fails closed: nothing is served anonymously there.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use hangar_tests::{Hangar, bin, key_hash, poll};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

// `printf %s s3cret-key | sha256sum`
const KEY: &str = "s3cret-key";

#[test]
fn keys_guard_every_route_but_health() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    std::fs::write(&keys, format!("# operators\n{} # ci\n", key_hash(KEY))).unwrap();
    let mut api = Command::new(bin("hangar-api"))
        .arg("--api-keys")
        .arg(&keys)
        .args(["--listen", "127.0.0.1:0", "--socket"])
        .arg(dir.path().join("none.sock"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(api.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let base = line.trim().strip_prefix("hangar-api listening on ").unwrap().to_owned();
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let status = |path: &str, header: Option<(&str, String)>| {
        let mut request = agent.get(&format!("{base}{path}"));
        if let Some((name, value)) = header {
            request = request.header(name, value);
        }
        request.call().unwrap().status().as_u16()
    };
    assert_eq!(status("/health/live", None), 200, "probes need no key");
    assert_eq!(status("/api/mcp_servers", None), 401);
    assert_eq!(status("/metrics", None), 401);
    assert_eq!(status("/api/mcp_servers", Some(("X-API-Key", "wrong".into()))), 401);
    // With the key the request gets through (to a supervisor that is not there: 503).
    assert_eq!(status("/api/mcp_servers", Some(("X-API-Key", KEY.into()))), 503);
    assert_eq!(status("/api/mcp_servers", Some(("Authorization", format!("Bearer {KEY}")))), 503);
    let mcp = agent.post(&format!("{base}/mcp")).header("Content-Type", "application/json").send("{}").unwrap();
    assert_eq!(mcp.status().as_u16(), 401, "MCP needs the key too");
    let _ = api.kill();
    let _ = api.wait();
}

/// Beyond loopback the API fails closed: until authentication is configured (and again when a
/// reload removes it) every request but the health probes is refused, 503, naming the rule.
///
/// Everything in a test listens on loopback, so the API listens on `[::ffff:127.0.0.1]`, the
/// IPv4-mapped loopback address: only loopback reaches it, but the exposure rule judges an address
/// by what it says, and this one is not `127.0.0.0/8` or `[::1]`: it is served as beyond loopback.
#[test]
fn beyond_loopback_nothing_is_served_until_authentication_is_configured() {
    const NO_AUTH: &str = "mcp_servers:\n  math: {command: [\"{fake}\", \"--tools\", \"add\"]}\n";
    let hangar = Hangar::start_with(NO_AUTH, &["--listen", "[::ffff:127.0.0.1]:0"]);
    assert!(hangar.base.contains("[::ffff:127.0.0.1]"), "{}", hangar.base);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let get = |path: &str, key: Option<&str>| {
        let mut request = agent.get(&format!("{}{path}", hangar.base));
        if let Some(key) = key {
            request = request.header("X-API-Key", key);
        }
        let response = request.call().unwrap();
        (response.status().as_u16(), response.into_body().read_to_string().unwrap_or_default())
    };
    let rule = "listens beyond loopback and no authentication is configured";
    // The supervisor's settings are learned (ready) and configure nothing: nothing is anonymous.
    let (status, body) = get("/api/mcp_servers", None);
    assert_eq!(status, 503, "{body}");
    assert!(body.contains(rule), "{body}");
    assert_eq!(get("/metrics", None).0, 503);
    let mcp = agent
        .post(&format!("{}/mcp", hangar.base))
        .header("Content-Type", "application/json")
        .send(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .unwrap();
    assert_eq!(mcp.status().as_u16(), 503, "MCP too");
    assert_eq!(get("/health/live", None).0, 200, "probes stay open");
    assert_eq!(get("/health/ready", None).0, 200);

    // A reload configures a key: served, with it only.
    let config = hangar.path("hangar.yaml");
    let math = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("auth:\n  api_keys:\n    - {{name: ops, hash: \"{}\"}}\n{math}", key_hash(KEY)))
        .unwrap();
    kill(Pid::from_raw(hangar.pid() as i32), Signal::SIGHUP).unwrap();
    let listed = poll("the key accepted", Duration::from_secs(10), || {
        let (status, body) = get("/api/mcp_servers", Some(KEY));
        (status == 200).then_some(body)
    });
    assert!(listed.contains("math"), "{listed}");
    assert_eq!(get("/api/mcp_servers", None).0, 401);
    assert_eq!(get("/api/mcp_servers", Some("wrong")).0, 401);

    // A reload removes every key: refused again, key or not, never anonymous.
    std::fs::write(&config, &math).unwrap();
    kill(Pid::from_raw(hangar.pid() as i32), Signal::SIGHUP).unwrap();
    poll("refused again", Duration::from_secs(10), || (get("/api/mcp_servers", Some(KEY)).0 == 503).then_some(()));
    assert_eq!(get("/api/mcp_servers", None).0, 503);
    // Logged once per change into the unprotected state: at start, and after the second reload.
    let logged = || hangar.log().lines().filter(|l| l.contains(rule) && l.contains("ERROR")).count();
    poll("the second error logged", Duration::from_secs(10), || (logged() >= 2).then_some(()));
    assert_eq!(logged(), 2, "{}", hangar.log());
    assert!(!hangar.log().contains(KEY), "a key is never logged");
}

#[test]
fn an_unreadable_key_file_is_a_config_error() {
    let bad = Command::new(bin("hangar-api")).args(["--api-keys", "/nonexistent/keys"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(78), "an unreadable key file is a config error");
}

/// The production case: OAuth configured in the config alone (no `--api-keys`) is enough to serve
/// beyond loopback (the IPv4-mapped loopback, as above): a token is served, no token gets the
/// challenge, never the exposure rule's 503.
#[test]
fn oauth_in_the_config_alone_serves_beyond_loopback() {
    let idp = super::oauth::Idp::start(hangar_tests::free_port());
    let hangar = Hangar::start_with(&super::oauth::config(&idp.url), &["--listen", "[::ffff:127.0.0.1]:0"]);
    let (status, challenge, _) = super::oauth::get_with(&hangar, "/api/mcp_servers", None);
    assert_eq!((status, challenge.starts_with("Bearer resource_metadata=")), (401, true), "{challenge}");
    let token = idp.token("admin-bot", "mcp", &format!("{}/mcp", hangar.base));
    let (status, _, body) = super::oauth::get_with(&hangar, "/api/mcp_servers", Some(&token));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["mcp_servers"][0]["mcp_server_id"], "math", "{body}");
    assert!(!hangar.log().contains("no authentication is configured"), "{}", hangar.log());
}
