//! Crash safety: calls under load from a few threads, the supervisor SIGKILLed in the middle, a
//! new supervisor started on the same state directory. It opens the journal cleanly, and every
//! call whose answer arrived more than one commit interval before the kill is in it.
//!
//! The commit interval is 100 ms (`journal::COMMIT_INTERVAL` in the supervisor): an entry is
//! recorded before its answer is sent, and committed within an interval (plus the batch's own
//! write). The test allows twice that: every answer received 200 ms or more before the kill
//! must be in the journal.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, MODERN, poll, sigkill};

use super::journal_audit::entries;

/// Twice `COMMIT_INTERVAL` (100 ms).
const MARGIN: Duration = Duration::from_millis(200);
const THREADS: u64 = 4;

/// One modern `tools/call` of `add`, marked `(t, i)` in its arguments; whether it succeeded.
fn call(agent: &ureq::Agent, base: &str, t: u64, i: u64) -> bool {
    let params = json!({"name": "add", "arguments": {"a": 1, "b": 2, "t": t, "i": i}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params});
    let answer = agent
        .post(format!("{base}/mcp"))
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", MODERN)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "add")
        .send_json(body);
    let Ok(mut answer) = answer else { return false };
    let text = answer.body_mut().read_to_string().unwrap_or_default();
    let body: Value = hangar_tests::serde_json::from_str(&text).unwrap_or(Value::Null);
    answer.status() == 200 && body["result"]["isError"] == false
}

#[test]
fn every_call_answered_a_commit_interval_before_a_sigkill_is_in_the_journal() {
    let shared = tempfile::tempdir().unwrap();
    let state = shared.path().join("state");
    let config = format!(
        "state_dir: {}\ntool_access: {{mode: front_door}}\naudit: {{arguments: full}}\nmcp_servers:\n  math: {{command: [\"{{fake}}\", \"--tools\", \"add\"]}}\n",
        state.display()
    );
    let first = Hangar::start(&config);
    let answered: Arc<Mutex<Vec<(u64, u64, Instant)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = (0..THREADS)
        .map(|t| {
            let (base, answered, stop) = (first.base.clone(), answered.clone(), stop.clone());
            std::thread::spawn(move || {
                let agent: ureq::Agent = ureq::Agent::config_builder()
                    .http_status_as_error(false)
                    .timeout_global(Some(Duration::from_secs(10)))
                    .build()
                    .into();
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) || !call(&agent, &base, t, i) {
                        return;
                    }
                    answered.lock().unwrap().push((t, i, Instant::now()));
                }
            })
        })
        .collect();
    // Killed once a good number of calls went through well before (and while more are in flight).
    poll("calls under load", Duration::from_secs(30), || {
        let answered = answered.lock().unwrap();
        let old = answered.iter().filter(|(_, _, at)| at.elapsed() > 2 * MARGIN).count();
        (old >= 100 && answered.len() >= 300).then_some(())
    });
    let killed_at = Instant::now();
    sigkill(first.pid());
    stop.store(true, Ordering::Relaxed);
    for thread in load {
        thread.join().unwrap();
    }
    let must_be_there: Vec<(u64, u64)> = answered
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, _, at)| *at + MARGIN <= killed_at)
        .map(|(t, i, _)| (*t, *i))
        .collect();
    assert!(must_be_there.len() >= 100, "{} calls answered well before the kill", must_be_there.len());

    let second = Hangar::start(&config);
    let all = entries(&state.join("journal.sqlite"));
    let recorded: std::collections::HashSet<(u64, u64)> = all
        .iter()
        .filter(|e| e["kind"] == "audit")
        .filter_map(|e| Some((e["arguments"]["t"].as_u64()?, e["arguments"]["i"].as_u64()?)))
        .collect();
    let missing: Vec<_> = must_be_there.iter().filter(|call| !recorded.contains(call)).collect();
    assert!(missing.is_empty(), "{} of {} calls missing: {missing:?}", missing.len(), must_be_there.len());
    // The new supervisor goes on after the last id written, and records again.
    let last = all.iter().filter_map(|e| e["id"].as_u64()).max().unwrap();
    assert!(call(&ureq::Agent::new_with_defaults(), &second.base, 99, 0));
    poll("the new supervisor's entry", Duration::from_secs(10), || {
        let after = entries(&state.join("journal.sqlite"));
        after.iter().find(|e| e["arguments"]["t"] == 99).map(|e| assert!(e["id"].as_u64().unwrap() > last))
    });
}
