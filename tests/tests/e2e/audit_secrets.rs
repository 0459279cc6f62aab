//! With `audit.arguments: full` the audit trail keeps a call's arguments, but never its secrets:
//! the value of any member named like one (`password`, `secret`, `token`, `api_key`,
//! `authorization`, any case, any depth, also inside a longer name) and every configured env
//! value of any server, wherever it appears, read `[redacted]` in the journal file itself; and
//! a caller's megabyte of arguments is kept cut at `audit.max_argument_bytes`, marked.

use hangar_tests::Hangar;
use hangar_tests::serde_json::{Value, json};

use crate::journal_audit::{journal_of, wait_for};

const ENV_SECRET: &str = "vault-4f9c2e71-db-pass";
const OTHER_ENV_SECRET: &str = "gh-tok-82ac11";

#[test]
fn secrets_in_arguments_are_redacted_before_they_are_stored_and_long_arguments_are_cut() {
    let hangar = Hangar::start(&format!(
        r#"
tool_access: {{mode: front_door}}
audit: {{arguments: full}}
mcp_servers:
  math:
    command: ["{{fake}}", "--tools", "echo"]
    env: {{DB_PASSWORD: "{ENV_SECRET}"}}
  other:
    command: ["{{fake}}", "--tools", "add"]
    env: {{GH_TOKEN: "{OTHER_ENV_SECRET}"}}
"#
    ));
    let arguments = json!({
        "text": format!("connect with {ENV_SECRET} then {OTHER_ENV_SECRET}"),
        "Password": "hunter2-plain",
        "options": {"nested": [{"API_KEY": "ak-0099-plain", "authorization": "Bearer tkn-plain"}]},
        "client_secret": {"any": "shape-plain"},
        "access_token": "at-plain",
    });
    assert_eq!(hangar.tool("echo", arguments)["isError"], false);
    let journal = journal_of(&hangar);
    let entry = wait_for(&journal, "the echo's entry", |all| {
        all.iter().find(|e| e["kind"] == "audit" && e["tool"] == "echo").cloned()
    });
    assert_eq!(
        entry["arguments"],
        json!({
            "text": "connect with [redacted] then [redacted]",
            "Password": "[redacted]",
            "options": {"nested": [{"API_KEY": "[redacted]", "authorization": "[redacted]"}]},
            "client_secret": "[redacted]",
            "access_token": "[redacted]",
        }),
        "{entry}"
    );
    // Half a megabyte of arguments is kept as its first 4 KiB (the default), marked as cut.
    let big = "x".repeat(512 << 10);
    assert_eq!(hangar.tool("echo", json!({"text": big}))["isError"], false);
    let entry = wait_for(&journal, "the big echo's entry", |all| {
        all.iter().find(|e| e["kind"] == "audit" && e["bytes_in"].as_u64() > Some(512 << 10)).cloned()
    });
    let kept = entry["arguments"].as_str().unwrap_or_else(|| panic!("cut to a marked string: {entry}"));
    assert!(kept.len() < 4200, "at most max_argument_bytes and the marker: {} bytes", kept.len());
    assert!(kept.starts_with(r#"{"text":"xxx"#) && kept.contains("[cut: ") && kept.contains("max_argument_bytes"));
    let everywhere: Vec<Value> = crate::journal_audit::entries(&journal);
    for secret in
        [ENV_SECRET, OTHER_ENV_SECRET, "hunter2-plain", "ak-0099-plain", "tkn-plain", "shape-plain", "at-plain"]
    {
        assert!(!everywhere.iter().any(|e| e.to_string().contains(secret)), "{secret} reached the journal");
    }
}
