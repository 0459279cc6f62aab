//! MCP Apps (SEP-1865, `io.modelcontextprotocol/ui`) through the front door: two real Python
//! `mcp` servers (their Apps extension, `tests/fixtures/py_app_server.py`) serve the same
//! `ui://dashboard/app.html`, each its own HTML. The TypeScript SDK 2.x client, declaring the
//! extension, lists each tool's `_meta.ui.resourceUri` rewritten to its own server's app
//! (`ui://north__dashboard/app.html`, `ui://south__dashboard/app.html`), reads each and gets that
//! server's HTML, and its declaration reaches the upstream; an app's own tool (`visibility:
//! app`) routes as any call. A profile that hides one server sees none of its apps: not in
//! `tools/list`, not in `resources/list`, and not by reading its URI. A legacy host's declaration
//! (at `initialize`) reaches the 2026-07-28 upstream with its calls too (the Python `mcp` client,
//! `tests/fixtures/py_apps_client.py`, in both of its modes).
//!
//! Needs `scripts/setup-tools` and `scripts/setup-clients` (the venv, Node, the 2.x SDK).

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, key_hash, python_json};

use crate::ts_sdk2::ts2_as;

const OPS: &str = "ops-apps-0123456789";
const NORTHERNER: &str = "north-apps-0123456789";

fn hangar() -> Hangar {
    let servers = r#"
  north:
    command: ["{python}", "{fixtures}/py_app_server.py", "north"]
    handshake_timeout_s: 30
  south:
    command: ["{python}", "{fixtures}/py_app_server.py", "south"]
    handshake_timeout_s: 30
"#;
    front_door_of(servers, OPS, (NORTHERNER, "north"))
}

/// A front door over `servers` (`mcp_servers:` entries, as YAML) where the key `ops` sees them
/// all and the key of `one` sees only its server (through a profile named for it).
pub(crate) fn front_door_of(servers: &str, ops: &str, one: (&str, &str)) -> Hangar {
    let (key, server) = one;
    Hangar::start(&format!(
        r#"
tool_access: {{mode: front_door}}
auth:
  api_keys:
    - {{name: ops, hash: "{}"}}
    - {{name: one, hash: "{}", profile: {server}}}
profiles:
  {server}: {{servers: [{server}]}}
mcp_servers:{servers}"#,
        key_hash(ops),
        key_hash(key),
    ))
}

#[test]
fn two_servers_apps_are_each_their_own_and_an_apps_tool_routes() {
    let hangar = hangar();
    let seen = ts2_as(&hangar, Some(OPS), &["apps", "north__show_dashboard", "south__refresh"]);
    let (north, south) = ("ui://north__dashboard/app.html", "ui://south__dashboard/app.html");
    assert_eq!(
        seen["apps"],
        json!({"north__show_dashboard": north, "north__refresh": north, "south__show_dashboard": south, "south__refresh": south}),
        "{seen}"
    );
    for (uri, server) in [(north, "north"), (south, "south")] {
        let html = &seen["html"][uri];
        assert_eq!(html["uri"], uri, "the contents name the app as it was asked for: {seen}");
        assert_eq!(html["mimeType"], "text/html;profile=mcp-app", "{seen}");
        assert!(html["text"].as_str().unwrap_or_default().contains(&format!("The dashboard of {server}.")), "{seen}");
    }
    // The client's declaration of the extension reached the (2026-07-28) upstream.
    assert_eq!(seen["calls"]["north__show_dashboard"], "dashboard of north (apps: True)", "{seen}");
    assert_eq!(seen["calls"]["south__refresh"], "refreshed south", "the app's own tool routes: {seen}");
}

#[test]
fn a_view_that_hides_a_server_sees_none_of_its_apps() {
    let hangar = hangar();
    let seen = ts2_as(&hangar, Some(NORTHERNER), &["apps", "show_dashboard"]);
    let listed = seen["apps"].as_object().cloned().unwrap_or_default();
    assert!(!listed.is_empty(), "{seen}");
    assert!(listed.values().all(|uri| uri == "ui://north__dashboard/app.html"), "{seen}");
    assert!(!seen.to_string().contains("south"), "nothing of south's: {seen}");
    assert_eq!(seen["calls"]["show_dashboard"], "dashboard of north (apps: True)", "{seen}");

    let as_northerner = |method: &str, params: Value| {
        hangar.mcp_with(method, params, json!({}), &[("Authorization", &format!("Bearer {NORTHERNER}"))]).body
    };
    let resources = as_northerner("resources/list", json!({}));
    let uris: Vec<&str> =
        resources["result"]["resources"].as_array().into_iter().flatten().filter_map(|r| r["uri"].as_str()).collect();
    assert_eq!(uris, ["ui://north__dashboard/app.html"], "{resources}");
    let read = as_northerner("resources/read", json!({"uri": "ui://south__dashboard/app.html"}));
    assert!(read["error"]["message"].as_str().unwrap_or_default().contains("Resource not found"), "{read}");
    assert!(!read.to_string().contains("The dashboard of south"), "{read}");
}

#[test]
fn a_hosts_declaration_reaches_the_upstream_in_both_eras() {
    let hangar = hangar();
    let url = format!("{}/mcp", hangar.base);
    let bearer = format!("bearer={OPS}");
    for mode in ["legacy", "auto"] {
        let seen = python_json(&hangar, "py_apps_client.py", &[&url, mode, &bearer, "call=north__show_dashboard"]);
        let called = &seen["calls"]["north__show_dashboard"];
        assert_eq!(
            called["text"], "dashboard of north (apps: True)",
            "{mode} ({}): {called}",
            seen["protocol_version"]
        );
        assert_eq!(seen["apps"]["north__show_dashboard"], "ui://north__dashboard/app.html", "{mode}");
    }
}
