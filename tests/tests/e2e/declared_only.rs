//! The hangar asks an upstream only for what it declared (issue 32 §2). The real
//! `@modelcontextprotocol/server-filesystem` declares `tools` alone; a legacy client's
//! `logging/setLevel`, `prompts/list`, `resources/list` and `resources/templates/list` through
//! the front door are answered (empty lists, `{}`) without reaching it: it answers no -32601,
//! its log carries no "Method not found", and the audit trail records none of this bookkeeping
//! as a failed call. A server that declares them (server-everything) still gets them. Its own
//! `roots/list` at start, outside any call, is answered with no roots rather than an error.

use hangar_tests::{Hangar, node, server_everything, server_filesystem};
use serde_json::{Value, json};

#[test]
fn optional_methods_reach_only_the_upstreams_that_declared_them() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "tool_access: {{mode: front_door}}\nmcp_servers:\n  fs:\n    command: [\"{node}\", \"{fs}\", \"{dir}\"]\n  everything:\n    command: [\"{node}\", \"{everything}\"]\n",
        node = node().display(),
        fs = server_filesystem().display(),
        dir = dir.path().display(),
        everything = server_everything().display(),
    );
    let hangar = Hangar::start(&yaml);
    for server in ["fs", "everything"] {
        assert_eq!(hangar.post(&format!("/api/mcp_servers/{server}/start"), None).status, 200);
    }
    let session = hangar.legacy_session();
    let answer = |method: &str, params: Value| -> Value {
        let response = hangar.legacy(&session, method, params);
        assert_eq!(response.status, 200, "{method}: {}", response.text);
        let body = response.text.lines().find_map(|line| line.strip_prefix("data: ")).unwrap_or(&response.text);
        let answer: Value = serde_json::from_str(body).expect("a JSON-RPC answer");
        assert!(answer.get("error").is_none(), "{method}: {answer}");
        answer["result"].clone()
    };
    answer("logging/setLevel", json!({"level": "debug"}));
    let prompts = answer("prompts/list", json!({}));
    let resources = answer("resources/list", json!({}));
    answer("resources/templates/list", json!({}));
    // server-everything declared them, and was asked: its prompts and resources are listed.
    assert!(!prompts["prompts"].as_array().unwrap().is_empty(), "{prompts}");
    assert!(!resources["resources"].as_array().unwrap().is_empty(), "{resources}");

    let logs = hangar.get("/api/mcp_servers/fs/logs?lines=1000").text;
    // Its `roots/list` at start, outside any call, is answered (no roots: no one client's roots
    // are everyone's), and it keeps serving the directory it was given.
    assert!(!logs.contains("Failed to request initial roots"), "{logs}");
    let allowed = hangar.legacy(&session, "tools/call", json!({"name": "list_allowed_directories", "arguments": {}}));
    assert!(allowed.text.contains(&dir.path().file_name().unwrap().to_string_lossy().to_string()), "{}", allowed.text);
    asked_nothing_undeclared(&hangar, "fs");
    no_failure_audited(&hangar);
    let audit = hangar.get("/api/audit?limit=1000").body;
    let set_level = audit["entries"].as_array().unwrap().iter().filter(|e| e["method"] == "logging/setLevel").count();
    assert_eq!(set_level, 0, "setting a log level is no call of the caller's: {audit}");
}

/// `server`'s log shows it was asked nothing it did not declare: no -32601 answered, no optional
/// method named.
pub(crate) fn asked_nothing_undeclared(hangar: &Hangar, server: &str) {
    let logs = hangar.get(&format!("/api/mcp_servers/{server}/logs?lines=1000")).text;
    let optional = ["logging/setLevel", "prompts/list", "resources/list", "resources/templates/list"];
    for asked in ["Method not found", "-32601"].iter().chain(&optional) {
        assert!(!logs.contains(asked), "{server} was asked what it never declared ({asked}): {logs}");
    }
}

/// No entry of the audit trail failed: a fan-out's bookkeeping is no failed call.
pub(crate) fn no_failure_audited(hangar: &Hangar) {
    let audit = hangar.get("/api/audit?limit=1000").body;
    let failed: Vec<&Value> =
        audit["entries"].as_array().unwrap().iter().filter(|entry| entry["outcome"] != "ok").collect();
    assert!(failed.is_empty(), "the fan-outs' bookkeeping was audited as failures: {failed:?}");
}
