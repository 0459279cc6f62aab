//! `redaction:` keeps secrets and personal data out of what upstreams return: a real Python
//! `mcp` server hands out an AWS access key id and an e-mail address in a tool's text and
//! structured content, a resource and a prompt. Through the front door, `hangar_call` and
//! `resources/read` / `prompts/get`, the client gets `[REDACTED:<name>]` in their place; the
//! audit entry says what was found, by name; and no body the API serves (answers, audit,
//! events, logs) holds either value, nor does the status page in Chromium, which names what was
//! found. With `action: drop_call` the call is refused whole.
//!
//! Needs `scripts/setup-tools` (the venv with the `mcp` package).

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, poll};

const AWS_KEY: &str = "AKIAIOSFODNN7EXAMPLE";
const EMAIL: &str = "jane.doe@example.com";

fn hangar(action: &str) -> Hangar {
    Hangar::start(&format!(
        r#"
tool_access: {{mode: front_door}}
audit: {{arguments: full}}
redaction:
  detect: [aws_access_key, github_token, private_key, jwt, email, credit_card]
  patterns: [{{name: internal_id, regex: "ACME-[0-9]{{8}}"}}]
  action: {action}
mcp_servers:
  leaky:
    command: ["{{python}}", "{{fixtures}}/py_leaky_server.py"]
    handshake_timeout_s: 30
"#
    ))
}

/// Neither value, anywhere in `text`; both names of what was found.
fn masked(text: &str) {
    assert!(!text.contains(AWS_KEY) && !text.contains(EMAIL), "a secret got through: {text}");
    assert!(text.contains("[REDACTED:aws_access_key]"), "{text}");
    assert!(text.contains("[REDACTED:email]"), "{text}");
}

#[test]
fn secrets_in_results_resources_and_prompts_are_masked_on_every_surface() {
    let hangar = hangar("mask");
    let called = hangar.mcp("tools/call", json!({"name": "lookup", "arguments": {"customer": "acme"}}));
    assert_eq!(called.status, 200, "{}", called.text);
    masked(&called.text);
    let result = &called.body["result"];
    assert_eq!(result["structuredContent"]["aws_key"], "[REDACTED:aws_access_key]", "{result}");
    assert_eq!(result["structuredContent"]["plan"], "gold", "the rest is untouched");

    let batch = hangar.mcp(
        "tools/call",
        json!({"name": "hangar_call", "arguments": {"calls": [{"mcp_server": "leaky", "tool": "lookup", "arguments": {"customer": "acme"}}]}}),
    );
    masked(&batch.text);

    let read = hangar.mcp("resources/read", json!({"uri": "leaky://config"}));
    masked(&read.text);
    assert!(read.text.contains("region = eu-west-1"), "{}", read.text);
    let prompt = hangar.mcp("prompts/get", json!({"name": "contact", "arguments": {"topic": "billing"}}));
    assert!(!prompt.text.contains(EMAIL) && prompt.text.contains("[REDACTED:email]"), "{}", prompt.text);

    // The audit says what was found, by name.
    let audit = poll("the calls' audit entries", std::time::Duration::from_secs(10), || {
        let page = hangar.get("/api/audit?limit=50").body;
        let entries = page["entries"].as_array().cloned().unwrap_or_default();
        let lookups: Vec<Value> = entries.into_iter().filter(|e| e["tool"] == "lookup").collect();
        (lookups.len() >= 2).then_some(lookups)
    });
    for entry in &audit {
        assert_eq!(entry["redacted"], json!(["aws_access_key", "email"]), "{entry}");
    }
    // Events, logs and every body read: neither value.
    let _ = hangar.get("/api/events?limit=200");
    let _ = hangar.get("/api/mcp_servers/leaky/logs?lines=200");
    hangar.assert_no_body_contains(AWS_KEY);
    hangar.assert_no_body_contains(EMAIL);
}

#[test]
fn with_drop_call_a_result_holding_a_secret_is_withheld_whole() {
    let hangar = hangar("drop_call");
    let called = hangar.mcp("tools/call", json!({"name": "lookup", "arguments": {"customer": "acme"}}));
    assert!(!called.text.contains(AWS_KEY) && !called.text.contains(EMAIL), "{}", called.text);
    assert!(called.text.contains("forbidden"), "{}", called.text);
    assert!(called.text.contains("aws_access_key, email") && called.text.contains("drop_call"), "{}", called.text);
    let read = hangar.mcp("resources/read", json!({"uri": "leaky://config"}));
    assert!(!read.text.contains(AWS_KEY) && read.text.contains("drop_call"), "{}", read.text);
    hangar.assert_no_body_contains(AWS_KEY);
}

#[test]
fn the_status_page_names_what_was_redacted_and_never_shows_it() {
    use crate::browser::{click, eventually, in_browser, text};
    use crate::status_page::row;

    let hangar = hangar("mask");
    let called = hangar.mcp("tools/call", json!({"name": "lookup", "arguments": {"customer": "acme"}}));
    masked(&called.text);
    let base = hangar.base.clone();
    in_browser(async |browser: &fantoccini::Client| {
        browser.goto(&format!("{base}/")).await.expect("the page");
        click(browser, &row("leaky", ".toggle")).await;
        let policy = eventually("the call's audit row, with what was redacted", || async {
            text(browser, &row("leaky", ".audit td.policy")).await.filter(|p| p.contains("redacted"))
        })
        .await;
        assert_eq!(policy, "redacted: aws_access_key, email");
        let whole = browser.execute("return document.body.innerText;", vec![]).await.expect("the page's text");
        let whole = whole.as_str().unwrap_or_default().to_owned();
        assert!(whole.contains("lookup"), "{whole}");
        assert!(!whole.contains(AWS_KEY) && !whole.contains(EMAIL), "a secret on the page: {whole}");
    });
}
