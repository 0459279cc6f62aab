//! Error messages quote client input only up to a bound: a megabyte-long method, tool, server
//! id, URI, header or query value comes back as a short quote that still says what was wrong,
//! and the hangar stays up.

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, MODERN, Response};

const CONFIG: &str = r#"
tool_access: {mode: front_door}
mcp_servers:
  up:
    command: ["{fake}", "--tools", "echo"]
"#;

/// Far below what the inputs would make it if echoed in full.
const SMALL: usize = 4096;

fn huge() -> String {
    "h".repeat(900_000)
}

/// Big, yet under the HTTP parser's limits for a request line or a header.
fn long() -> String {
    "l".repeat(60_000)
}

#[track_caller]
fn assert_small(what: &str, response: &Response, names: &str) {
    let shown = &response.text[..response.text.len().min(300)];
    assert!(response.text.len() < SMALL, "{what}: a {}-byte answer: {shown}", response.text.len());
    assert!(response.text.contains(names), "{what}: does not say `{names}`: {shown}");
}

fn modern_body(id: u32, method: &str, mut params: Value) -> Vec<u8> {
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(MODERN);
    params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string().into_bytes()
}

fn post_mcp(hangar: &Hangar, headers: &[(&str, &str)], body: &[u8]) -> Response {
    let mut all = vec![("Content-Type", "application/json"), ("Accept", "application/json")];
    all.extend_from_slice(headers);
    hangar.post_raw("/mcp", &all, body)
}

#[test]
fn every_echo_of_client_input_is_bounded() {
    let hangar = Hangar::start(CONFIG);
    hangar.tool_ok("hangar_start", json!({"mcp_server": "up"}));
    let (huge, long) = (huge(), long());
    let session = hangar.legacy_session();

    // Method names, both eras.
    let modern = |method: &str| ("Mcp-Method", method.to_owned());
    let (name, value) = modern("tools/list");
    let r = post_mcp(&hangar, &[("MCP-Protocol-Version", MODERN), (name, &value)], &modern_body(1, &huge, json!({})));
    assert_small("modern method, header mismatch", &r, "Mcp-Method");
    let r = post_mcp(
        &hangar,
        &[("MCP-Protocol-Version", MODERN), ("Mcp-Method", &long)],
        &modern_body(1, &long, json!({})),
    );
    assert_small("modern unknown method", &r, "Method not found");
    let r = hangar.legacy(&session, &huge, json!({}));
    assert_small("legacy unknown method", &r, "Method not found");

    // Tool, prompt and resource names.
    let r = hangar.legacy(&session, "tools/call", json!({"name": huge, "arguments": {}}));
    assert_small("unknown tool", &r, "Unknown tool");
    let headers = [("MCP-Protocol-Version", MODERN), ("Mcp-Method", "tools/call"), ("Mcp-Name", "echo")];
    let r = post_mcp(&hangar, &headers, &modern_body(1, "tools/call", json!({"name": huge})));
    assert_small("tool name against Mcp-Name", &r, "Mcp-Name");
    let headers = [("MCP-Protocol-Version", MODERN), ("Mcp-Method", "tools/call"), ("Mcp-Name", long.as_str())];
    let r = post_mcp(&hangar, &headers, &modern_body(1, "tools/call", json!({"name": "echo"})));
    assert_small("a long Mcp-Name header", &r, "Mcp-Name");
    let r = hangar.legacy(&session, "prompts/get", json!({"name": huge}));
    assert_small("unknown prompt", &r, "Unknown prompt");
    let r = hangar.legacy(&session, "resources/read", json!({"uri": huge}));
    assert_small("unknown resource", &r, "Resource not found");
    let r = hangar.legacy(&session, "completion/complete", json!({"ref": {"type": "ref/resource", "uri": huge}}));
    assert_small("completion of an unknown resource", &r, "Unknown resource");

    // Server ids in MCP arguments.
    for tool in ["hangar_details", "hangar_start", "hangar_stop", "hangar_tools"] {
        let r = hangar.legacy(&session, "tools/call", json!({"name": tool, "arguments": {"mcp_server": huge}}));
        assert_small(tool, &r, "no MCP server with id");
    }
    let calls = json!({"calls": [{"mcp_server": huge, "tool": "echo"}]});
    let r = hangar.legacy(&session, "tools/call", json!({"name": "hangar_call", "arguments": calls}));
    assert_small("hangar_call, unknown server", &r, "no MCP server with id");
    let calls = json!({"calls": [{"mcp_server": "up", "tool": huge}]});
    let r = hangar.legacy(&session, "tools/call", json!({"name": "hangar_call", "arguments": calls}));
    assert_small("hangar_call, a tool the upstream does not declare", &r, "Unknown tool");
    let r = hangar.legacy(&session, "tools/call", json!({"name": "hangar_list", "arguments": {"state_filter": huge}}));
    assert_small("hangar_list state_filter", &r, "state_filter");

    // Server ids in REST paths (a 900 KB path is refused by the HTTP parser itself).
    for path in ["", "/tools", "/logs"] {
        let r = hangar.get(&format!("/api/mcp_servers/{long}{path}"));
        assert_eq!(r.status, 404, "{}", &r.text[..r.text.len().min(300)]);
        assert_small("REST server id", &r, "no MCP server with id");
    }
    let r = hangar.post(&format!("/api/mcp_servers/{long}/start"), None);
    assert_small("REST start", &r, "no MCP server with id");
    let r = hangar.get(&format!("/no/such/{long}"));
    assert_small("unknown route", &r, "no route");
    let r = hangar.get(&format!("/api/mcp_servers/%ff{long}"));
    assert_small("undecodable path", &r, "InvalidArgument");

    // Query values.
    let r = hangar.get(&format!("/api/mcp_servers/up/logs?lines={long}"));
    assert_eq!(r.status, 400);
    assert_small("lines", &r, "`lines` must be an integer");

    // Header values.
    let r = post_mcp(
        &hangar,
        &[("MCP-Protocol-Version", &long), ("Mcp-Session-Id", &session)],
        br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    );
    assert_small("legacy MCP-Protocol-Version", &r, "unsupported MCP-Protocol-Version");
    let r = post_mcp(
        &hangar,
        &[("MCP-Protocol-Version", &long), ("Mcp-Method", "tools/list")],
        &modern_body(1, "tools/list", json!({})),
    );
    assert_small("modern MCP-Protocol-Version", &r, "Header mismatch");
    let r = post_mcp(&hangar, &[("Mcp-Session-Id", &long)], br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    assert_small("session id", &r, "Session not found");
    let mut version = json!({});
    version["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!(huge);
    version["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": version}).to_string();
    let r = post_mcp(&hangar, &[("Mcp-Method", "tools/list")], body.as_bytes());
    assert_small("modern _meta protocol version", &r, "Unsupported protocol version");

    // Bodies that do not parse.
    let r = post_mcp(&hangar, &[], format!("{{\"{huge}\" 1}}").as_bytes());
    assert_small("parse error", &r, "Parse error");

    // Still up, and still serving.
    assert_eq!(hangar.get("/health/ready").status, 200);
    assert_eq!(hangar.call("up", "echo", json!({"still": "here"})), Some(json!({"still": "here"})));
}
