//! Where OAuth meets the hangar's other boundaries (issue 29, sections 5 and 6, and four traps
//! of section 9), against the real authorization server of `oauth.rs` (`oidc-provider`,
//! tests/fixtures/idp.mjs), from where an attacker stands:
//! - a key the IdP stops publishing stops being trusted within `auth.oauth.jwks_refresh_s`
//!   (or the key set's shorter `Cache-Control: max-age`, never under 10 s), for tokens already
//!   checked and new ones alike;
//! - a token whose `sub` is a key's name (`alice`) or the hangar's (`hangar`) is `oauth:alice`
//!   or `oauth:hangar`: it reads none of key alice's tasks, sessions or audit entries, and is
//!   never the hangar; a key may not be named `oauth:...`; a caller whose view lost a server
//!   no longer reads its tasks there, and a key a reload removed holds no session stream;
//! - a `groups` claim given as one string is one group;
//! - introspection: what cannot be an opaque token never reaches the IdP, the line behind the
//!   in-flight introspections is bounded (503 with `Retry-After`), and time claims given as
//!   strings are refused;
//! - the bare RFC 9728 metadata names the origin, the `/mcp` one the MCP resource;
//! - lists filtered per identity are `cacheScope: "private"`.

use std::ffi::OsStr;
use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, free_port, key_hash, legacy_post, poll, supervisor_exit};

use super::oauth::{Idp, agent, get_with};

const ALICE_KEY: &str = "alice-key-0123456789";
const OPS_KEY: &str = "ops-key-0123456789";
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// Keys `alice` (profile dev) and `ops` (sees all), tokens from `issuer` (developers: dev,
/// mcp-admins: admin, anyone else: dev), keys fetched again every 2 s, and `extra` under
/// `auth.oauth`.
fn config(issuer: &str, extra: &str) -> String {
    format!(
        r#"
tool_access: {{mode: front_door}}
auth:
  api_keys:
    - {{name: alice, hash: "{alice}", profile: dev}}
    - {{name: ops, hash: "{ops}"}}
  oauth:
    issuer: {issuer}
    scopes_supported: [mcp]
    required_scopes: [mcp]
    jwks_refresh_s: 2
    profiles: {{mcp-admins: admin, developers: dev}}
    default_profile: dev
{extra}profiles:
  dev: {{servers: [slow]}}
  admin: {{servers: ["*"], admin: true}}
mcp_servers:
  slow:
    command: ["{{fake}}", "--tools", "sleep,echo"]
"#,
        alice = key_hash(ALICE_KEY),
        ops = key_hash(OPS_KEY),
    )
}

/// A 2026-07-28 request with `bearer` (a key or a token); `takes_tasks` declares the extension.
fn mcp(hangar: &Hangar, bearer: &str, method: &str, mut params: Value, takes_tasks: bool) -> (u16, Value) {
    let capabilities = if takes_tasks { json!({"extensions": {TASKS: {}}}) } else { json!({}) };
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let name = params.get("name").or_else(|| params.get("taskId")).or_else(|| params.get("uri"));
    let name = name.and_then(Value::as_str).map(str::to_owned);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut request = agent()
        .post(&format!("{}/mcp", hangar.base))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", method)
        .header("Authorization", format!("Bearer {bearer}"));
    if let Some(name) = &name {
        request = request.header("Mcp-Name", name.as_str());
    }
    let mut response = request.send(body.to_string().as_bytes()).unwrap();
    (response.status().as_u16(), response.body_mut().read_json().unwrap_or(Value::Null))
}

/// A slow call by `bearer` that becomes a task: its id.
fn slow_task(hangar: &Hangar, bearer: &str) -> String {
    let (status, created) =
        mcp(hangar, bearer, "tools/call", json!({"name": "sleep", "arguments": {"ms": 1200}}), true);
    assert_eq!(status, 200, "{created}");
    created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {created}")).to_owned()
}

/// `tasks/get` of `task` by `bearer`: the result, or the JSON-RPC error.
fn task_get(hangar: &Hangar, bearer: &str, task: &str) -> Result<Value, Value> {
    let (status, body) = mcp(hangar, bearer, "tasks/get", json!({"taskId": task}), true);
    assert_eq!(status, 200, "{body}");
    body.get("result").cloned().ok_or_else(|| body["error"].clone())
}

/// A legacy (2025-11-25) POST to `/mcp` with `bearer`, in `session` when given: the status and
/// the whole answer.
fn legacy(hangar: &Hangar, bearer: &str, session: Option<&str>, method: &str, params: Value) -> (u16, String) {
    legacy_post(hangar.base.trim_start_matches("http://"), Some(bearer), session, 1, method, params)
}

