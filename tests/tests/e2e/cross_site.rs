//! No web page can drive or read the hangar. Every route but `/health/*` (REST, `/mcp`,
//! `/metrics`, the 404 and 405 fallbacks) refuses a foreign `Origin`, a rebound `Host`,
//! `Origin: null` and a "simple" cross-site POST with 403, with an API key or without, and nothing
//! changes: same upstream process, same states, config not reloaded. The hangar's own clients
//! (the `hangar` CLI, a curl line with its JSON header, a local tool's loopback origin) still work.

use std::ffi::OsStr;
use std::process::{Command, Output, Stdio};

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, MODERN, alive, bin, raw_http, read_pid};

const CONFIG: &str = r#"
mcp_servers:
  math:
    command: ["{fake}", "--tools", "add", "--pid-file", "{dir}/math.pid"]
  idle:
    command: ["{fake}", "--tools", "add"]
"#;

/// `printf %s cross-site-key | sha256sum`
const KEY: &str = "cross-site-key";
const KEY_HASH: &str = "sha256:86c3b0050014e8d3926bb6a04b023808204536961d85d3464dbb6be5a7c42a76";

/// One route: method, path, extra headers a real client of it sends, body.
struct Route {
    method: &'static str,
    path: &'static str,
    headers: Vec<(&'static str, String)>,
    body: String,
}

impl Route {
    fn new(method: &'static str, path: &'static str) -> Route {
        Route { method, path, headers: Vec::new(), body: String::new() }
    }

    fn is_mcp(&self) -> bool {
        self.path == "/mcp"
    }
}

/// What the hostile request looks like, and the refusal it must get.
struct Hostile {
    what: &'static str,
    /// `None`: the listener's own `127.0.0.1:PORT`.
    host: Option<String>,
    origin: Option<String>,
    content_type: Option<&'static str>,
    reason: &'static str,
}

const HOST_REFUSED: &str = "host not allowed";
const ORIGIN_REFUSED: &str = "origin not allowed";
const JSON_REQUIRED: &str = "needs Content-Type: application/json";

/// Every variant a page can send: through a foreign origin, a rebound name, an opaque origin,
/// and (for a POST) as a simple request that needs no preflight.
fn variants(port: u16, post: bool) -> Vec<Hostile> {
    let json = Some("application/json");
    let rebound = format!("evil.example:{port}");
    let mut all = vec![
        Hostile {
            what: "a foreign Origin",
            host: None,
            origin: Some("https://evil.example".into()),
            content_type: json,
            reason: ORIGIN_REFUSED,
        },
        Hostile {
            what: "a rebound Host",
            host: Some(rebound.clone()),
            origin: None,
            content_type: json,
            reason: HOST_REFUSED,
        },
        Hostile {
            what: "a rebound Host with its own Origin",
            host: Some(rebound.clone()),
            origin: Some(format!("http://{rebound}")),
            content_type: json,
            reason: HOST_REFUSED,
        },
        Hostile {
            what: "Origin: null",
            host: None,
            origin: Some("null".into()),
            content_type: json,
            reason: ORIGIN_REFUSED,
        },
    ];
    if post {
        for (what, content_type) in [
            ("a simple POST without Content-Type", None),
            ("a simple text/plain POST", Some("text/plain")),
            ("a simple form POST", Some("application/x-www-form-urlencoded")),
            ("a simple multipart POST", Some("multipart/form-data; boundary=x")),
        ] {
            all.push(Hostile { what, host: None, origin: None, content_type, reason: JSON_REQUIRED });
        }
    }
    all
}

/// Sends `route` as `hostile` to `addr`, with `key` if given; asserts the 403 and its shape.
fn assert_refused(addr: &str, route: &Route, hostile: &Hostile, key: Option<&str>) {
    let mut head = format!("{} {} HTTP/1.1\r\n", route.method, route.path);
    head += &format!("Host: {}\r\n", hostile.host.as_deref().unwrap_or(addr));
    if let Some(origin) = &hostile.origin {
        head += &format!("Origin: {origin}\r\n");
    }
    if let Some(content_type) = hostile.content_type {
        head += &format!("Content-Type: {content_type}\r\n");
    }
    if let Some(key) = key {
        head += &format!("X-API-Key: {key}\r\n");
    }
    for (name, value) in &route.headers {
        head += &format!("{name}: {value}\r\n");
    }
    let context = format!("{} {} with {} (key: {})", route.method, route.path, hostile.what, key.is_some());
    let (status, answer) = raw_http(addr, &head, route.body.as_bytes()).unwrap_or_else(|e| panic!("{context}: {e}"));
    assert_eq!(status, 403, "{context}: {answer}");
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let body: Value = hangar_tests::serde_json::from_str(body).unwrap_or_else(|e| panic!("{context}: {e}: {answer}"));
    let message = if route.is_mcp() {
        assert_eq!(body["error"]["code"], -32600, "{context}: the JSON-RPC shape on /mcp: {body}");
        body["error"]["message"].as_str()
    } else {
        assert_eq!(body["error"]["code"], "Forbidden", "{context}: the REST envelope: {body}");
        body["error"]["message"].as_str()
    };
    let message = message.unwrap_or_else(|| panic!("{context}: no message: {body}"));
    assert!(message.contains(hostile.reason), "{context}: says why: {message}");
    assert!(!message.contains("evil.example") && message.len() < 300, "{context}: echoes nothing: {message}");
}

/// Runs `hangar --url URL args...` to completion.
fn cli(url: &str, key: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(bin("hangar"));
    command.arg("--url").arg(url).env_remove("HANGAR_URL").env_remove("HANGAR_API_KEY").stdin(Stdio::null());
    if let Some(key) = key {
        command.args(["--api-key", key]);
    }
    command.args(args).output().expect("run hangar")
}

fn ok(output: Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "hangar failed: {:?}\n{stderr}", output.status);
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn listed(hangar: &Hangar) -> Vec<String> {
    let list = hangar.get("/api/mcp_servers");
    let servers = list.body["mcp_servers"].as_array().cloned().unwrap_or_default();
    servers.iter().filter_map(|s| s["mcp_server_id"].as_str().map(str::to_owned)).collect()
}

#[test]
fn no_web_page_can_drive_or_read_the_hangar() {
    let hangar = Hangar::start(CONFIG);
    let addr = hangar.base.trim_start_matches("http://").to_owned();
    let port: u16 = addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).unwrap();
    assert_eq!(hangar.post("/api/mcp_servers/math/start", None).status, 200, "the harness's bodiless POST");
    let pid = read_pid(&hangar.path("math.pid"));

