use serde_json::{Map, Value, json};

use super::*;

const T0: u64 = 1_800_000_000_000;

fn book_with(id: &str, owner: &str) -> Book {
    let mut book = Book::default();
    book.create(id.into(), owner, T0).unwrap();
    book
}

#[test]
fn a_task_is_visible_only_to_its_creator() {
    let mut book = book_with("t1", "alice");
    assert_eq!(book.get("alice", "t1", T0).unwrap().status, Status::Working);
    assert_eq!(book.get("bob", "t1", T0).unwrap_err(), Refusal::Unknown);
    assert_eq!(book.cancel("bob", "t1", T0).unwrap_err(), Refusal::Unknown);
    assert_eq!(book.update("bob", "t1", &Map::new(), T0).unwrap_err(), Refusal::Unknown);
    assert_eq!(book.get("alice", "nope", T0).unwrap_err(), Refusal::Unknown);
}

#[test]
fn a_task_lives_for_its_ttl_then_reads_as_unknown() {
    let mut book = book_with("t1", "alice");
    assert!(book.get("alice", "t1", T0 + TTL_MS - 1).is_ok());
    assert_eq!(book.get("alice", "t1", T0 + TTL_MS).unwrap_err(), Refusal::Unknown);
}

#[test]
fn the_book_is_bounded() {
    let mut book = Book::default();
    book.configure(&hangar_core::config::TasksConfig { max_per_identity: Some(MAX_LIVE) });
    for n in 0..MAX_LIVE {
        book.create(format!("t{n}"), "alice", T0).unwrap();
    }
    assert_eq!(book.create("one-more".into(), "alice", T0).unwrap_err(), Refusal::Full);
    // Expired tasks make room.
    assert!(book.create("later".into(), "alice", T0 + TTL_MS).is_ok());
}

#[test]
fn one_identity_holds_its_quota_and_finished_tasks_give_way_first() {
    let mut book = Book::default();
    book.configure(&hangar_core::config::TasksConfig { max_per_identity: Some(2) });
    book.create("a1".into(), "alice", T0).unwrap();
    book.create("a2".into(), "alice", T0).unwrap();
    assert_eq!(book.create("a3".into(), "alice", T0).unwrap_err(), Refusal::Quota { held: 2, max: 2 });
    assert_eq!(book.admits("alice", T0).unwrap_err(), Refusal::Quota { held: 2, max: 2 });
    assert!(book.admits("bob", T0).is_ok());
    assert!(book.create("b1".into(), "bob", T0).is_ok(), "another identity still gets one");
    book.answered("a1", 0, json!({"content": []}), T0 + 1);
    assert!(book.admits("alice", T0 + 1).is_ok(), "a finished task of hers will give way");
    assert!(book.create("a3".into(), "alice", T0 + 2).is_ok(), "her finished task gave way");
    assert_eq!(book.get("alice", "a1", T0 + 2).unwrap_err(), Refusal::Unknown);
    assert!(book.get("alice", "a2", T0 + 2).is_ok(), "her working task stays");
}

#[test]
fn a_full_book_frees_finished_tasks_of_the_crowding_identity_before_refusing() {
    let mut book = Book::default();
    book.configure(&hangar_core::config::TasksConfig { max_per_identity: Some(MAX_LIVE) });
    book.create("b0".into(), "bob", T0).unwrap();
    book.answered("b0", 0, json!({"content": []}), T0);
    for n in 1..MAX_LIVE {
        book.create(format!("a{n}"), "alice", T0).unwrap();
    }
    book.answered("a1", 0, json!({"content": []}), T0 + 1);
    book.answered("a2", 0, json!({"content": []}), T0 + 2);
    assert!(book.create("c1".into(), "carol", T0 + 2).is_ok());
    assert!(book.get("bob", "b0", T0 + 2).is_ok(), "bob's finished task is not the crowding one's");
    assert_eq!(book.get("alice", "a1", T0 + 2).unwrap_err(), Refusal::Unknown, "alice's oldest finished went");
    assert!(book.create("c2".into(), "carol", T0 + 2).is_ok());
    assert!(book.create("c3".into(), "carol", T0 + 2).is_ok());
    assert_eq!(book.create("c4".into(), "carol", T0 + 2).unwrap_err(), Refusal::Full, "nothing finished is left");
}