/// The audit entries `bearer` reads.
fn audit(hangar: &Hangar, bearer: &str, query: &str) -> Vec<Value> {
    let (status, _, body) = get_with(hangar, &format!("/api/audit?limit=500{query}"), Some(bearer));
    assert_eq!(status, 200, "{body}");
    body["entries"].as_array().cloned().unwrap_or_default()
}

fn identities(entries: &[Value]) -> Vec<String> {
    let mut seen: Vec<String> = entries.iter().filter_map(|e| e["identity"].as_str().map(str::to_owned)).collect();
    seen.sort();
    seen.dedup();
    seen
}

#[test]
fn a_key_removed_at_the_idp_stops_being_trusted_within_jwks_refresh_s() {
    let idp = Idp::start(free_port());
    let hangar = Hangar::start(&config(&idp.url, ""));
    let resource = format!("{}/mcp", hangar.base);
    // The IdP publishes a second key; a token it signs is accepted once the hangar has it.
    let second = post(&format!("{}/_add_key", idp.url));
    let mint = |key: &str| idp.mint(&format!("aud={resource}&key={key}"));
    let old = mint(&second);
    poll("a token signed by the second key to be accepted", Duration::from_secs(30), || {
        (get_with(&hangar, "/api/mcp_servers", Some(&old)).0 == 200).then_some(())
    });
    // Checked once, it is cached: another call uses it as it is.
    assert_eq!(get_with(&hangar, "/api/mcp_servers", Some(&old)).0, 200);

    // The IdP stops publishing it. Within jwks_refresh_s (2 s; the poll allows five times
    // that), the cached token and a new one it signs are both refused.
    post(&format!("{}/_remove_key?kid={second}", idp.url));
    let new = mint(&second);
    let refused = poll("tokens signed by the removed key to be refused", Duration::from_secs(10), || {
        let (old_status, _, body) = get_with(&hangar, "/api/mcp_servers", Some(&old));
        let (new_status, _, _) = get_with(&hangar, "/api/mcp_servers", Some(&new));
        (old_status == 401 && new_status == 401).then_some(body)
    });
    assert!(refused["error"]["message"].as_str().unwrap().contains("key the issuer publishes"), "{refused}");
    // The key still published keeps working, and nothing hammered the IdP meanwhile.
    let kept = mint("published");
    assert_eq!(get_with(&hangar, "/api/mcp_servers", Some(&kept)).0, 200);

    // A jwks_refresh_s that is not a second to a day: exit 78, naming the key.
    for bad in ["0", "-1", "100000", "soon"] {
        let stderr =
            refused_config(&format!("auth: {{oauth: {{issuer: 'https://idp.example.com', jwks_refresh_s: {bad}}}}}\n"));
        assert!(stderr.contains("auth.oauth.jwks_refresh_s"), "{bad}: {stderr}");
    }
}

/// The supervisor's stderr on `yaml`, which it must refuse with exit 78.
fn refused_config(yaml: &str) -> String {
    let temp = tempfile::tempdir().unwrap();
    let config_path = temp.path().join("hangar.yaml");
    std::fs::write(&config_path, yaml).unwrap();
    let socket = temp.path().join("s.sock");
    let (code, stderr) = supervisor_exit(
        &[OsStr::new("--config"), config_path.as_os_str(), OsStr::new("--socket"), socket.as_os_str()],
        &[],
    );
    assert_eq!(code, Some(78), "{yaml}: {stderr}");
    stderr
}

#[test]
fn the_key_set_s_max_age_brings_the_next_fetch_closer_but_never_under_ten_seconds() {
    let idp = Idp::start(free_port());
    // Keys fetched every 300 s by config; the IdP says its key set is fresh for 1 s only.
    post(&format!("{}/_jwks_cache_control?value=public,%20max-age=1", idp.url));
    let second = post(&format!("{}/_add_key", idp.url));
    let hangar = Hangar::start(&config(&idp.url, "").replace("jwks_refresh_s: 2", "jwks_refresh_s: 300"));
    let resource = format!("{}/mcp", hangar.base);
    let token = idp.mint(&format!("aud={resource}&key={second}"));
    poll("a token signed by the second key to be accepted", Duration::from_secs(30), || {
        (get_with(&hangar, "/api/mcp_servers", Some(&token)).0 == 200).then_some(())
    });
    let fetched = idp.jwks_fetches();
    post(&format!("{}/_remove_key?kid={second}", idp.url));
    // Refused within the 10 s floor (the poll allows 25 s), long before the configured 300 s.
    poll("the removed key's token to be refused", Duration::from_secs(25), || {
        (get_with(&hangar, "/api/mcp_servers", Some(&token)).0 == 401).then_some(())
    });
    // A max-age of 1 s did not make the hangar fetch every second: the floor held.
    let extra = idp.jwks_fetches() - fetched;
    assert!(extra <= 3, "{extra} fetches of the key set while waiting for one refresh");
}

