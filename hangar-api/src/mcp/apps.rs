//! MCP Apps (SEP-1865, the `io.modelcontextprotocol/ui` extension) through the front door: a
//! tool's `_meta.ui.resourceUri` (and the older flat `_meta["ui/resourceUri"]`) names a `ui://`
//! resource of its own server, so it is rewritten to the name that resource is exposed by
//! (`ui://<prefix>__<rest>`, `hangar_core::front_door`): two upstreams' apps never collide, and
//! `resources/read` of the rewritten URI reads its own server's HTML. An app's own tool calls
//! name tools as its HTML does (the upstream's own names), so they route where those names are
//! bare in the caller's view, and are refused where they are ambiguous; a server the caller's
//! view hides lists no tool and no resource, so none of its apps is referenced or read.
//!
//! A client's declaration of the extension reaches a 2026-07-28 upstream with each call: a
//! 2026-07-28 client's own `_meta` carries it, and a legacy session's calls carry what its
//! `initialize` declared (`hangar_core::session_meta`), so a server that renders its answer for
//! a host that can show its app (or words it for one that cannot) hears the truth in both eras.

use hangar_core::front_door::{Naming, UI_SCHEME};
use serde_json::{Value, json};

/// Rewrites `tool`'s app reference (if any) to the name `server`'s app is exposed by.
pub fn rewrite_tool(naming: &Naming, server: &str, tool: &mut Value) {
    let Some(meta) = tool.get_mut("_meta").and_then(Value::as_object_mut) else { return };
    if let Some(uri) = meta.get_mut("ui").and_then(|ui| ui.get_mut("resourceUri")) {
        rewrite(naming, server, uri);
    }
    if let Some(uri) = meta.get_mut("ui/resourceUri") {
        rewrite(naming, server, uri);
    }
}

fn rewrite(naming: &Naming, server: &str, uri: &mut Value) {
    if let Some(original) = uri.as_str().filter(|uri| uri.starts_with(UI_SCHEME)) {
        *uri = json!(naming.qualified(server, original));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tools_app_reference_names_its_own_servers_app_and_nothing_else_changes() {
        let naming = Naming::default();
        let mut tool = json!({"name": "show", "_meta": {"ui": {"resourceUri": "ui://dash/app.html", "visibility": ["model"]}, "ui/resourceUri": "ui://dash/app.html", "other": "ui://x"}});
        rewrite_tool(&naming, "a", &mut tool);
        assert_eq!(tool["_meta"]["ui"]["resourceUri"], "ui://a__dash/app.html");
        assert_eq!(tool["_meta"]["ui/resourceUri"], "ui://a__dash/app.html");
        assert_eq!(tool["_meta"]["ui"]["visibility"], json!(["model"]));
        assert_eq!(tool["_meta"]["other"], "ui://x");
        let mut plain = json!({"name": "add"});
        rewrite_tool(&naming, "a", &mut plain);
        assert_eq!(plain, json!({"name": "add"}));
        let mut elsewhere = json!({"_meta": {"ui": {"resourceUri": "https://example.com"}}});
        rewrite_tool(&naming, "a", &mut elsewhere);
        assert_eq!(elsewhere["_meta"]["ui"]["resourceUri"], "https://example.com");
    }
}
