//! A person's approval of a call (a rule's `then: approve`): alice's profile asks for one when
//! she adds big numbers. Her call waits, held on one API instance, while bob (a profile with
//! `approver: true`) lists it through another and approves it with the CLI: the call runs, once.
//! The same arguments again need their own approval, which bob denies. Nobody decides their
//! own call, a non-approver cannot decide nor see other people's approvals, a call of a client
//! that takes tasks waits as a task (through the death of the API instance it came by), an
//! undecided call expires (`approval_expired`), an approval
//! given after a reload releases nothing, and the audit trail and the events say who asked, who
//! decided, when, and how the call ended. In Chromium, bob approves and denies from the status
//! page, where the pending call appears live.

use std::process::Output;
use std::time::Duration;

use fantoccini::{Client, Locator};
use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, key_hash, poll};

use crate::browser::{click, eventually, in_browser, text};
use crate::cli::cli;
use crate::events::EventStream;
use crate::status_page::sign_in;
use crate::tasks::mcp;

const ALICE: &str = "alice-approvals-0123456789";
const CAROL: &str = "carol-approvals-0123456789";
const BOB: &str = "bob-approvals-0123456789";
const OPS: &str = "ops-approvals-0123456789";

const CONFIG: &str = r#"
tool_access: {mode: front_door}
approvals: {timeout_s: {timeout}}
auth:
  api_keys:
    - {name: alice, hash: "{alice}", profile: dev}
    - {name: carol, hash: "{carol}", profile: dev}
    - {name: bob, hash: "{bob}", profile: lead}
    - {name: ops, hash: "{ops}"}
profiles:
  dev:
    servers: [math]
    rules:
      - {tool: "math__add", when: 'args.a > 100', then: approve, reason: "big sums need a person"}
  lead:
    servers: [math]
    approver: true
    rules:
      - {tool: "math__add", when: 'args.a > 100', then: approve}
mcp_servers:
  math:
    command: ["{fake}", "--tools", "add,echo"]
"#;

fn config(timeout_s: u64) -> String {
    CONFIG
        .replace("{timeout}", &timeout_s.to_string())
        .replace("{alice}", &key_hash(ALICE))
        .replace("{carol}", &key_hash(CAROL))
        .replace("{bob}", &key_hash(BOB))
        .replace("{ops}", &key_hash(OPS))
        .replace("{fake}", &hangar_tests::bin("hangar-upstream-fake").display().to_string())
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(90)))
        .build()
        .into()
}

/// GET `path` as `key` at `base`: status and JSON body.
fn get(base: &str, key: &str, path: &str) -> (u16, Value) {
    let mut response = agent().get(format!("{base}{path}")).header("X-API-Key", key).call().expect("GET");
    (response.status().as_u16(), response.body_mut().read_json().unwrap_or(Value::Null))
}

/// POST `path` as `key` at `base`: status and JSON body.
fn post(base: &str, key: &str, path: &str) -> (u16, Value) {
    let request = agent().post(format!("{base}{path}")).header("X-API-Key", key);
    let mut response = request.header("Content-Type", "application/json").send_empty().expect("POST");
    (response.status().as_u16(), response.body_mut().read_json().unwrap_or(Value::Null))
}

/// The approvals `key` sees at `base`.
fn approvals(base: &str, key: &str) -> Vec<Value> {
    let (status, body) = get(base, key, "/api/approvals");
    assert_eq!(status, 200, "{body}");
    body["approvals"].as_array().cloned().unwrap_or_default()
}

/// Until `key` sees a pending approval of `identity`'s at `base`: it.
fn pending_of(base: &str, key: &str, identity: &str) -> Value {
    poll(&format!("{identity}'s call to wait for approval"), Duration::from_secs(20), || {
        approvals(base, key).into_iter().find(|a| a["state"] == "pending" && a["identity"] == identity)
    })
}

