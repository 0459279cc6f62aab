//! Legacy sessions' bounds are config (`tool_access.sessions`), and an expired session is swept
//! as it expires: the upstream listen that held its resource subscription ends with it, not at
//! some later session's change.

use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, poll};

use crate::legacy_sessions::{addr, initialize, legacy};

/// The conformance fake (a 2026-07-28 upstream: a legacy subscription becomes its
/// `subscriptions/listen`) behind the front door, and sessions that live 2 s idle.
const SHORT_LIVED: &str = r#"
tool_access:
  mode: front_door
  names: always_qualified
  sessions: {idle_ttl_s: 2, max_sessions: 100}
mcp_servers:
  fixtures:
    command: ["{fake}", "--conformance"]
    expose_as: conf
"#;

/// How many of the fake's open listens hold the watched resource (its `touch_resource` says),
/// asked by a stateless 2026-07-28 call, which uses no session.
fn listens_told(hangar: &Hangar) -> String {
    let touched = hangar
        .mcp("tools/call", json!({"name": "conf__touch_resource", "arguments": {"uri": "test://watched-resource"}}));
    let text = touched.body.pointer("/result/content/0/text").and_then(Value::as_str);
    text.unwrap_or_else(|| panic!("touch_resource answered: {}", touched.text)).to_owned()
}

#[test]
fn an_idle_session_expires_at_its_configured_ttl_and_its_upstream_listen_ends_with_it() {
    let hangar = Hangar::start(SHORT_LIVED);
    let here = addr(&hangar);
    let session = initialize(&here);
    let (status, text) =
        legacy(&here, Some(&session), 2, "resources/subscribe", json!({"uri": "conf__test://watched-resource"}));
    assert_eq!(status, 200, "{text}");
    poll("the upstream listen to hold the subscription", Duration::from_secs(10), || {
        (listens_told(&hangar) == "1 listen(s) told").then_some(())
    });
    // Nothing uses the session from here on: once it has been idle 2 s, the sweep forgets it
    // and cancels the listen (no session request comes to trigger it).
    poll("the expired session's upstream listen to end", Duration::from_secs(20), || {
        (listens_told(&hangar) == "0 listen(s) told").then_some(())
    });
    let (status, text) = legacy(&here, Some(&session), 3, "ping", json!({}));
    assert_eq!(status, 404, "the session expired: {text}");
}
