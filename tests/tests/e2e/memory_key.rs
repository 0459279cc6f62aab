//! What the hangar remembers of a server across its restarts is kept under a key made of the
//! config fields that shape the server, never its secrets: rotating an environment value (a
//! token) keeps the memory, while a changed command makes it stale. The supervisor is restarted
//! for real with the config edited meanwhile, as an operator rotating a credential would.

use hangar_tests::Hangar;
use hangar_tests::serde_json::{Value, json};
use nix::sys::signal::Signal;

const CONFIG: &str = r#"
mcp_servers:
  vault:
    command: ["{fake}", "--tools", "add"]
    env: {VAULT_TOKEN: first-s3cret}
"#;

/// Restarts `hangar` (SIGTERM), `from` replaced by `to` in its config while it is down.
fn restart_with(hangar: Hangar, from: &str, to: &str) -> Hangar {
    hangar.restart_after(Signal::SIGTERM, &[], |dir| {
        let path = dir.join("hangar.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{text}");
        std::fs::write(&path, text.replace(from, to)).unwrap();
    })
}

fn tools(details: &Value) -> Vec<&str> {
    details["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect()
}

#[test]
fn a_rotated_secret_keeps_the_memory_and_a_changed_command_does_not() {
    let hangar = Hangar::start(CONFIG);
    hangar.tool_ok("hangar_start", json!({"mcp_server": "vault"}));
    assert_eq!(tools(&hangar.details("vault")), ["add"]);

    let hangar = restart_with(hangar, "first-s3cret", "second-s3cret");
    let details = hangar.details("vault");
    assert_eq!((&details["state"], &details["tools_source"]), (&json!("cold"), &json!("remembered")), "{details}");
    assert_eq!(tools(&details), ["add"], "the tools it declared before the rotation");

    let hangar = restart_with(hangar, "\"add\"", "\"add,echo\"");
    let details = hangar.details("vault");
    assert_eq!((&details["state"], &details["tools_source"]), (&json!("cold"), &json!("unknown")), "{details}");
}
