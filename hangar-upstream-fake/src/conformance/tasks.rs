//! The tasks extension's fixtures (SEP-2663 scenarios of the suite): `greet` (never a task),
//! `slow_compute`, `failing_job`, `protocol_error_job`, `confirm_delete`, `multi_input` and
//! `test_tool_with_task`. This server knows nothing of tasks itself: it declares which tools
//! take them (`execution.taskSupport`) and takes its time, and the gateway in front of it makes
//! the tasks. A slow fixture answers after a pause longer than a gateway's shortcut.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hangar_core::sync::Unpoisoned;
use serde_json::{Map, Value, json};

use super::content::{self, tool_result};
use super::inputs::{self, Ask};
use super::peer::Peer;
use super::request::{Answer, Req};
use crate::protocol;

/// How long a "slow" fixture works before it answers (or asks).
const PAUSE: Duration = Duration::from_millis(1000);
/// The longest `slow_compute` sleeps, whatever it is asked.
const MAX_SECONDS: u64 = 120;

/// Name, description, task support and argument schema of each fixture, in `tools/list` order.
const FIXTURES: &[(&str, &str, &str)] = &[
    ("greet", "Says hello to `name`; never a task.", "forbidden"),
    ("slow_compute", "Works `seconds` seconds, then answers; a task where the client takes them.", "optional"),
    ("failing_job", "Fails as a tool (isError) after a second; runs only as a task.", "required"),
    ("protocol_error_job", "Fails with a JSON-RPC error after a second.", "optional"),
    ("confirm_delete", "Asks to confirm deleting `filename` (after a second), then answers.", "optional"),
    ("multi_input", "Asks two questions at once (after a second), then answers.", "optional"),
    ("test_tool_with_task", "Asks for a name at once, then works a second and greets it.", "required"),
    (NATIVE, "Makes a task of its own (for a client that takes tasks), done after a second.", "optional"),
];

/// The one fixture that makes tasks itself, as a task-aware upstream would; the gateway follows
/// its task under an id of its own (pass-through).
const NATIVE: &str = "native_task_job";
const NATIVE_RESULT: &str = "The native task is done.";

/// The tasks `native_task_job` made: when each is done (`seconds` after it was made, else
/// [`PAUSE`]), and whether it was cancelled.
#[derive(Debug, Default)]
pub struct NativeTasks(Mutex<HashMap<String, (Instant, bool)>>);

impl NativeTasks {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, bool)>> {
        self.0.locked()
    }

    fn create(&self, args: &Map<String, Value>) -> Value {
        let pause = args
            .get("seconds")
            .and_then(Value::as_f64)
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map_or(PAUSE, |s| Duration::from_secs_f64(s.min(3600.0)));
        let mut tasks = self.lock();
        let id = format!("native-{}", tasks.len() + 1);
        tasks.insert(id.clone(), (Instant::now() + pause, false));
        json!({"resultType": "task", "taskId": id, "status": "working", "createdAt": CREATED_AT,
            "lastUpdatedAt": CREATED_AT, "ttlMs": 60000, "pollIntervalMs": 100})
    }

    /// `tasks/get` and `tasks/cancel` for its own tasks (`tasks/update`: nothing to answer).
    pub fn handle(&self, method: &str, req: &Req) -> Answer {
        let Some(id) = req.params.get("taskId").and_then(Value::as_str) else {
            return Answer::invalid("taskId must be a string");
        };
        let mut tasks = self.lock();
        let Some(task) = tasks.get_mut(id) else { return Answer::invalid(format!("no task {id}")) };
        match method {
            "tasks/cancel" => {
                // Tests read this line from the hangar's logs endpoint to see the cancel arrive.
                crate::log::log(&format!("tasks/cancel for {id}"));
                task.1 = true;
                Answer::Result(json!({}))
            }
            "tasks/get" => {
                let mut out =
                    json!({"taskId": id, "createdAt": CREATED_AT, "lastUpdatedAt": CREATED_AT, "ttlMs": 60000});
                if task.1 {
                    out["status"] = json!("cancelled");
                } else if Instant::now() >= task.0 {
                    out["status"] = json!("completed");
                    out["result"] = tool_result(vec![content::text(NATIVE_RESULT)]);
                } else {
                    out["status"] = json!("working");
                }
                Answer::Result(out)
            }
            _ => Answer::Result(json!({})),
        }
    }
}

