//! The SEP-2243 fixture: a tool whose parameters are mirrored into `Mcp-Param-*` headers
//! (`x-mcp-header`), which the suite's `http-custom-header-server-validation` looks for in
//! `tools/list` and calls with matching, mismatching and malformed headers. The server in
//! front (the hangar) does the checking; the tool only answers. Over HTTP it also reports
//! the custom headers its request carried (the transport puts them in `_meta`, under
//! [`HEADERS_SEEN`]), so a test sees what a gateway forwarded.

use serde_json::{Map, Value, json};

use super::content::{self, tool_result};
use super::request::{Answer, Req};

pub const TOOL: &str = "test_custom_headers";
/// Where the HTTP transport puts the `Mcp-Param-*` headers it received (name, lower-case, to
/// value as sent).
pub const HEADERS_SEEN: &str = "http_mcp_params";

/// The declaration: `region` (a string, required) and `priority` (an integer) in headers,
/// `note` in the body only.
pub fn declaration() -> Value {
    json!({
        "name": TOOL,
        "description": "Mirrors region and priority into Mcp-Param-Region and Mcp-Param-Priority (SEP-2243).",
        "inputSchema": {
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region", "description": "Where to route."},
                "priority": {"type": "integer", "x-mcp-header": "Priority"},
                "note": {"type": "string"},
            },
            "required": ["region"],
        },
    })
}

/// Answers with the arguments, and the headers seen (over HTTP).
pub fn call(req: &Req, args: &Map<String, Value>) -> Answer {
    if !args.get("region").is_some_and(Value::is_string) {
        return Answer::invalid("argument region must be a string");
    }
    let seen = req.params.get("_meta").and_then(|m| m.get(HEADERS_SEEN)).cloned().unwrap_or(json!({}));
    let mut result = tool_result(vec![content::text(&format!("Custom headers: {}", Value::Object(args.clone())))]);
    result["structuredContent"] = json!({"arguments": args, "headers": seen});
    Answer::Result(result)
}
