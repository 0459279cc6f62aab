//! MCP Apps through the front door with the MCP Apps SDK's own example servers
//! (`@modelcontextprotocol/server-basic-vanillajs` and `-preact`, from npm, on stdio): both
//! declare `get-time` with `_meta.ui.resourceUri` `ui://get-time/mcp-app.html`, and each serves
//! its own HTML there. A host (the Python `mcp` client, declaring the extension), at both wires:
//! - hears the hangar declare `io.modelcontextprotocol/ui`;
//! - sees each tool name its own server's app (`ui://vanilla__get-time/mcp-app.html`,
//!   `ui://preact__get-time/mcp-app.html`), listed as resources too, and reads each: byte for
//!   byte the HTML its package ships;
//! - calls a tool by its front-door name; an app's own call, which names the tool as the app's
//!   HTML does (`get-time`), is refused while two servers declare that name, with the names
//!   that do route (`docs/clients.md` says why), and routes where the caller's view holds one.
//!
//! A profile that sees only `vanilla` (its `get-time` is unique there, so bare) sees nothing of
//! `preact`'s: no tool, no resource, and its app cannot be read.
//!
//! Needs `scripts/setup-tools` and `scripts/setup-clients` (the venv, Node, .tools/ext-apps).

use hangar_tests::serde_json::{self, Value, json};
use hangar_tests::{Hangar, ext_apps_server, node, python_json};

use crate::mcp_apps::front_door_of;

const OPS: &str = "ops-examples-0123456789";
const TIMEKEEPER: &str = "vanilla-examples-0123456789";
const SERVERS: [(&str, &str); 2] = [("vanilla", "server-basic-vanillajs"), ("preact", "server-basic-preact")];
/// The client's modes, and the revision each talks at (`auto` discovers the hangar first).
const WIRES: [(&str, &str); 2] = [("legacy", "2025-11-25"), ("auto", "2026-07-28")];

fn hangar() -> Hangar {
    let servers: String = SERVERS
        .iter()
        .map(|(id, package)| {
            let entry = ext_apps_server(package).join("dist/index.js");
            format!(
                "\n  {id}:\n    command: [\"{}\", \"{}\", \"--stdio\"]\n    handshake_timeout_s: 60",
                node().display(),
                entry.display()
            )
        })
        .collect();
    front_door_of(&servers, OPS, (TIMEKEEPER, "vanilla"))
}

/// The HTML `package` ships as its app.
fn shipped_html(package: &str) -> String {
    let path = ext_apps_server(package).join("dist/mcp-app.html");
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("read {}: {err}", path.display()))
}

/// Runs `py_apps_client.py` at `wire` with the key `bearer` and `steps`.
fn host(hangar: &Hangar, wire: &str, bearer: &str, steps: &[&str]) -> Value {
    let url = format!("{}/mcp", hangar.base);
    let bearer = format!("bearer={bearer}");
    let args: Vec<&str> = [url.as_str(), wire, bearer.as_str()].into_iter().chain(steps.iter().copied()).collect();
    python_json(hangar, "py_apps_client.py", &args)
}

/// The text of `value` (a JSON string), for messages.
fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

#[test]
fn each_example_servers_app_is_its_own_and_reads_as_shipped_at_both_wires() {
    let hangar = hangar();
    for (wire, revision) in WIRES {
        let seen = host(&hangar, wire, OPS, &["call=vanilla__get-time", "call=get-time"]);
        assert_eq!(seen["protocol_version"], revision, "{wire}");
        let brief =
            || json!({"wire": wire, "apps": seen["apps"], "calls": seen["calls"], "resources": seen["resources"]});
        let declared = &seen["extensions"]["io.modelcontextprotocol/ui"];
        assert!(declared.is_object(), "the hangar declares the extension at {wire}: {}", seen["extensions"]);
        let apps: Vec<(String, String)> = SERVERS
            .iter()
            .map(|(id, _)| (format!("{id}__get-time"), format!("ui://{id}__get-time/mcp-app.html")))
            .collect();
        let expected: serde_json::Map<String, Value> =
            apps.iter().map(|(tool, uri)| (tool.clone(), json!(uri))).collect();
        assert_eq!(seen["apps"], Value::Object(expected), "{}", brief());
        for ((_, uri), (id, package)) in apps.iter().zip(SERVERS) {
            assert!(seen["resources"].as_array().is_some_and(|r| r.contains(&json!(uri))), "{}", brief());
            let html = &seen["html"][uri];
            assert_eq!(html["uri"], json!(uri), "the contents name the app as it was asked for at {wire}");
            assert_eq!(html["mimeType"], "text/html;profile=mcp-app", "{id} at {wire}");
            assert!(text(&html["text"]) == shipped_html(package), "{uri} at {wire} is not {package}'s own HTML");
        }
        assert!(!seen["resources"].to_string().contains("ui://get-time/"), "no app is bare: {}", brief());
        let time = text(&seen["calls"]["vanilla__get-time"]["text"]);
        assert!(time.starts_with("20") && time.ends_with('Z'), "an ISO time from vanilla: {}", brief());
        // The app's own name is two servers' here: refused, naming what routes, never guessed.
        let refused = text(&seen["calls"]["get-time"]["error"]);
        assert!(refused.contains("vanilla__get-time") && refused.contains("preact__get-time"), "{}", brief());
    }
}

#[test]
fn a_view_of_one_example_server_routes_its_apps_own_calls_and_shows_nothing_of_the_other() {
    let hangar = hangar();
    let preact_app = "ui://preact__get-time/mcp-app.html";
    for (wire, _) in WIRES {
        let read_preact = format!("read={preact_app}");
        let seen = host(&hangar, wire, TIMEKEEPER, &["call=get-time", &read_preact]);
        // The app keeps its URI whatever the view (the tool is bare here, its app never is).
        assert_eq!(seen["apps"], json!({"get-time": "ui://vanilla__get-time/mcp-app.html"}), "{wire}: {seen}");
        assert_eq!(seen["resources"], json!(["ui://vanilla__get-time/mcp-app.html"]), "{wire}: {seen}");
        let html = text(&seen["html"]["ui://vanilla__get-time/mcp-app.html"]["text"]);
        assert!(html == shipped_html("server-basic-vanillajs"), "{wire}: vanilla's own HTML");
        let time = text(&seen["calls"]["get-time"]["text"]);
        assert!(time.starts_with("20") && time.ends_with('Z'), "the app's own call routes at {wire}: {seen}");
        let refused = text(&seen["reads"][preact_app]["error"]);
        assert!(refused.contains("Resource not found"), "{wire}: {}", seen["reads"]);
        let without_html = json!({"apps": seen["apps"], "resources": seen["resources"], "calls": seen["calls"]});
        assert!(!without_html.to_string().contains("preact__"), "nothing of preact's at {wire}: {without_html}");
    }
}