/// Alice's front-door call of `add`, made on a thread of its own (it waits for a person): its
/// JSON-RPC answer when it ends.
fn call_in_background(base: &str, key: &'static str, a: i64, b: i64) -> std::thread::JoinHandle<Value> {
    let base = base.to_owned();
    std::thread::spawn(move || {
        let (_, body) = mcp(&base, key, "tools/call", json!({"name": "add", "arguments": {"a": a, "b": b}}), false);
        body
    })
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn hangar_cli(base: &str, key: &str, args: &[&str]) -> Output {
    let mut all = vec!["--api-key", key];
    all.extend_from_slice(args);
    cli(base, &all)
}

#[test]
fn a_held_call_waits_for_a_person_on_another_api_instance_and_runs_once() {
    let hangar = Hangar::start(&config(120));
    let other = hangar.extra_api(&[]);
    let (first, second) = (format!("http://{}", other.addr), hangar.base.clone());
    let bob_hears = EventStream::open(&hangar, "", &[("X-API-Key", BOB)]);
    let carol_hears = EventStream::open(&hangar, "", &[("X-API-Key", CAROL)]);

    // A small sum needs nobody.
    let (_, small) = mcp(&first, ALICE, "tools/call", json!({"name": "add", "arguments": {"a": 2, "b": 3}}), false);
    assert_eq!(small["result"]["structuredContent"]["result"], 5, "{small}");

    // A big one waits, held on the first instance; bob sees it on the second.
    let waiting = call_in_background(&first, ALICE, 150, 7);
    let approval = pending_of(&second, BOB, "alice");
    let id = approval["id"].as_str().expect("an id").to_owned();
    assert_eq!(approval["mcp_server"], "math", "{approval}");
    assert_eq!(approval["tool"], "add", "{approval}");
    assert_eq!(approval["arguments"], json!({"a": 150, "b": 7}), "{approval}");
    assert!(approval["arguments_sha256"].as_str().is_some_and(|d| d.starts_with("sha256:")), "{approval}");
    assert_eq!(approval["rule"], "profiles.dev.rules[0]", "{approval}");
    assert_eq!(approval["reason"], "big sums need a person", "{approval}");
    assert!(approval["generation"].as_u64().is_some() && approval["expires_at"].is_string(), "{approval}");
    // Alice sees her own; carol (the same profile, not an approver) sees none of it.
    assert_eq!(approvals(&second, ALICE).len(), 1);
    assert!(approvals(&second, CAROL).is_empty());
    // Carol cannot decide it, and alice cannot decide her own.
    let (status, refused) = post(&second, CAROL, &format!("/api/approvals/{id}/approve"));
    assert_eq!((status, refused["error"]["code"].as_str()), (403, Some("Forbidden")), "{refused}");
    let (status, _) = post(&second, ALICE, &format!("/api/approvals/{id}/approve"));
    assert_eq!(status, 403);
    assert!(!waiting.is_finished(), "nobody decided yet");

    // Bob approves it with the CLI: the call runs, once.
    let listed = hangar_cli(&second, BOB, &["approvals"]);
    assert!(stdout(&listed).contains(&id) && stdout(&listed).contains("pending"), "{}", stdout(&listed));
    let approved = hangar_cli(&second, BOB, &["approvals", "approve", &id]);
    assert!(approved.status.success(), "{}", String::from_utf8_lossy(&approved.stderr));
    assert!(stdout(&approved).contains("approved"), "{}", stdout(&approved));
    let answer = waiting.join().expect("alice's call");
    assert_eq!(answer["result"]["structuredContent"]["result"], 157, "{answer}");
    // A decision is taken once.
    let again = hangar_cli(&second, BOB, &["approvals", "deny", &id]);
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("already"));
    let decided = approvals(&second, BOB).into_iter().find(|a| a["id"] == id).expect("the approval, recent");
    assert_eq!((decided["state"].as_str(), decided["decided_by"].as_str()), (Some("approved"), Some("bob")));
    poll("the call's outcome on its approval", Duration::from_secs(10), || {
        let found = approvals(&second, BOB).into_iter().find(|a| a["id"] == id)?;
        (found["outcome"] == "ok").then_some(())
    });

    // The same arguments again need their own approval; bob denies this one.
    let waiting = call_in_background(&first, ALICE, 150, 7);
    let approval = pending_of(&second, BOB, "alice");
    let second_id = approval["id"].as_str().expect("an id").to_owned();
    assert_ne!(second_id, id);
    assert_eq!(approval["arguments_sha256"], decided["arguments_sha256"], "the same arguments, the same digest");
    let denied = hangar_cli(&second, BOB, &["approvals", "deny", &second_id]);
    assert!(denied.status.success(), "{}", String::from_utf8_lossy(&denied.stderr));
    let answer = waiting.join().expect("alice's call");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let words = answer["result"].to_string();
    assert!(words.contains("forbidden") && words.contains("bob denied"), "{words}");

    // Bob's own call waits too, and he cannot approve it himself; an admin can.
    let waiting = call_in_background(&second, BOB, 500, 1);
    let approval = pending_of(&second, OPS, "bob");
    let own = approval["id"].as_str().expect("an id").to_owned();
    let (status, refused) = post(&second, BOB, &format!("/api/approvals/{own}/approve"));
    assert_eq!(status, 403, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap_or_default().contains("your own call"), "{refused}");
    let (status, _) = post(&first, OPS, &format!("/api/approvals/{own}/approve"));
    assert_eq!(status, 200);
    assert_eq!(waiting.join().expect("bob's call")["result"]["structuredContent"]["result"], 501);
    // An id nobody has.
    let (status, missing) = post(&second, BOB, &format!("/api/approvals/apr_{}/approve", "0".repeat(32)));
    assert_eq!((status, missing["error"]["code"].as_str()), (404, Some("ApprovalNotFound")), "{missing}");

    // The audit trail: who asked, who decided and when, and how each call ended.
    let (_, audit) = get(&second, OPS, "/api/audit?limit=100");
    let entries = audit["entries"].as_array().cloned().unwrap_or_default();
    let call_of = |approval_id: &str| {
        entries.iter().find(|e| e["method"] == "tools/call" && e["approval"]["id"] == approval_id).cloned()
    };
    let ran = call_of(&id).unwrap_or_else(|| panic!("alice's approved call: {entries:?}"));
    assert_eq!((ran["identity"].as_str(), ran["outcome"].as_str()), (Some("alice"), Some("ok")), "{ran}");
    assert_eq!(ran["approval"]["decided_by"], "bob", "{ran}");
    assert!(ran["approval"]["decided_at"].is_string(), "{ran}");
    let refused = call_of(&second_id).unwrap_or_else(|| panic!("alice's denied call: {entries:?}"));
    assert_eq!((refused["outcome"].as_str(), refused["error_type"].as_str()), (Some("error"), Some("forbidden")));
    assert_eq!(refused["approval"]["state"], "denied", "{refused}");
    let decisions: Vec<&Value> = entries.iter().filter(|e| e["identity"] == "bob" && e["tool"] == "add").collect();
    assert!(decisions.iter().any(|e| e["method"] == "approve" && e["outcome"] == "ok"), "{decisions:?}");
    assert!(decisions.iter().any(|e| e["method"] == "deny" && e["outcome"] == "ok"), "{decisions:?}");

    // The events: bob heard each approval asked for and decided; carol heard none of alice's.
    let heard = bob_hears.until("the denial", |e| {
        e.kind == "approval"
            && e.data["approval"]["id"] == second_id.as_str()
            && e.data["approval"]["state"] == "denied"
    });
    let states: Vec<&str> = heard
        .iter()
        .filter(|e| e.kind == "approval" && e.data["approval"]["id"] == id.as_str())
        .filter_map(|e| e.data["approval"]["state"].as_str())
        .collect();
    assert_eq!(states, ["pending", "approved"], "{heard:?}");
    assert!(heard.iter().all(|e| e.data.get("arguments").is_none() && e.data["approval"].get("arguments").is_none()));
    while let Some(event) = carol_hears.next(Duration::from_millis(300)) {
        assert_ne!(event.kind, "approval", "carol heard {:?}", event.data);
    }
    bob_hears.close();
    carol_hears.close();
}

