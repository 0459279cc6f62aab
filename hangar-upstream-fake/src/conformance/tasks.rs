//! The tasks extension's fixtures (SEP-2663 scenarios of the suite): `greet` (never a task),
//! `slow_compute`, `failing_job`, `protocol_error_job`, `confirm_delete`, `multi_input` and
//! `test_tool_with_task`. This server knows nothing of tasks itself: it declares which tools
//! take them (`execution.taskSupport`) and takes its time, and the gateway in front of it makes
//! the tasks. A slow fixture answers after a pause longer than a gateway's shortcut.

use std::time::Duration;

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
];

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
pub fn call(req: &Req, peer: &dyn Peer, name: &str, args: &Map<String, Value>) -> Option<Answer> {
    let arg = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    let answered = |text: String| Answer::Result(tool_result(vec![content::text(&text)]));
    Some(match name {
        "greet" => answered(format!("Hello, {}!", arg("name"))),
        "slow_compute" => {
            let seconds = args.get("seconds").and_then(Value::as_f64).unwrap_or(0.0).clamp(0.0, MAX_SECONDS as f64);
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
