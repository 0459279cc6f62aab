//! Starts are bounded: concurrent starts of one server share one spawn and its outcome, and a
//! server that keeps failing is started again only after its backoff, from every surface.

use std::sync::Barrier;
use std::time::Duration;

use hangar_tests::serde_json::{Value, json};
use hangar_tests::{Hangar, Response, poll};

const CONCURRENT: usize = 30;

/// How many processes the server's command has spawned: each appends its pid to `{dir}/spawns`.
fn spawns(hangar: &Hangar) -> usize {
    std::fs::read_to_string(hangar.path("spawns")).unwrap_or_default().lines().count()
}

/// `CONCURRENT` `POST /api/mcp_servers/{id}/start` at once, each on its own thread.
fn concurrent_starts(hangar: &Hangar, id: &str) -> Vec<Response> {
    let barrier = Barrier::new(CONCURRENT);
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..CONCURRENT)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    hangar.post(&format!("/api/mcp_servers/{id}/start"), Some(&json!({})))
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

/// A command that records its pid, then runs the fake with `flags` (answering its handshake
/// after 500 ms, so that every concurrent start arrives while the first is in flight).
fn command(flags: &str) -> String {
    format!(
        r#"["sh", "-c", "echo $$ >> {{dir}}/spawns; exec \"$0\" --tools add --handshake-delay-ms 500 {flags}", "{{fake}}"]"#
    )
}

#[test]
fn thirty_concurrent_starts_of_a_failing_server_spawn_once_then_back_off_on_every_surface() {
    let hangar = Hangar::start(&format!(
        "recovery: {{initial_backoff_s: 4}}\nmcp_servers:\n  flaky:\n    command: {}\n",
        command("--exit-after-handshake")
    ));
    let answers = concurrent_starts(&hangar, "flaky");
    assert_eq!(spawns(&hangar), 1, "one spawn for {CONCURRENT} concurrent starts");
    let first = &answers[0];
    assert_eq!(first.body["error"]["code"], "StartFailed", "{}", first.text);
    for answer in &answers {
        assert_eq!((answer.status, &answer.body), (first.status, &first.body), "every start shares one outcome");
    }

    // Inside the backoff, no surface starts it: each says when the next start will run.
    let dead = hangar.details("flaky")["dead"].clone();
    assert_eq!(dead["reason"], "start_failed", "{dead}");
    let next = dead["retry_allowed_at"].as_str().unwrap().to_owned();
    let says_when = |message: &str| message.contains(&format!("next start at {next}"));

    let rest = hangar.post("/api/mcp_servers/flaky/start", Some(&json!({})));
    assert_eq!((rest.status, &rest.body["error"]["code"]), (409, &json!("RetryLater")), "{}", rest.text);
    assert!(says_when(rest.body["error"]["message"].as_str().unwrap()), "{}", rest.text);
    let retry_after: u64 = rest.header("retry-after").expect("Retry-After").parse().unwrap();
    assert!((1..=5).contains(&retry_after), "Retry-After {retry_after}");

    let mcp = hangar.tool("hangar_start", json!({"mcp_server": "flaky"}));
    assert_eq!(mcp["isError"], true, "{mcp}");
    assert_eq!(mcp["structuredContent"]["error_type"], "retry_later", "{mcp}");
    assert!(says_when(mcp["content"][0]["text"].as_str().unwrap()), "{mcp}");

    let (error_type, error) = hangar.call_error("flaky", "add", json!({"a": 1, "b": 2}));
    assert_eq!(error_type, "retry_later");
    assert!(says_when(&error), "{error}");
    assert_eq!(spawns(&hangar), 1, "nothing was spawned inside the backoff");

    // Once the backoff has passed, one start runs (and fails again); then the next backoff.
    let again = poll("a start allowed after the backoff", Duration::from_secs(20), || {
        let answer = hangar.post("/api/mcp_servers/flaky/start", Some(&json!({})));
        (answer.body["error"]["code"] != "RetryLater").then_some(answer)
    });
    assert_eq!(again.body["error"]["code"], "StartFailed", "{}", again.text);
    assert_eq!(spawns(&hangar), 2);
    let later = hangar.details("flaky")["dead"]["retry_allowed_at"].as_str().unwrap().to_owned();
    assert!(later > next, "a new backoff: {later} after {next}");
    let refused = hangar.post("/api/mcp_servers/flaky/start", Some(&json!({})));
    assert_eq!(refused.body["error"]["code"], "RetryLater", "{}", refused.text);
    assert_eq!(spawns(&hangar), 2);
}

#[test]
fn thirty_concurrent_starts_of_a_cold_server_spawn_once_and_all_answer_ready() {
    let hangar = Hangar::start(&format!("mcp_servers:\n  cold:\n    command: {}\n", command("")));
    let answers = concurrent_starts(&hangar, "cold");
    assert_eq!(spawns(&hangar), 1, "one spawn for {CONCURRENT} concurrent starts");
    for answer in &answers {
        assert_eq!(answer.status, 200, "{}", answer.text);
        assert_eq!(answer.body, json!({"mcp_server": "cold", "state": "ready", "tools": ["add"]}));
    }
    let details = hangar.details("cold");
    assert_eq!((&details["state"], &details["meta"]["restarts"]), (&json!("ready"), &Value::from(0)));
}

/// In front-door mode the first calls by a tool's name start its cold server to learn its tools.
/// Calls that arrive while that discovery still runs wait for it too: each finds the tool,
/// none is told it is unknown. (A call arriving mid-discovery used to resolve against the still
/// empty catalog and get "Unknown tool".)
#[test]
fn front_door_calls_arriving_while_their_cold_server_is_discovered_all_find_the_tool() {
    let hangar = Hangar::start(
        r#"
tool_access: {mode: front_door}
mcp_servers:
  slowstart:
    command: ["{fake}", "--tools", "echo", "--handshake-delay-ms", "400"]
"#,
    );
    let barrier = Barrier::new(CONCURRENT);
    let answers: Vec<Value> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..CONCURRENT)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    hangar.mcp("tools/call", json!({"name": "echo", "arguments": {"text": "hi"}})).body
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let refused: Vec<&Value> = answers.iter().filter(|a| a.get("result").is_none()).collect();
    assert!(refused.is_empty(), "{} of {CONCURRENT} calls refused, e.g. {}", refused.len(), refused[0]);
    assert_eq!(spawns_of(&hangar, "slowstart"), 1, "one discovery");
}

/// How many times `id` has been spawned, from `/metrics`.
fn spawns_of(hangar: &Hangar, id: &str) -> u64 {
    hangar.metric(&format!("hangar_mcp_server_starts_total{{mcp_server=\"{id}\"}}")).unwrap_or(0.0) as u64
}