const CREATED_AT: &str = "2026-01-01T00:00:00Z";

/// Whether the request's client takes tasks.
fn takes_tasks(req: &Req) -> bool {
    req.has_extension("io.modelcontextprotocol/tasks")
}

pub fn definitions() -> Vec<Value> {
    FIXTURES
        .iter()
        .map(|(name, description, support)| {
            json!({
                "name": name,
                "description": description,
                "inputSchema": {"type": "object", "properties": {
                    "name": {"type": "string"}, "seconds": {"type": "number"},
                    "label": {"type": "string"}, "filename": {"type": "string"},
                }},
                "execution": {"taskSupport": support},
            })
        })
        .collect()
}

/// The fixture's answer, or `None` if `name` is no task fixture.
pub fn call(native: &NativeTasks, req: &Req, peer: &dyn Peer, name: &str, args: &Map<String, Value>) -> Option<Answer> {
    let arg = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let answered = |text: String| Answer::Result(tool_result(vec![content::text(&text)]));
    Some(match name {
        "greet" => answered(format!("Hello, {}!", arg("name"))),
        "slow_compute" => {
            let seconds = args.get("seconds").and_then(Value::as_f64).unwrap_or(0.0).clamp(0.0, MAX_SECONDS as f64);
            // Progress 0 first, given a token: a streamed call hears it before it becomes a task.
            if let Some(token) = req.progress_token() {
                let params = json!({"progressToken": token, "progress": 0, "total": seconds, "message": "started"});
                peer.notify(json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}));
            }
            std::thread::sleep(Duration::from_secs_f64(seconds));
            answered(format!("Computed {} in {seconds} s", arg("label")))
        }
        "failing_job" => {
            std::thread::sleep(PAUSE);
            Answer::Result(content::tool_error("The job failed."))
        }
        "protocol_error_job" => {
            std::thread::sleep(PAUSE);
            Answer::error(protocol::INTERNAL_ERROR, "the job crashed")
        }
        "confirm_delete" => confirm_delete(req, peer, &arg("filename")),
        "multi_input" => multi_input(req, peer),
        "test_tool_with_task" => with_task(req, peer),
        NATIVE if takes_tasks(req) => Answer::Result(native.create(args)),
        NATIVE => {
            std::thread::sleep(PAUSE);
            answered(NATIVE_RESULT.to_owned())
        }
        _ => return None,
    })
}

fn first_round(req: &Req) -> bool {
    req.params.get("inputResponses").is_none()
}

fn confirm_delete(req: &Req, peer: &dyn Peer, filename: &str) -> Answer {
    if first_round(req) {
        std::thread::sleep(PAUSE);
    }
    let schema = json!({"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]});
    let ask = Ask::elicit("confirm_delete", &format!("Delete {filename}?"), schema);
    match inputs::gather(req, peer, &[ask], None) {
        Ok(answers) => {
            let confirmed = inputs::accepted(answers.get("confirm_delete"))
                .and_then(|c| c.get("confirm"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let text = if confirmed { format!("Deleted {filename}.") } else { format!("Kept {filename}.") };
            Answer::Result(tool_result(vec![content::text(&text)]))
        }
        Err(answer) => answer,
    }
}

fn multi_input(req: &Req, peer: &dyn Peer) -> Answer {
    if first_round(req) {
        std::thread::sleep(PAUSE);
    }
    let asks = [
        Ask::elicit_string("first_name", "Your first name?", "name"),
        Ask::elicit_string("second_name", "Your second name?", "name"),
    ];
    match inputs::gather(req, peer, &asks, None) {
        Ok(answers) => Answer::Result(tool_result(vec![content::text(&format!("Got {} answers.", answers.len()))])),
        Err(answer) => answer,
    }
}

fn with_task(req: &Req, peer: &dyn Peer) -> Answer {
    match inputs::gather(req, peer, &[Ask::elicit_string("user_name", "What is your name?", "name")], None) {
        Ok(answers) => {
            std::thread::sleep(PAUSE);
            let name = inputs::accepted(answers.get("user_name")).and_then(|c| c.get("name")).and_then(Value::as_str);
            Answer::Result(tool_result(vec![content::text(&format!("Hello, {}!", name.unwrap_or("stranger")))]))
        }
        Err(answer) => answer,
    }
}
