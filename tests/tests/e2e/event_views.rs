//! `/api/events` as a non-admin sees it: a reload an admin makes reaches it as "a reload
//! happened", naming only the servers its view sees and not who reloaded; an admin's stop of a
//! server it sees does not name the admin either. An admin still sees everything.

use hangar_tests::serde_json::Value;
use hangar_tests::{Hangar, key_hash};

use crate::events::EventStream;

const BOSS: &str = "boss-key-0123456789";
const DEV: &str = "dev-key-0123456789";

fn config(math_tools: &str, extra_server: &str) -> String {
    format!(
        r#"
auth:
  api_keys:
    - {{name: boss-admin, hash: "{boss}", profile: admin}}
    - {{name: dev, hash: "{dev}", profile: dev}}
profiles:
  admin: {{servers: ["*"], admin: true}}
  dev: {{servers: [math]}}
mcp_servers:
  math: {{command: ["{{fake}}", "--tools", "{math_tools}"]}}
  payroll-hidden: {{command: ["{{fake}}", "--tools", "{math_tools}"]}}
{extra_server}"#,
        boss = key_hash(BOSS),
        dev = key_hash(DEV),
    )
}

fn post_as(hangar: &Hangar, key: &str, path: &str) -> u16 {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let request = agent.post(format!("{}{path}", hangar.base)).header("X-API-Key", key);
    request.header("Content-Type", "application/json").send_empty().unwrap().status().as_u16()
}

#[test]
fn a_non_admin_hears_of_a_reload_only_within_its_view_and_not_who_made_it() {
    let hangar = Hangar::start(&config("add", ""));
    let dev = EventStream::open(&hangar, "", &[("X-API-Key", DEV)]);
    let boss = EventStream::open(&hangar, "", &[("X-API-Key", BOSS)]);
    let after = config("add,echo", "  secret-project: {command: [\"{fake}\", \"--tools\", \"add\"]}\n")
        .replace("{fake}", &hangar_tests::bin("hangar-upstream-fake").display().to_string());
    std::fs::write(hangar.path("hangar.yaml"), after).unwrap();
    assert_eq!(post_as(&hangar, BOSS, "/api/config/reload"), 200);

    let seen = dev.until("the reload", |e| e.kind == "reload");
    let reload = &seen.last().unwrap().data;
    let text = reload.to_string();
    assert!(!text.contains("boss-admin"), "the admin who reloaded is not named: {reload}");
    assert!(!text.contains("payroll-hidden") && !text.contains("secret-project"), "only its view's servers: {reload}");
    assert_eq!(reload["changed"], hangar_tests::serde_json::json!(["math"]), "{reload}");
    // The admin sees the whole reload.
    let seen = boss.until("the reload", |e| e.kind == "reload");
    let whole = &seen.last().unwrap().data;
    assert_eq!(whole["identity"], "boss-admin", "{whole}");
    assert_eq!(whole["added"], hangar_tests::serde_json::json!(["secret-project"]), "{whole}");

    // An admin's action on a server the dev sees: the dev hears of it, not who took it.
    assert_eq!(post_as(&hangar, BOSS, "/api/mcp_servers/math/start"), 200);
    let seen = dev.until("the start", |e| e.kind == "action");
    let action: &Value = &seen.last().unwrap().data;
    assert!(!action.to_string().contains("boss-admin") && action["mcp_server"] == "math", "{action}");
    dev.close();
    boss.close();
}