fn post(url: &str) -> String {
    let response = agent().post(url).send_empty().unwrap();
    assert_eq!(response.status().as_u16(), 200);
    response.into_body().read_to_string().unwrap()
}

#[test]
fn a_token_named_like_a_key_or_the_hangar_is_neither() {
    let idp = Idp::start(free_port());
    let hangar = Hangar::start(&config(&idp.url, ""));
    let resource = format!("{}/mcp", hangar.base);
    let alice_token = idp.token("alice", "mcp", &resource);
    let hangar_token = idp.token("hangar", "mcp", &resource);

    // Key alice's task: the token whose `sub` is alice does not see it.
    let task = slow_task(&hangar, ALICE_KEY);
    poll("alice's task to complete", Duration::from_secs(20), || {
        task_get(&hangar, ALICE_KEY, &task).ok().filter(|t| t["status"] == "completed")
    });
    let stranger = task_get(&hangar, &alice_token, &task);
    assert_eq!(stranger.as_ref().err().and_then(|e| e["code"].as_i64()), Some(-32602), "{stranger:?}");

    // Key alice's legacy session: unknown to the token.
    let session = open_session(&hangar, ALICE_KEY);
    assert_eq!(legacy(&hangar, ALICE_KEY, Some(&session), "tools/list", json!({})).0, 200);
    let (status, text) = legacy(&hangar, &alice_token, Some(&session), "tools/list", json!({}));
    assert_eq!(status, 404, "the token used key alice's session: {text}");

    // Key alice's audit entries: not the token's to read; its own are `oauth:alice`'s.
    let (status, called) =
        mcp(&hangar, &alice_token, "tools/call", json!({"name": "echo", "arguments": {"text": "t"}}), false);
    assert_eq!(status, 200, "{called}");
    let seen = audit(&hangar, &alice_token, "");
    assert_eq!(identities(&seen), ["oauth:alice"], "{seen:?}");
    assert!(audit(&hangar, &alice_token, "&identity=alice").is_empty());
    assert_eq!(identities(&audit(&hangar, ALICE_KEY, "")), ["alice"]);

    // `sub: hangar` is `oauth:hangar`: recorded as such, never as the hangar.
    let (status, called) =
        mcp(&hangar, &hangar_token, "tools/call", json!({"name": "echo", "arguments": {"text": "h"}}), false);
    assert_eq!(status, 200, "{called}");
    let all = audit(&hangar, OPS_KEY, "");
    let by_hangar = audit(&hangar, OPS_KEY, "&identity=hangar");
    assert!(by_hangar.is_empty(), "a token's call recorded as the hangar's: {by_hangar:?}");
    assert_eq!(identities(&all), ["alice", "oauth:alice", "oauth:hangar"], "{all:?}");
    assert!(hangar.log().contains("oauth:hangar"), "the access log names oauth:hangar: {}", hangar.log());

    // A `groups` claim given as one string is one group: "former mcp-admins" is not mcp-admins.
    let former = idp.token("former-bot", "mcp", &resource);
    let (status, _, body) = get_with(&hangar, "/api/mcp_servers/slow/logs", Some(&former));
    assert_eq!(status, 403, "\"former mcp-admins\" was taken for mcp-admins: {body}");
    let admin = idp.token("admin-bot", "mcp", &resource);
    assert_eq!(get_with(&hangar, "/api/mcp_servers/slow/logs", Some(&admin)).0, 200);

    // A key may not be named `oauth:...`, nor `hangar`: exit 78, naming the key.
    for (name, why) in [("oauth:alice", "oauth:"), ("hangar", "reserved")] {
        let stderr = refused_config(&format!("auth: {{api_keys: [{{name: '{name}', hash: '{}'}}]}}\n", key_hash("k")));
        assert!(stderr.contains("auth.api_keys[0].name") && stderr.contains(why), "{name}: {stderr}");
    }
}

