//! SEP-2243 custom headers through the front door: a 2026-07-28 `tools/call` of a tool whose
//! parameters carry `x-mcp-header` must mirror them in `Mcp-Param-*` headers. Matching ones
//! (plain or Base64-wrapped) pass; a missing, mismatched, malformed or unexpected one is refused
//! with 400 and -32020 before anything is called, and never hurts the hangar; and an HTTP
//! upstream hears the tool's headers from the hangar as it would from a client.

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, Response, free_port};

const TOOL: &str = "test_custom_headers";

fn front_door() -> Hangar {
    Hangar::start(
        "tool_access: {mode: front_door}\nmcp_servers:\n  conformance:\n    command: [\"{fake}\", \"--conformance\"]\n",
    )
}

fn call(hangar: &Hangar, arguments: Value, headers: &[(&str, &str)]) -> Response {
    hangar.mcp_with("tools/call", json!({"name": TOOL, "arguments": arguments}), json!({}), headers)
}

fn assert_refused(response: &Response, what: &str) {
    assert_eq!(response.status, 400, "{what}: {}", response.text);
    assert_eq!(response.body["error"]["code"], -32020, "{what}: {}", response.text);
    assert_eq!(response.body["id"], 1, "{what}: the refusal echoes the request id");
}

#[test]
fn headers_that_mirror_the_body_pass_and_any_other_is_refused() {
    let hangar = front_door();
    let listed = hangar.mcp("tools/list", json!({}));
    let tool = listed.body["result"]["tools"].as_array().unwrap().iter().find(|t| t["name"] == TOOL).cloned();
    let schema = &tool.expect("the fixture is listed")["inputSchema"];
    assert_eq!(schema["properties"]["region"]["x-mcp-header"], "Region", "the declaration passes through as it is");

    let ok = call(
        &hangar,
        json!({"region": "eu-west", "priority": 3}),
        &[("Mcp-Param-Region", "eu-west"), ("mcp-param-priority", " 3 ")],
    );
    assert_eq!(ok.status, 200, "{}", ok.text);
    assert_eq!(ok.body["result"]["structuredContent"]["arguments"], json!({"region": "eu-west", "priority": 3}));
    // Non-ASCII rides Base64-wrapped; a value that only looks wrapped is literal.
    let wrapped = call(&hangar, json!({"region": "zürich"}), &[("Mcp-Param-Region", "=?base64?esO8cmljaA==?=")]);
    assert_eq!(wrapped.status, 200, "{}", wrapped.text);
    let literal = call(&hangar, json!({"region": "=?base64?SGk="}), &[("Mcp-Param-Region", "=?base64?SGk=")]);
    assert_eq!(literal.status, 200, "{}", literal.text);
    // A header for a parameter the tool does not declare is not the hangar's business.
    let foreign = call(&hangar, json!({"region": "eu"}), &[("Mcp-Param-Region", "eu"), ("Mcp-Param-Tenant", "t1")]);
    assert_eq!(foreign.status, 200, "{}", foreign.text);

    assert_refused(&call(&hangar, json!({"region": "eu"}), &[]), "a missing header");
    assert_refused(&call(&hangar, json!({"region": "eu"}), &[("Mcp-Param-Region", "us")]), "a mismatch");
    assert_refused(
        &call(&hangar, json!({"region": "eu"}), &[("Mcp-Param-Region", "eu"), ("Mcp-Param-Priority", "1")]),
        "a header for a value the body lacks",
    );
    assert_refused(
        &call(&hangar, json!({"region": "Hello"}), &[("Mcp-Param-Region", "=?base64?SGVsbG8?=")]),
        "bad padding",
    );
    assert_refused(
        &call(&hangar, json!({"region": "Hello"}), &[("Mcp-Param-Region", "=?base64?SGVs!!!bG8=?=")]),
        "bad characters",
    );
    let huge = "x".repeat(6000);
    assert_refused(&call(&hangar, json!({"region": "eu"}), &[("Mcp-Param-Region", &huge)]), "a huge mismatching value");
    let refused = call(&hangar, json!({"region": "eu"}), &[("Mcp-Param-Region", &huge)]);
    assert!(refused.text.len() < 2000, "the client's value is not echoed unbounded: {} bytes", refused.text.len());
    let many: Vec<(String, String)> = (0..80).map(|n| (format!("Mcp-Param-P{n}"), "x".to_owned())).collect();
    let mut headers: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    headers.push(("Mcp-Param-Region", "eu"));
    assert_refused(&call(&hangar, json!({"region": "eu"}), &headers), "too many custom headers");

    // A call that asked for a stream is refused as plain JSON too, before any stream starts.
    let streamed = hangar.mcp_with(
        "tools/call",
        json!({"name": TOOL, "arguments": {"region": "eu"}}),
        json!({"progressToken": "p1"}),
        &[("Mcp-Param-Region", "us")],
    );
    assert_refused(&streamed, "a mismatch on a streamed call");
    assert_eq!(streamed.header("content-type"), Some("application/json"));
    let streamed_ok = hangar.mcp_with(
        "tools/call",
        json!({"name": TOOL, "arguments": {"region": "eu"}}),
        json!({"progressToken": "p2"}),
        &[("Mcp-Param-Region", "eu")],
    );
    assert_eq!(streamed_ok.status, 200, "{}", streamed_ok.text);
    assert!(streamed_ok.text.contains("Custom headers"), "{}", streamed_ok.text);

    // None of it was fatal.
    let again = call(&hangar, json!({"region": "eu"}), &[("Mcp-Param-Region", "eu")]);
    assert_eq!(again.status, 200, "{}", again.text);
}

#[test]
fn an_http_upstream_hears_the_tools_headers_from_the_hangar() {
    let port = free_port();
    let hangar = Hangar::start(&format!(
        r#"
tool_access: {{mode: front_door}}
mcp_servers:
  web:
    mode: http
    command: ["{{fake}}", "--conformance", "--http", "127.0.0.1:{port}"]
    endpoint: http://127.0.0.1:{port}/mcp
    handshake_timeout_s: 5
"#
    ));
    let headers_seen = |response: &Response| response.body["result"]["structuredContent"]["headers"].clone();

    // Through the front door: what the client sent, as a client would send it.
    let args = json!({"region": "zürich", "priority": 7, "note": "body only"});
    let forwarded =
        call(&hangar, args.clone(), &[("Mcp-Param-Region", "=?base64?esO8cmljaA==?="), ("Mcp-Param-Priority", "7")]);
    assert_eq!(forwarded.status, 200, "{}", forwarded.text);
    assert_eq!(headers_seen(&forwarded), json!({"region": "=?base64?esO8cmljaA==?=", "priority": "7"}));

    // A plain value goes as it is, and an absent one sends no header.
    let plain = call(&hangar, json!({"region": "eu-west"}), &[("Mcp-Param-Region", "eu-west")]);
    assert_eq!(headers_seen(&plain), json!({"region": "eu-west"}), "{}", plain.text);

    // hangar_call has no client headers to check, but the upstream still needs its own.
    let via_call = hangar.call("web", TOOL, json!({"region": "ap-south", "priority": 1})).expect("the call succeeds");
    assert_eq!(via_call["headers"], json!({"region": "ap-south", "priority": "1"}));
}