#[test]
fn a_tool_error_completes_with_is_error_and_a_protocol_error_fails() {
    let mut book = book_with("t1", "alice");
    book.answered("t1", 0, json!({"content": [], "isError": true, "resultType": "complete"}), T0 + 5);
    let task = book.get("alice", "t1", T0 + 5).unwrap().detailed();
    assert_eq!((task["status"].as_str(), task["result"]["isError"].as_bool()), (Some("completed"), Some(true)));
    assert!(task["result"].get("resultType").is_none() && task.get("error").is_none());

    let mut book = book_with("t2", "alice");
    book.failed("t2", 0, json!({"code": -32603, "message": "boom"}), T0 + 5);
    let task = book.get("alice", "t2", T0 + 5).unwrap().detailed();
    assert_eq!((task["status"].as_str(), task["error"]["code"].as_i64()), (Some("failed"), Some(-32603)));
    assert!(task.get("result").is_none());
}

#[test]
fn a_result_too_large_fails_the_task() {
    let mut book = book_with("t1", "alice");
    let big = "x".repeat(MAX_RESULT_BYTES + 1);
    book.answered("t1", 0, json!({"content": [{"type": "text", "text": big}]}), T0);
    assert_eq!(book.get("alice", "t1", T0).unwrap().status, Status::Failed);
}

#[test]
fn cancel_stops_a_running_task_once_and_leaves_a_finished_one_alone() {
    let mut book = book_with("t1", "alice");
    assert_eq!(book.cancel("alice", "t1", T0), Ok(true));
    assert_eq!(book.cancel("alice", "t1", T0), Ok(false));
    // The cancelled run's late answer changes nothing.
    book.answered("t1", 0, json!({"content": []}), T0 + 1);
    assert_eq!(book.get("alice", "t1", T0).unwrap().status, Status::Cancelled);

    let mut book = book_with("t2", "alice");
    book.answered("t2", 0, json!({"content": []}), T0);
    assert_eq!(book.cancel("alice", "t2", T0), Ok(false));
    assert_eq!(book.get("alice", "t2", T0).unwrap().status, Status::Completed);
}

#[test]
fn input_required_waits_for_every_answer_then_resumes_with_all_of_them() {
    let mut book = book_with("t1", "alice");
    let asked = json!({
        "resultType": "input_required",
        "inputRequests": {"a": {"method": "elicitation/create"}, "b": {"method": "elicitation/create"}},
        "requestState": "s1",
    });
    book.answered("t1", 0, asked, T0);
    let task = book.get("alice", "t1", T0).unwrap().detailed();
    assert_eq!(task["status"], "input_required");
    assert_eq!(task["inputRequests"].as_object().unwrap().len(), 2);

    let first = Map::from_iter([("a".to_owned(), json!({"action": "accept"})), ("zzz".to_owned(), json!(1))]);
    assert_eq!(book.update("alice", "t1", &first, T0), Ok(Update::Acknowledged));
    let task = book.get("alice", "t1", T0).unwrap().detailed();
    assert_eq!(task["status"], "input_required");
    assert_eq!(task["inputRequests"].as_object().unwrap().keys().collect::<Vec<_>>(), ["b"]);

    let second = Map::from_iter([("b".to_owned(), json!({"action": "decline"}))]);
    let resumed = book.update("alice", "t1", &second, T0).unwrap();
    assert_eq!(
        resumed,
        Update::Resume {
            input_responses: json!({"a": {"action": "accept"}, "b": {"action": "decline"}}),
            request_state: Some(json!("s1")),
            run: 1,
        }
    );
    assert_eq!(book.get("alice", "t1", T0).unwrap().status, Status::Working);
    // The first run's answers are stale now; the second run's count.
    book.answered("t1", 0, json!({"content": [{"type": "text", "text": "old"}]}), T0);
    assert_eq!(book.get("alice", "t1", T0).unwrap().status, Status::Working);
    book.answered("t1", 1, json!({"content": [{"type": "text", "text": "new"}]}), T0);
    assert_eq!(book.get("alice", "t1", T0).unwrap().detailed()["result"]["content"][0]["text"], "new");
}

