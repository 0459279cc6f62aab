//! Task status notifications (SEP-2663's `notifications/tasks`): a 2026-07-28 client that
//! declared the tasks extension and listens (`subscriptions/listen` with `taskIds`) hears its
//! own task as it stands and at every status change, its result inline when it completes.
//! Another identity naming the same id hears nothing of it, and a client that did not declare
//! the extension is refused (-32021).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use hangar_tests::poll;
use hangar_tests::serde_json::{self, Value, json};

use crate::tasks::{ALICE, BOB, hangar, mcp};

/// A `subscriptions/listen` for `task_ids` as `key`'s holder, declaring the tasks extension,
/// on a connection of its own, read without blocking for long.
pub(crate) fn listen(base: &str, key: &str, task_ids: Value) -> TcpStream {
    let addr = base.trim_start_matches("http://");
    let body = json!({"jsonrpc": "2.0", "id": "watch-1", "method": "subscriptions/listen", "params": {
        "notifications": {"taskIds": task_ids},
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        },
    }})
    .to_string();
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: subscriptions/listen\r\nX-API-Key: {key}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    stream
}

/// Reads what `stream` has into `seen`, for at most one read timeout.
pub(crate) fn read_some(stream: &mut TcpStream, seen: &mut String) {
    let mut chunk = [0u8; 16384];
    if let Ok(n) = stream.read(&mut chunk) {
        seen.push_str(&String::from_utf8_lossy(&chunk[..n]));
    }
}

/// The JSON messages of the SSE events read so far.
pub(crate) fn messages(seen: &str) -> Vec<Value> {
    seen.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

#[test]
fn the_owner_of_a_task_hears_its_status_changes_and_nobody_else_does() {
    let hangar = hangar();
    let base = hangar.base.clone();
    let (status, created) = mcp(&base, ALICE, "tools/call", json!({"name": "sleep", "arguments": {"ms": 2500}}), true);
    assert_eq!((status, created["result"]["resultType"].as_str()), (200, Some("task")), "{created}");
    let task_id = created["result"]["taskId"].as_str().unwrap().to_owned();

    let (mut owner, mut stranger) = (listen(&base, ALICE, json!([task_id])), listen(&base, BOB, json!([task_id])));
    let (mut heard, mut overheard) = (String::new(), String::new());
    let finished = poll("the owner to hear its task complete", Duration::from_secs(30), || {
        read_some(&mut owner, &mut heard);
        read_some(&mut stranger, &mut overheard);
        messages(&heard)
            .into_iter()
            .find(|m| m["method"] == "notifications/tasks" && m["params"]["status"] == "completed")
    });
    let told = messages(&heard);
    let acknowledged = &told[0];
    assert_eq!(acknowledged["method"], "notifications/subscriptions/acknowledged", "{heard}");
    assert_eq!(acknowledged["params"]["notifications"]["taskIds"], json!([task_id]), "{heard}");
    let statuses: Vec<&Value> =
        told.iter().filter(|m| m["method"] == "notifications/tasks").map(|m| &m["params"]["status"]).collect();
    assert_eq!(statuses, [&json!("working"), &json!("completed")], "as it stood, then its change: {heard}");
    assert_eq!(finished["params"]["taskId"], task_id.as_str());
    assert!(finished["params"]["result"]["content"].is_array(), "the result inline: {finished}");
    assert_eq!(finished["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "watch-1", "{finished}");

    // The stranger's listen was acknowledged without the task, and told nothing of it.
    for _ in 0..3 {
        read_some(&mut stranger, &mut overheard);
    }
    let overheard = messages(&overheard);
    assert_eq!(overheard[0]["params"]["notifications"]["taskIds"], json!([]), "{overheard:?}");
    assert!(!overheard.iter().any(|m| m["method"] == "notifications/tasks"), "{overheard:?}");
}

#[test]
fn a_listen_for_tasks_without_the_extension_is_refused() {
    let hangar = hangar();
    let asked = json!({"notifications": {"taskIds": ["any"]}});
    let (_, refused) = mcp(&hangar.base, ALICE, "subscriptions/listen", asked, false);
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert!(
        refused["error"]["data"]["requiredCapabilities"]["extensions"]["io.modelcontextprotocol/tasks"].is_object()
    );
}
