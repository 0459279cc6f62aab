//! Resource subscriptions at 2026-07-28 (issue 32 §3): the Python `mcp` client's
//! `subscriptions/listen` with `resourceSubscriptions` through the front door is honoured, and
//! the updates come on the listen, in both directions of era: from a 2026-07-28 upstream (the
//! conformance fake, held a listen of its own by the hangar) and from a legacy one
//! (server-everything, asked `resources/subscribe`). `server/discover` says
//! `resources.subscribe`, so a client's filter is not narrowed away.

use hangar_tests::{Hangar, node, python_json, server_everything};
use serde_json::json;

#[test]
fn a_listen_hears_a_2026_07_28_upstreams_resource_updates() {
    let hangar = Hangar::start(crate::stable_names::ONE_CONFORMANCE);
    let url = format!("{}/mcp", hangar.base);
    let touch = json!({"uri": "test://watched-resource"}).to_string();
    let args = [url.as_str(), "conf__test://watched-resource", "conf__touch_resource", touch.as_str()];
    let seen = python_json(&hangar, "py_listen_client.py", &args);
    assert_eq!(seen["protocol_version"], "2026-07-28", "{seen}");
    assert_eq!(seen["honored"], json!(["conf__test://watched-resource"]), "{seen}");
    assert_eq!(seen["updated"], json!(["conf__test://watched-resource"]), "named as the client wrote it: {seen}");
    let discovered = hangar.mcp("server/discover", json!({}));
    assert_eq!(discovered.body["result"]["capabilities"]["resources"]["subscribe"], true, "{}", discovered.text);
}

/// The Python client's listen on server-everything, isolated as `isolation` says: its updates
/// come on the listen.
fn a_listen_hears_server_everything(isolation: &str) {
    let hangar = Hangar::start(&format!(
        "tool_access: {{mode: front_door}}\nmcp_servers:\n  everything:\n    command: [\"{}\", \"{}\", \"stdio\"]\n    handshake_timeout_s: 30\n    isolation: {isolation}\n",
        node().display(),
        server_everything().display(),
    ));
    let url = format!("{}/mcp", hangar.base);
    let uri = "demo://resource/static/document/features.md";
    // Its updates run while toggled on: one toggle, then the updates come every few seconds.
    let args = [url.as_str(), uri, "toggle-subscriber-updates", "{}", "once"];
    let seen = python_json(&hangar, "py_listen_client.py", &args);
    assert_eq!(seen["honored"], json!([uri]), "{isolation}: {seen}");
    assert_eq!(seen["updated"], json!([uri]), "{isolation}: {seen}\n{}", hangar.log());
}

#[test]
fn a_listen_hears_a_legacy_upstreams_resource_updates() {
    a_listen_hears_server_everything("shared");
}

/// A 2026-07-28 client has no session: its calls and its listen's subscriptions are served by
/// its identity's instance alike, so the updates its call turned on reach its listen.
#[test]
fn a_listen_hears_its_own_instances_resource_updates() {
    a_listen_hears_server_everything("per_session");
}
