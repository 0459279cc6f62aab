//! The calls in flight (`GET /api/calls`, and the status page in Chromium): a call held in
//! flight upstream is listed (server, tool, caller, how long) while it runs, to its caller and
//! to an admin, never to another identity, and is gone once answered.

use std::time::Duration;

use fantoccini::Client;
use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, api_keys_yaml, poll};

use crate::browser::{eventually, in_browser, text};
use crate::status_page::sign_in;
use crate::tasks::mcp;

const ADMIN: &str = "admin-in-flight-0123456789";
const DEV: &str = "dev-in-flight-0123456789";
const OTHER: &str = "other-in-flight-0123456789";

fn hangar() -> Hangar {
    let keys = api_keys_yaml(&[("ops", ADMIN, None), ("dev", DEV, Some("dev")), ("other", OTHER, Some("dev"))]);
    Hangar::start(&format!(
        r#"
tool_access: {{mode: front_door}}
{keys}profiles:
  dev: {{servers: [slow]}}
mcp_servers:
  slow: {{command: ["{{fake}}", "--tools", "sleep,echo"]}}
"#
    ))
}

fn in_flight(hangar: &Hangar, key: &str) -> Vec<Value> {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut response = agent.get(format!("{}/api/calls", hangar.base)).header("X-API-Key", key).call().expect("GET");
    assert_eq!(response.status().as_u16(), 200);
    let body: Value = response.body_mut().read_json().unwrap_or(Value::Null);
    assert_eq!(body["count"].as_u64(), body["calls"].as_array().map(|c| c.len() as u64), "{body}");
    body["calls"].as_array().cloned().unwrap_or_default()
}

#[test]
fn a_call_held_upstream_is_listed_while_it_runs_to_its_caller_and_admins_only() {
    let hangar = hangar();
    let base = hangar.base.clone();
    in_browser(async |browser: &Client| {
        sign_in(browser, &format!("{base}/"), ADMIN).await;
        eventually("the empty list", || async {
            text(browser, "#in-flight-summary").await.filter(|t| t == "No call is running.")
        })
        .await;
        let running = {
            let base = base.clone();
            std::thread::spawn(move || {
                mcp(&base, DEV, "tools/call", json!({"name": "sleep", "arguments": {"ms": 4000}}), false)
            })
        };
        let row = "#in-flight tr[data-server=\"slow\"]";
        let shown = eventually("the call on the page", || async { text(browser, row).await }).await;
        assert!(shown.contains("slow/sleep") && shown.contains("dev"), "{shown}");
        assert_eq!(text(browser, "#in-flight-summary").await.as_deref(), Some("1 call is running."));

        // Its caller sees it, with how long it has run; another identity of the same profile does not.
        let mine = in_flight(&hangar, DEV);
        assert_eq!(
            (mine.len(), mine[0]["tool"].as_str(), mine[0]["identity"].as_str()),
            (1, Some("sleep"), Some("dev"))
        );
        assert!(mine[0]["elapsed_ms"].is_u64() && mine[0]["started_at"].is_string(), "{mine:?}");
        assert!(in_flight(&hangar, OTHER).is_empty(), "another identity sees none of it");

        let (status, answer) = running.join().expect("the call");
        assert_eq!(status, 200, "{answer}");
        eventually("the call gone from the page", || async {
            text(browser, "#in-flight-summary").await.filter(|t| t == "No call is running.")
        })
        .await;
    });
    poll("the list to be empty", Duration::from_secs(10), || in_flight(&hangar, ADMIN).is_empty().then_some(()));
}