#[test]
fn the_wire_shapes_use_the_renamed_fields_and_drop_related_task_meta() {
    let mut book = book_with("t1", "alice");
    let created = book.get("alice", "t1", T0).unwrap().created();
    assert_eq!(created["resultType"], "task");
    assert_eq!(created["ttlMs"], TTL_MS);
    assert_eq!(created["pollIntervalMs"], POLL_INTERVAL_MS);
    assert!(created.get("ttl").is_none() && created.get("task").is_none() && created.get("result").is_none());
    assert!(created["createdAt"].as_str().unwrap().starts_with("2027-01-15T"));
    book.answered(
        "t1",
        0,
        json!({"content": [], "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t1"}, "keep": 1}}),
        T0,
    );
    let task = book.get("alice", "t1", T0).unwrap().detailed();
    assert_eq!(task["result"]["_meta"], json!({"keep": 1}));
}

#[test]
fn a_mirrored_task_takes_over_the_upstreams_state_under_its_own_id() {
    let mut book = book_with("ours", "alice");
    book.mirrored("ours", &json!({"taskId": "theirs", "status": "input_required", "inputRequests": {"q": {}}}), T0 + 1);
    let task = book.get("alice", "ours", T0 + 1).unwrap().detailed();
    assert_eq!((task["taskId"].as_str(), task["status"].as_str()), (Some("ours"), Some("input_required")));
    assert_eq!(task["inputRequests"], json!({"q": {}}));
    book.mirrored("ours", &json!({"status": "bogus"}), T0 + 2);
    assert_eq!(book.get("alice", "ours", T0).unwrap().status, Status::InputRequired);
    let done = json!({"status": "completed", "result": {"content": [], "_meta": {"io.modelcontextprotocol/related-task": {}}}});
    book.mirrored("ours", &done, T0 + 3);
    let task = book.get("alice", "ours", T0).unwrap().detailed();
    assert_eq!((task["status"].as_str(), &task["result"]), (Some("completed"), &json!({"content": [], "_meta": {}})));
    // Finished here: later news changes nothing.
    book.mirrored("ours", &json!({"status": "working"}), T0 + 4);
    assert_eq!(book.get("alice", "ours", T0).unwrap().status, Status::Completed);
}

#[test]
fn every_status_change_is_told_once_as_the_task_now_stands() {
    let mut book = book_with("t1", "alice");
    assert!(book.take_changes().is_empty(), "creation is answered, not told");
    let asked = json!({"resultType": "input_required", "inputRequests": {"q": {"method": "roots/list"}}});
    book.answered("t1", 0, asked, T0 + 1);
    let changes = book.take_changes();
    assert_eq!(changes.len(), 1);
    assert_eq!((changes[0].owner.as_str(), changes[0].id.as_str(), changes[0].terminal), ("alice", "t1", false));
    assert_eq!(changes[0].task["status"], "input_required");
    assert!(changes[0].task["inputRequests"].get("q").is_some());
    book.update("alice", "t1", &Map::from_iter([("q".to_owned(), json!({"roots": []}))]), T0 + 2).unwrap();
    book.answered("t1", 1, json!({"content": [{"type": "text", "text": "done"}]}), T0 + 3);
    let changes = book.take_changes();
    let statuses: Vec<&Value> = changes.iter().map(|c| &c.task["status"]).collect();
    assert_eq!(statuses, [&json!("working"), &json!("completed")]);
    assert!(changes[1].terminal);
    assert_eq!(changes[1].task["result"]["content"][0]["text"], "done");
    assert!(book.take_changes().is_empty(), "told once");
    book.answered("t1", 1, json!({}), T0 + 4);
    assert!(book.take_changes().is_empty(), "a finished task changes no more");
}

#[test]
fn no_change_is_recorded_while_nobody_follows_and_the_task_still_changes() {
    let mut book = book_with("t1", "alice");
    book.record_changes(false);
    book.answered("t1", 0, json!({"content": [{"type": "text", "text": "done"}]}), T0 + 1);
    assert!(book.take_changes().is_empty(), "nobody follows: no copy of the task is made");
    assert_eq!(book.get("alice", "t1", T0 + 1).unwrap().status, Status::Completed);
    book.record_changes(true);
    book.create("t2".to_owned(), "alice", T0 + 2).unwrap();
    book.cancel("alice", "t2", T0 + 2).unwrap();
    assert_eq!(book.take_changes().len(), 1, "recorded again once someone follows");
}