#[test]
fn a_caller_whose_view_lost_a_server_no_longer_reads_its_tasks_or_calls_there() {
    let yaml = config("https://idp.example.com", "");
    let hangar = Hangar::start(&yaml);
    let task = slow_task(&hangar, ALICE_KEY);
    poll("alice's task to complete", Duration::from_secs(20), || {
        task_get(&hangar, ALICE_KEY, &task).ok().filter(|t| t["status"] == "completed")
    });
    assert!(!audit(&hangar, ALICE_KEY, "").is_empty());
    // Her profile no longer sees `slow`.
    reload(&hangar, &yaml.replace("dev: {servers: [slow]}", "dev: {servers: [elsewhere]}"));
    let gone = task_get(&hangar, ALICE_KEY, &task);
    assert_eq!(gone.as_ref().err().and_then(|e| e["code"].as_i64()), Some(-32602), "{gone:?}");
    assert!(audit(&hangar, ALICE_KEY, "").is_empty(), "her calls to a server she no longer sees");
}

#[test]
fn a_key_a_reload_removed_holds_no_session_stream() {
    let yaml = config("https://idp.example.com", "");
    let hangar = Hangar::start(&yaml);
    let session = open_session(&hangar, ALICE_KEY);
    let addr = hangar.base.trim_start_matches("http://").to_owned();
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let head = format!(
        "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {session}\r\n\
         Authorization: Bearer {ALICE_KEY}\r\n\r\n"
    );
    std::io::Write::write_all(&mut stream, head.as_bytes()).unwrap();
    let (mut seen, mut ended) = (String::new(), false);
    let mut read = |seen: &mut String, ended: &mut bool| {
        let mut chunk = [0u8; 4096];
        match std::io::Read::read(&mut stream, &mut chunk) {
            Ok(0) => *ended = true,
            Ok(n) => seen.push_str(&String::from_utf8_lossy(&chunk[..n])),
            Err(_) => {}
        }
    };
    poll("the session's stream to open", Duration::from_secs(10), || {
        read(&mut seen, &mut ended);
        seen.contains("200 OK").then_some(())
    });
    // A reload removes key alice: her session ends, and the stream it held with it.
    let without_alice: String =
        yaml.lines().filter(|line| !line.contains("name: alice")).map(|line| format!("{line}\n")).collect();
    reload(&hangar, &without_alice);
    poll("the removed key's session stream to end", Duration::from_secs(10), || {
        read(&mut seen, &mut ended);
        (ended || seen.contains("\r\n0\r\n\r\n")).then_some(())
    });
}

/// A legacy session opened with `bearer`: its id.
fn open_session(hangar: &Hangar, bearer: &str) -> String {
    let init =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}});
    let (status, text) = legacy(hangar, bearer, None, "initialize", init);
    assert_eq!(status, 200, "{text}");
    let line = text.lines().find(|l| l.to_ascii_lowercase().starts_with("mcp-session-id:")).expect("a session id");
    line.split_once(':').unwrap().1.trim().to_owned()
}

/// Writes `yaml` as the hangar's config and reloads it as `ops`.
fn reload(hangar: &Hangar, yaml: &str) {
    let yaml = yaml.replace("{fake}", &hangar_tests::bin("hangar-upstream-fake").display().to_string());
    std::fs::write(hangar.path("hangar.yaml"), yaml).unwrap();
    let reloaded = agent()
        .post(&format!("{}/api/config/reload", hangar.base))
        .header("Content-Type", "application/json")
        .header("X-API-Key", OPS_KEY)
        .send_empty()
        .unwrap();
    assert_eq!(reloaded.status().as_u16(), 200);
}

