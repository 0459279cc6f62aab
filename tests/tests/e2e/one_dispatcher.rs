//! Both eras are served by one dispatcher, and each answer is shaped by the client's era, never
//! by the path it took: the same front-door calls, to a modern and to a legacy upstream, as JSON
//! and as an event stream, come back with 2026-07-28's fields for a 2026-07-28 client
//! (`resultType`, the hangar's `serverInfo`) and without them for a legacy session. A method
//! only one era serves is unknown to the other.

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, MODERN, Response};

const CONFIG: &str = r#"
tool_access: {mode: front_door}
mcp_servers:
  modern:
    command: ["{fake}", "--tools", "echo"]
  legacy:
    command: ["{fake}", "--legacy", "--tools", "add"]
"#;

const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// A 2026-07-28 request; `progress` asks for the call's notifications, so the answer streams.
fn modern(hangar: &Hangar, method: &str, params: Value, progress: bool) -> Response {
    hangar.mcp_with(method, params, progress_token(progress), &[])
}

/// The `_meta` that asks for a call's notifications (`progress`), or none.
fn progress_token(progress: bool) -> Value {
    if progress { json!({"progressToken": "p-1"}) } else { json!({}) }
}

/// A legacy request in `session`; `progress` as for [`modern`].
fn legacy(hangar: &Hangar, session: &str, method: &str, mut params: Value, progress: bool) -> Response {
    if progress {
        params["_meta"] = progress_token(progress);
    }
    hangar.legacy(session, method, params)
}

/// The JSON-RPC answer: the body, or the last `data:` event of a stream.
fn answer(response: &Response, streamed: bool) -> Value {
    assert_eq!(response.status, 200, "{}", response.text);
    let content_type = response.header("content-type").unwrap_or_default();
    if !streamed {
        assert_eq!(content_type, "application/json", "{}", response.text);
        return response.body.clone();
    }
    assert_eq!(content_type, "text/event-stream", "{}", response.text);
    let last = response.text.lines().rev().find_map(|line| line.strip_prefix("data: "));
    hangar_tests::serde_json::from_str(last.expect("an event")).expect("a JSON-RPC message")
}

#[test]
fn each_era_shapes_every_answer_its_own_way() {
    let hangar = Hangar::start(CONFIG);
    for server in ["modern", "legacy"] {
        hangar.tool_ok("hangar_start", json!({"mcp_server": server}));
    }
    let session = hangar.legacy_session();

    let calls = [
        (json!({"name": "echo", "arguments": {"said": "hi"}}), json!({"said": "hi"})),
        (json!({"name": "add", "arguments": {"a": 2, "b": 3}}), json!({"result": 5})),
    ];
    for (params, expected) in &calls {
        for streamed in [false, true] {
            let what = format!("{} (streamed: {streamed})", params["name"]);
            let result = answer(&modern(&hangar, "tools/call", params.clone(), streamed), streamed)["result"].clone();
            assert_eq!(&result["structuredContent"], expected, "2026-07-28 {what}: {result}");
            assert_eq!(result["resultType"], "complete", "2026-07-28 {what}: {result}");
            assert_eq!(result["_meta"][SERVER_INFO]["name"], "hangar", "2026-07-28 {what}: {result}");
            assert!(result.get("ttlMs").is_none(), "a call is not cacheable: {what}: {result}");

            let result =
                answer(&legacy(&hangar, &session, "tools/call", params.clone(), streamed), streamed)["result"].clone();
            assert_eq!(&result["structuredContent"], expected, "legacy {what}: {result}");
            for field in ["resultType", "ttlMs", "cacheScope"] {
                assert!(result.get(field).is_none(), "legacy {what} carries {field}: {result}");
            }
            assert!(
                result.pointer(&format!("/_meta/{}", SERVER_INFO.replace('/', "~1"))).is_none(),
                "legacy {what}: {result}"
            );
        }
    }

    // Lists: cacheable for 2026-07-28, plain for a session; the same tools either way.
    let modern_list = answer(&modern(&hangar, "tools/list", json!({}), false), false)["result"].clone();
    assert_eq!((modern_list["ttlMs"].clone(), modern_list["cacheScope"].clone()), (json!(0), json!("public")));
    let legacy_list = answer(&legacy(&hangar, &session, "tools/list", json!({}), false), false)["result"].clone();
    assert!(legacy_list.get("ttlMs").is_none() && legacy_list.get("resultType").is_none(), "{legacy_list}");
    assert_eq!(modern_list["tools"], legacy_list["tools"]);

    // What one era alone serves is unknown to the other: 404 for 2026-07-28, 200 in a session.
    let ping = legacy(&hangar, &session, "ping", json!({}), false);
    assert_eq!(answer(&ping, false)["result"], json!({}));
    let discover = legacy(&hangar, &session, "server/discover", json!({}), false);
    assert_eq!(answer(&discover, false)["error"]["code"], -32601, "{}", discover.text);
    for method in ["ping", "logging/setLevel"] {
        let refused = modern(&hangar, method, json!({}), false);
        assert_eq!((refused.status, refused.body["error"]["code"].clone()), (404, json!(-32601)), "{method}");
    }
    let discover = answer(&modern(&hangar, "server/discover", json!({}), false), false)["result"].clone();
    assert_eq!(discover["supportedVersions"][0], MODERN, "{discover}");
    assert_eq!((discover["ttlMs"].clone(), discover["resultType"].clone()), (json!(0), json!("complete")));
}
