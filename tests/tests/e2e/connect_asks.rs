//! A caller who has not connected an account to a `per: user` upstream is asked to, never
//! failed silently, in the way their client understands (issue 31 §2):
//! - `hangar_call` (the hangar's own words): an error carrying a connect URL of their own;
//! - a 2026-07-28 client that elicits by URL: `input_required` with one URL elicitation;
//! - a 2025-11-25 client that declared `elicitation.url` (the TypeScript SDK 1.x,
//!   `tests/fixtures/ts_connect_client.mjs`): -32042, then `notifications/elicitation/complete`
//!   once they have connected.
//!
//! Each person then connects through that URL (the browser of `upstream_connect.rs`, at the
//! upstream's real authorization server), and their retried call goes through with their own
//! token, as the upstream (a real SDK resource server) records it.

use std::io::BufReader;
use std::process::{Child, ChildStdout, Command, Stdio};

use hangar_tests::{Hangar, free_port, key_hash, node, repo_root};
use serde_json::{Value, json};

use crate::upstream_connect::{ALICE, BOB, Browser, PRE_REGISTERED, Upstream, whoami, whoami_result};

const CAROL: &str = "carol-key-0123456789abcdef";

/// The front door, alice, bob and carol as key callers, and the protected server as `prot`.
fn start(upstream: &Upstream) -> Hangar {
    let listen = format!("127.0.0.1:{}", free_port());
    let client = PRE_REGISTERED.replace("{secret}", &upstream.secret_path());
    let yaml = format!(
        "auth:\n  api_keys:\n    - {{name: alice, hash: \"{}\"}}\n    - {{name: bob, hash: \"{}\"}}\n    - {{name: carol, hash: \"{}\"}}\n\
         credentials: {{public_url: \"http://{listen}\"}}\n\
         tool_access: {{mode: front_door}}\n\
         mcp_servers:\n  prot:\n    mode: remote\n    endpoint: {}\n    auth:\n      oauth: {{per: user, grant: authorization_code, scopes: [read]{client}}}\n",
        key_hash(ALICE),
        key_hash(BOB),
        key_hash(CAROL),
        upstream.up.endpoint,
    );
    Hangar::start_with(&yaml, &["--listen", &listen])
}

/// The connect URL in `text`: under the hangar's public URL, for `prot`, minted for one flow.
fn connect_url_in(hangar: &Hangar, text: &str) -> String {
    let start = text.find("http://").unwrap_or_else(|| panic!("no URL in: {text}"));
    let url: String = text[start..].chars().take_while(|c| !c.is_whitespace() && *c != '"').collect();
    assert!(url.starts_with(&format!("{}/oauth/connect/prot?flow=", hangar.base)), "{url}");
    url
}

#[test]
fn a_caller_without_an_account_is_asked_in_the_way_their_client_understands() {
    let upstream = Upstream::start();
    let hangar = start(&upstream);

    // hangar_call: the hangar's error, with alice's own URL; she connects, and calls again.
    let refused = whoami_result(&hangar, ALICE);
    assert_eq!(
        (refused["success"].clone(), refused["error_type"].clone()),
        (json!(false), json!("upstream_unauthorized"))
    );
    let url = connect_url_in(&hangar, refused["error"].as_str().unwrap_or_default());
    assert_eq!(Browser::new().connect(&url, "alice-account", &hangar).status, 200);
    assert_eq!(whoami(&hangar, ALICE)["sub"], "alice-account");

    // A 2026-07-28 client that elicits by URL: input_required, one URL elicitation of bob's own.
    let call = || {
        let capabilities = json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {"url": {}}}});
        let answer = hangar.mcp_with(
            "tools/call",
            json!({"name": "whoami", "arguments": {}}),
            capabilities,
            &[("X-API-Key", BOB)],
        );
        assert_eq!(answer.status, 200, "{}", answer.text);
        answer.body["result"].clone()
    };
    let asked = call();
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let question = &asked["inputRequests"]["connect"];
    assert_eq!(question["method"], "elicitation/create", "{asked}");
    assert_eq!(question["params"]["mode"], "url", "{asked}");
    let url = connect_url_in(&hangar, question["params"]["url"].as_str().unwrap_or_default());
    assert_eq!(Browser::new().connect(&url, "bob-account", &hangar).status, 200);
    let answered = call();
    let text = answered["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("bob-account"), "bob's retry carried bob's token: {answered}");

    // A 2025-11-25 client: -32042, carol connects, and the client hears it is done.
    let (mut client, mut out) = ts_connect_client(&hangar, CAROL, "whoami");
    let asked = json_line(&mut client, &mut out);
    let url = connect_url_in(&hangar, asked["asked"]["url"].as_str().unwrap_or_default());
    assert!(asked["asked"]["elicitationId"].as_str().is_some_and(|id| !id.is_empty()), "{asked}");
    assert_eq!(Browser::new().connect(&url, "carol-account", &hangar).status, 200);
    let complete = json_line(&mut client, &mut out);
    assert_eq!(complete["complete"], asked["asked"]["elicitationId"], "{complete}");
    let result = json_line(&mut client, &mut out);
    let text = result["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("carol-account"), "{result}");

    // Each call reached the upstream with its own caller's token, and only those calls did.
    let subs: Vec<Value> = upstream.up.calls().iter().map(|call| call["sub"].clone()).collect();
    assert_eq!(subs, [json!("alice-account"), json!("bob-account"), json!("carol-account")]);
}

/// Runs `ts_connect_client.mjs` against the hangar's `/mcp` as the caller with `key`.
fn ts_connect_client(hangar: &Hangar, key: &str, tool: &str) -> (Child, BufReader<ChildStdout>) {
    let script = repo_root().join("tests/fixtures/ts_connect_client.mjs");
    let mut child = Command::new(node())
        .arg(script)
        .args([format!("{}/mcp", hangar.base).as_str(), key, tool])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run the TypeScript client");
    let out = BufReader::new(child.stdout.take().expect("its stdout"));
    (child, out)
}

/// The client's next line, as JSON (bounded, as `legacy_relay`'s clients are read).
fn json_line(child: &mut Child, out: &mut BufReader<ChildStdout>) -> Value {
    let line = crate::legacy_relay::next_line(child, out);
    serde_json::from_str(&line).unwrap_or_else(|err| panic!("{err}: {line}"))
}