#[test]
fn a_task_waits_for_approval_and_an_undecided_call_expires() {
    let hangar = Hangar::start(&config(3));
    let base = hangar.base.clone();

    // Nobody decides: the call is refused once `approvals.timeout_s` passes.
    let (_, expired) = mcp(&base, ALICE, "tools/call", json!({"name": "add", "arguments": {"a": 101, "b": 1}}), false);
    assert_eq!(expired["result"]["isError"], true, "{expired}");
    assert!(expired["result"].to_string().contains("approval_expired"), "{expired}");
    let listed = approvals(&base, BOB);
    assert_eq!(listed[0]["state"], "expired", "{listed:?}");

    // A client that takes tasks: the call becomes a task, working until bob approves it. The
    // API instance it came through dies meanwhile: the approval, the supervisor's, waits on.
    std::fs::write(hangar.path("hangar.yaml"), config(120)).expect("config");
    assert_eq!(post(&base, OPS, "/api/config/reload").0, 200);
    let doomed = hangar.extra_api(&[]);
    let (status, created) = mcp(
        &format!("http://{}", doomed.addr),
        ALICE,
        "tools/call",
        json!({"name": "add", "arguments": {"a": 300, "b": 3}}),
        true,
    );
    assert_eq!(status, 200, "{created}");
    assert_eq!(created["result"]["status"], "working", "{created}");
    let task_id = created["result"]["taskId"].as_str().expect("a task").to_owned();
    let approval = pending_of(&base, BOB, "alice");
    drop(doomed); // SIGKILL
    let (_, task) = mcp(&base, ALICE, "tasks/get", json!({"taskId": task_id}), true);
    assert_eq!(task["result"]["status"], "working", "it waits for a person, not for its client: {task}");
    assert_eq!(pending_of(&base, BOB, "alice")["id"], approval["id"], "still pending");
    let (status, _) = post(&base, BOB, &format!("/api/approvals/{}/approve", approval["id"].as_str().unwrap_or("")));
    assert_eq!(status, 200);
    let done = poll("the task to complete", Duration::from_secs(20), || {
        let (_, task) = mcp(&base, ALICE, "tasks/get", json!({"taskId": task_id}), true);
        (task["result"]["status"] == "completed").then_some(task)
    });
    assert_eq!(done["result"]["result"]["structuredContent"]["result"], 303, "{done}");

    // Approved after a reload: the rules may have changed, so nothing is released.
    let waiting = call_in_background(&base, ALICE, 400, 4);
    let approval = pending_of(&base, BOB, "alice");
    std::fs::write(hangar.path("hangar.yaml"), config(119)).expect("config");
    assert_eq!(post(&base, OPS, "/api/config/reload").0, 200);
    let (status, _) = post(&base, BOB, &format!("/api/approvals/{}/approve", approval["id"].as_str().unwrap_or("")));
    assert_eq!(status, 200);
    let answer = waiting.join().expect("alice's call");
    let words = answer["result"].to_string();
    assert!(words.contains("approval_expired") && words.contains("reloaded"), "{answer}");
}