#[test]
fn introspection_asks_only_about_what_can_be_a_token_and_keeps_a_bounded_line() {
    let idp = Idp::start(free_port());
    let secrets = tempfile::tempdir().unwrap();
    let secret_file = secrets.path().join("introspection-secret");
    std::fs::write(&secret_file, "hangar-secret\n").unwrap();
    let introspection = format!(
        "    introspection:\n      endpoint: {}/token/introspection\n      client_id: hangar\n      client_secret_file: {}\n",
        idp.url,
        secret_file.display()
    );
    let hangar = Hangar::start(&config(&idp.url, &introspection));
    let resource = format!("{}/mcp", hangar.base);
    let asked = || idp.introspections();
    let status = |token: &str| get_with(&hangar, "/api/mcp_servers", Some(token)).0;

    // A valid opaque token: asked about once, then cached.
    let valid = idp.token("opaque-bot", "mcp", &resource);
    assert_eq!(status(&valid), 200);
    let before = asked();

    // Shaped as a JWS but not one, or no b64token at all: refused, the IdP never asked.
    let long = "x".repeat(5000);
    for junk in ["a.b.c", "eyJhbGciOiJub25lIn0.e30.", "eyJhbGciOiJSUzI1NiJ9x.e30.c2ln", long.as_str()] {
        assert_eq!(status(junk), 401, "{junk}");
    }
    assert_eq!(asked(), before, "a token that cannot be opaque reached the IdP");
    // The same junk again and again: asked about once.
    for _ in 0..5 {
        assert_eq!(status("junk-opaque-token"), 401);
    }
    assert_eq!(asked(), before + 1);

    // Time claims as strings are refused: in an introspection answer, and in a JWT.
    let stringy = idp.token("stringy-bot", "mcp", &resource);
    let (code, _, body) = get_with(&hangar, "/api/mcp_servers", Some(&stringy));
    assert_eq!(code, 401, "an answer whose nbf is a string was accepted: {body}");
    let far = 4_000_000_000u64;
    for claim in ["nbf", "iat", "exp"] {
        let claims = format!("{{\"{claim}\":\"{far}\"}}");
        let minted = idp.mint(&format!("aud={resource}&claims={}", urlencode(&claims)));
        assert_eq!(status(&minted), 401, "a JWT whose {claim} is a string was accepted");
    }

    // The same new token many times at once: asked about once.
    post(&format!("{}/_slow?ms=500", idp.url));
    let before = asked();
    let same = at_once(&hangar.base, vec!["the-same-made-up-token".to_owned(); 20]);
    assert!(same.iter().all(|(code, _)| *code == 401), "{same:?}");
    assert_eq!(asked() - before, 1, "the same token was asked about more than once");

    // A flood of made-up opaque tokens while the IdP is slow: no line builds up behind the 16
    // in flight; the excess is refused at once with 503 and Retry-After, and the token accepted
    // before is answered from the cache meanwhile.
    post(&format!("{}/_slow?ms=1500", idp.url));
    let before = asked();
    let made_up = (0..100).map(|n| format!("flood-{n}-made-up")).collect();
    let base = hangar.base.clone();
    let flood = std::thread::spawn(move || at_once(&base, made_up));
    assert_eq!(status(&valid), 200, "a token accepted before waited behind the flood");
    let answers = flood.join().unwrap();
    let busy = answers.iter().filter(|(code, retry)| *code == 503 && *retry).count();
    assert!(answers.iter().all(|(code, _)| [401, 503].contains(code)), "{answers:?}");
    assert!(busy > 0, "no made-up token was turned away: every one waited in line ({answers:?})");
    let reached = asked() - before;
    assert!(reached <= 16 + 32, "{reached} introspections for 100 made-up tokens");
    post(&format!("{}/_slow?ms=0", idp.url));
    let fresh = idp.token("opaque-bot", "mcp", &resource);
    assert_eq!(status(&fresh), 200);
}

/// GET `/api/mcp_servers` on the hangar at `base` with each of `tokens`, all at once: each
/// answer's status and whether it carried `Retry-After`.
fn at_once(base: &str, tokens: Vec<String>) -> Vec<(u16, bool)> {
    let sent: Vec<_> = tokens
        .into_iter()
        .map(|token| {
            let url = format!("{base}/api/mcp_servers");
            std::thread::spawn(move || {
                let response = agent().get(&url).header("Authorization", format!("Bearer {token}")).call().unwrap();
                (response.status().as_u16(), response.headers().get("retry-after").is_some())
            })
        })
        .collect();
    sent.into_iter().map(|thread| thread.join().unwrap()).collect()
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

#[test]
fn the_bare_metadata_names_the_origin_and_per_caller_lists_are_private() {
    let hangar = Hangar::start(&config("https://idp.example.com", ""));
    let (status, _, bare) = get_with(&hangar, "/.well-known/oauth-protected-resource", None);
    assert_eq!(status, 200, "{bare}");
    assert_eq!(bare["resource"], hangar.base.as_str(), "the bare path names the origin: {bare}");
    let (_, _, suffixed) = get_with(&hangar, "/.well-known/oauth-protected-resource/mcp", None);
    assert_eq!(suffixed["resource"], format!("{}/mcp", hangar.base), "{suffixed}");

    for method in ["tools/list", "prompts/list", "resources/list", "resources/templates/list"] {
        let (status, body) = mcp(&hangar, ALICE_KEY, method, json!({}), false);
        assert_eq!(status, 200, "{method}: {body}");
        assert_eq!(body["result"]["cacheScope"], "private", "{method}: {body}");
    }
}
