//! A legacy (2024-11-05, `initialize`) upstream and a modern (2026-07-28, `server/discover`) one
//! both work behind the hangar, and an upstream that ignores `server/discover` falls back.

use hangar_tests::{Hangar, serde_json::json};

#[test]
fn modern_legacy_and_silent_legacy_upstreams_all_work() {
    let hangar = Hangar::start(
        r#"
mcp_servers:
  modern:
    command: ["{fake}", "--tools", "add"]
  legacy:
    command: ["{fake}", "--legacy", "--tools", "add"]
  silent:
    command: ["{fake}", "--legacy-silent", "--tools", "add"]
    # The discover probe gets half of this before the legacy handshake is tried.
    handshake_timeout_s: 2
"#,
    );
    for (id, era, version) in
        [("modern", "modern", "2026-07-28"), ("legacy", "legacy", "2024-11-05"), ("silent", "legacy", "2024-11-05")]
    {
        let batch = hangar.tool_ok(
            "hangar_call",
            json!({"calls": [{"mcp_server": id, "tool": "add", "arguments": {"a": 2, "b": 3}}]}),
        );
        assert_eq!(batch["results"][0]["result"]["structuredContent"], json!({"result": 5}), "{id}: {batch}");
        let meta = hangar.details(id)["meta"].clone();
        assert_eq!(
            (meta["protocol_era"].as_str(), meta["protocol_version"].as_str()),
            (Some(era), Some(version)),
            "{id}"
        );
    }
    // A legacy upstream's "method not found" to the era probe is the probe working as designed:
    // not an error line in its log on every start.
    let logs = hangar.get("/api/mcp_servers/legacy/logs?lines=1000");
    assert!(logs.body["logs"].is_array(), "{}", logs.text);
    assert!(!logs.text.contains("server/discover"), "{}", logs.text);
}