#[test]
fn bob_approves_and_denies_from_the_status_page() {
    let hangar = Hangar::start(&config(120));
    let base = hangar.base.clone();
    in_browser(async |browser: &Client| {
        sign_in(browser, &format!("{base}/"), BOB).await;
        // The page is open before the call: the pending call appears live.
        let waiting = call_in_background(&base, ALICE, 250, 5);
        let pending = "#approvals tr[data-state=\"pending\"]";
        eventually("the pending call on the page", || async { text(browser, pending).await }).await;
        let shown = text(browser, pending).await.unwrap_or_default();
        assert!(shown.contains("math/add") && shown.contains("alice"), "{shown}");
        assert!(shown.contains(r#"{"a":250,"b":5}"#) && shown.contains("big sums need a person"), "{shown}");
        click(browser, &format!("{pending} button.approve")).await;
        let answer = waiting.join().expect("alice's call");
        assert_eq!(answer["result"]["structuredContent"]["result"], 255, "{answer}");
        eventually("the approval shown as approved", || async {
            let state = text(browser, "#approvals tr[data-state=\"approved\"] .approval-state").await?;
            state.starts_with("approved").then_some(())
        })
        .await;

        // The next one, denied.
        let waiting = call_in_background(&base, ALICE, 260, 5);
        eventually("the next pending call", || async { text(browser, pending).await }).await;
        click(browser, &format!("{pending} button.deny")).await;
        let answer = waiting.join().expect("alice's call");
        assert!(answer["result"].to_string().contains("bob denied"), "{answer}");
        eventually("the denial on the page", || async {
            text(browser, "#approvals tr[data-state=\"denied\"]").await.map(|_| ())
        })
        .await;
        let buttons = browser.find_all(Locator::Css("#approvals button")).await.expect("buttons");
        assert!(buttons.is_empty(), "nothing is left to decide: {} buttons", buttons.len());
    });

    // Alice's page lists her own call, without buttons: she may not decide.
    in_browser(async |browser: &Client| {
        sign_in(browser, &format!("{base}/"), ALICE).await;
        eventually("alice's decided calls", || async { text(browser, "#approvals tr[data-state=\"denied\"]").await })
            .await;
        let buttons = browser.find_all(Locator::Css("#approvals button")).await.expect("buttons");
        assert!(buttons.is_empty());
    });
}
