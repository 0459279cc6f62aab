//! A start that runs out of time names the bound it ran out of: `handshake_timeout_s` and its
//! configured value, on every surface, not the share of it one request of the handshake had.

use hangar_tests::Hangar;
use hangar_tests::serde_json::json;

#[test]
fn a_silent_upstream_fails_its_start_naming_handshake_timeout_s_and_its_value() {
    let hangar = Hangar::start(
        r#"
mcp_servers:
  mute:
    command: ["{fake}", "--hang"]
    handshake_timeout_s: 1.5
  silent:
    command: ["{fake}", "--hang"]
    handshake_timeout_s: 1.5
"#,
    );
    let says_why = |message: &str| {
        message.contains("within handshake_timeout_s (1.5 s)")
            && !message.contains("750ms")
            && !message.contains("0.75")
    };

    let rest = hangar.post("/api/mcp_servers/mute/start", Some(&json!({})));
    assert_eq!(rest.body["error"]["code"], "StartFailed", "{}", rest.text);
    let message = rest.body["error"]["message"].as_str().unwrap();
    assert!(says_why(message), "REST: {message}");
    assert_eq!(rest.body["error"]["details"]["dead"]["reason"], "start_failed", "{}", rest.text);

    // A second server, so the first one's start backoff does not answer instead.
    let mcp = hangar.tool("hangar_start", json!({"mcp_server": "silent"}));
    assert_eq!(mcp["isError"], true, "{mcp}");
    let text = mcp["content"][0]["text"].as_str().unwrap();
    assert!(says_why(text), "MCP: {text}");

    let details = hangar.details("mute");
    assert_eq!(details["state"], "dead");
    assert_eq!(details["dead"]["reason"], "start_failed");
}
