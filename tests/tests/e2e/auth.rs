//! API keys: with keys configured every route but the health probes needs one; serving beyond
//! loopback without keys is refused before anything listens.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use hangar_tests::bin;

// `printf %s s3cret-key | sha256sum`
const KEY: &str = "s3cret-key";

fn hash(key: &str) -> String {
    let out = Command::new("sha256sum").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().and_then(|mut child| {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(key.as_bytes())?;
        child.wait_with_output()
    });
    let out = out.unwrap();
    format!("sha256:{}", String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap())
}

#[test]
fn keys_guard_every_route_but_health() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    std::fs::write(&keys, format!("# operators\n{} # ci\n", hash(KEY))).unwrap();
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

#[test]
fn beyond_loopback_without_keys_is_refused_before_listening() {
    let output = Command::new(bin("hangar-api"))
        .args(["--listen", "0.0.0.0:0", "--socket", "/nonexistent/s.sock"])
        .env_remove("HANGAR_API_KEYS_FILE")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("refusing to serve 0.0.0.0:0 beyond loopback without API keys"), "{stderr}");
    assert!(output.stdout.is_empty(), "nothing listened");
    let bad = Command::new(bin("hangar-api")).args(["--api-keys", "/nonexistent/keys"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(78), "an unreadable key file is a config error");
}