    // A second API instance that wants keys, on the same supervisor.
    let keys = hangar.path("keys");
    std::fs::write(&keys, format!("{KEY_HASH}\n")).unwrap();
    let keyed = hangar.extra_api(&[
        OsStr::new("--api-keys"),
        keys.as_os_str(),
        OsStr::new("--allow-origin"),
        OsStr::new("https://tools.example"),
    ]);
    let keyed_addr = keyed.addr.clone();
    let keyed_port: u16 = keyed_addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok()).unwrap();
    let keyed_url = format!("http://{keyed_addr}");
    ok(cli(&keyed_url, Some(KEY), &["status"]));

    // A legacy session, for the session-bound GET and DELETE.
    let init = hangar.post_raw(
        "/mcp",
        &[("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")],
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
            "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        .to_string()
        .as_bytes(),
    );
    let session = init.header("mcp-session-id").expect("a legacy session").to_owned();

    // The reload must not happen: the config on disk gains a server first.
    let config = hangar.path("hangar.yaml");
    let yaml = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("{yaml}  added:\n    command: [\"{}\", \"--tools\", \"add\"]\n", bin("hangar-upstream-fake").display()),
    )
    .unwrap();

    let stop_over_mcp = Route {
        method: "POST",
        path: "/mcp",
        headers: vec![
            ("Accept", "application/json, text/event-stream".into()),
            ("MCP-Protocol-Version", MODERN.into()),
            ("Mcp-Method", "tools/call".into()),
            ("Mcp-Name", "hangar_stop".into()),
        ],
        body: json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "hangar_stop",
            "arguments": {"mcp_server": "math"}, "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {}}}})
        .to_string(),
    };
    let with_session =
        |method, path| Route { headers: vec![("Mcp-Session-Id", session.clone())], ..Route::new(method, path) };
    let state_changing = [
        Route::new("POST", "/api/mcp_servers/idle/start"),
        Route::new("POST", "/api/mcp_servers/math/stop"),
        Route::new("POST", "/api/config/reload"),
        stop_over_mcp,
        with_session("DELETE", "/mcp"),
    ];
    let reads = [
        Route::new("GET", "/api/mcp_servers"),
        Route::new("GET", "/api/mcp_servers/math"),
        Route::new("GET", "/api/mcp_servers/math/tools"),
        Route::new("GET", "/api/mcp_servers/math/logs?lines=100"),
        Route::new("GET", "/metrics"),
        with_session("GET", "/mcp"),
        Route::new("GET", "/api/no/such/route"),
        Route::new("GET", "/api/mcp_servers/math/stop"),
    ];
    for (addr, port, key) in [(addr.as_str(), port, None), (keyed_addr.as_str(), keyed_port, Some(KEY))] {
        for route in state_changing.iter().chain(&reads) {
            // Only a POST can be sent cross-site without a preflight (a DELETE never is).
            for hostile in variants(port, route.method == "POST") {
                assert_refused(addr, route, &hostile, key);
            }
        }
    }

    // Nothing changed.
    let math = hangar.details("math");
    assert_eq!((math["state"].clone(), math["meta"]["pid"].clone()), (json!("ready"), json!(pid)), "{math}");
    assert!(alive(pid), "the same upstream process still runs");
    assert_eq!(hangar.details("idle")["state"], "cold");
    assert_eq!(listed(&hangar), ["math", "idle"], "the config was not reloaded");

    // The legitimate forms still work. The CLI, with and without a key:
    assert_eq!(ok(cli(&hangar.base, None, &["stop", "math"])).trim(), "math: stopped (user_request)");
    assert!(ok(cli(&hangar.base, None, &["start", "math"])).starts_with("math: ready"));
    assert_ne!(read_pid(&hangar.path("math.pid")), pid, "a new process");
    assert!(ok(cli(&keyed_url, Some(KEY), &["start", "idle"])).starts_with("idle: ready"));
    ok(cli(&hangar.base, None, &["reload"]));
    assert!(listed(&hangar).contains(&"added".to_owned()), "reloaded now");
    // A curl line: Content-Type json, no body, the listener's own Host.
    let curl =
        format!("POST /api/mcp_servers/idle/stop HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n");
    assert_eq!(raw_http(&addr, &curl, b"").unwrap().0, 200);
    assert_eq!(hangar.details("idle")["state"], "cold");
    // A local tool's page (MCP Inspector on localhost) and the hangar's own origin.
    let inspector =
        format!("GET /api/mcp_servers HTTP/1.1\r\nHost: localhost:{port}\r\nOrigin: http://localhost:6274\r\n");
    assert_eq!(raw_http(&addr, &inspector, b"").unwrap().0, 200);
    let own = format!("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\n");
    assert_eq!(raw_http(&addr, &own, b"").unwrap().0, 200);
    assert_eq!(hangar.mcp("tools/list", json!({})).status, 200);
    // An origin the operator allowed (`--allow-origin`), on the instance that was told so.
    let allowed = format!(
        "POST /api/mcp_servers/idle/stop HTTP/1.1\r\nHost: {keyed_addr}\r\nOrigin: https://tools.example\r\n\
         Content-Type: application/json\r\nX-API-Key: {KEY}\r\n"
    );
    assert_eq!(raw_http(&keyed_addr, &allowed, b"").unwrap().0, 200);
    let (status, _) = raw_http(&addr, &allowed.replace(&keyed_addr, &addr), b"").unwrap();
    assert_eq!(status, 403, "only where it was allowed");
    // The health probes stay open to any Host.
    for path in ["/health/live", "/health/ready"] {
        let probe = format!("GET {path} HTTP/1.1\r\nHost: evil.example:{port}\r\nOrigin: https://evil.example\r\n");
        assert_eq!(raw_http(&addr, &probe, b"").unwrap().0, 200, "{path}");
    }
}
