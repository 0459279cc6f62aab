//! The tools the fake serves: their listing entries and their behaviour.

use std::time::Duration;

use serde_json::{Map, Value, json};

/// What a tool call produced, before it is wrapped into an MCP result.
#[derive(Debug, PartialEq)]
pub struct Outcome {
    pub text: String,
    pub structured: Option<Value>,
    pub is_error: bool,
}

impl Outcome {
    fn ok(text: String, structured: Option<Value>) -> Self {
        Self { text, structured, is_error: false }
    }

    fn failed(text: impl Into<String>) -> Self {
        Self { text: text.into(), structured: None, is_error: true }
    }
}

/// The tool that answers its request's `_meta` (see `handler::call`).
pub const ECHO_META: &str = "echo_meta";
/// Asks the hangar's client something (sampling) over stdio, then sleeps (test tool).
pub const ASK_SLEEP: &str = "ask_sleep";

/// Answers with a JSON-RPC error (-32603) whose message and data are its arguments'.
pub const RPC_ERROR: &str = "rpc_error";

/// `{"_meta": ...}` as the request carried it (`null` without one).
pub fn echo_meta(meta: Option<&Value>) -> Outcome {
    let value = json!({"_meta": meta.cloned().unwrap_or(Value::Null)});
    Outcome::ok(value.to_string(), Some(value))
}

/// The `tools/list` entry for a tool name.
pub fn spec(name: &str) -> Value {
    let (description, schema) = match name {
        "add" => (
            "Adds two numbers and returns their sum.",
            json!({
                "type": "object",
                "properties": {
                    "a": {"type": "number", "description": "First addend."},
                    "b": {"type": "number", "description": "Second addend."}
                },
                "required": ["a", "b"]
            }),
        ),
        "echo" => (
            "Returns its arguments unchanged.",
            json!({"type": "object", "properties": {}, "additionalProperties": true}),
        ),
        "sleep" => (
            "Waits for the given number of milliseconds, then returns.",
            json!({
                "type": "object",
                "properties": {
                    "ms": {"type": "integer", "minimum": 0, "description": "How long to sleep."}
                },
                "required": ["ms"]
            }),
        ),
        ASK_SLEEP => (
            "After `after_ms`, sends the hangar a sampling/createMessage request, then sleeps `ms` (stdio only).",
            json!({"type": "object", "properties": {
                "ms": {"type": "integer", "minimum": 0},
                "after_ms": {"type": "integer", "minimum": 0},
            }, "required": ["ms"]}),
        ),
        "fail" => ("Always returns a tool error.", json!({"type": "object", "properties": {}})),
        "huge" => (
            "Answers with a text of `bytes` characters (to test over-long answers).",
            json!({"type": "object", "properties": {"bytes": {"type": "integer", "minimum": 0}}, "required": ["bytes"]}),
        ),
        ECHO_META => ("Returns the `_meta` its request carried (test tool).", json!({"type": "object"})),
        RPC_ERROR => (
            "Answers with a JSON-RPC error carrying `code` (default -32603), `message` and `data` as given; over \
             stdio, then sends `then_notify` ({method, params}) as a notification, if given (test tool).",
            json!({"type": "object", "properties": {
                "code": {"type": "integer"}, "message": {"type": "string"}, "data": {}, "then_notify": {"type": "object"},
            }}),
        ),
        "junk_line" => (
            "Prints a junk line of `bytes` bytes (the sentinel, repeated) on stdout, then answers (stdio only).",
            json!({"type": "object", "properties": {"bytes": {"type": "integer", "minimum": 0}}, "required": ["bytes"]}),
        ),
        _ => ("Returns its arguments unchanged (test tool).", json!({"type": "object"})),
    };
    json!({"name": name, "description": description, "inputSchema": schema})
}

/// Runs a tool. `sleep` blocks the calling thread, so callers run it off the
/// reader thread.
pub fn call(name: &str, args: &Map<String, Value>) -> Outcome {
    match name {
        "add" => add(args),
        "sleep" | ASK_SLEEP => sleep(args),
        "fail" => Outcome::failed("tool failed as asked"),
        "huge" => {
            // Capped so a typo cannot exhaust the test machine's memory.
            let bytes = args.get("bytes").and_then(Value::as_u64).unwrap_or(0).min(64 << 20);
            Outcome::ok("x".repeat(usize::try_from(bytes).unwrap_or(0)), None)
        }
        "junk_line" => Outcome::ok(format!("printed a {}-byte junk line", junk_bytes(args)), None),
        _ => echo(args),
    }
}

/// The length `junk_line` prints, capped like `huge`'s.
pub fn junk_bytes(args: &Map<String, Value>) -> usize {
    usize::try_from(args.get("bytes").and_then(Value::as_u64).unwrap_or(0).min(64 << 20)).unwrap_or(0)
}

/// A `junk_line` line: `bytes` bytes of the sentinel repeated (not JSON), then a newline.
pub fn junk_line(bytes: usize, sentinel: &str) -> Vec<u8> {
    let mut line: Vec<u8> = sentinel.bytes().cycle().take(bytes).collect();
    line.push(b'\n');
    line
}

fn echo(args: &Map<String, Value>) -> Outcome {
    let value = Value::Object(args.clone());
    Outcome::ok(value.to_string(), Some(value))
}

fn add(args: &Map<String, Value>) -> Outcome {
    let mut nums = Vec::with_capacity(2);
    for key in ["a", "b"] {
        match args.get(key) {
            Some(Value::Number(n)) => nums.push(n),
            Some(_) => return Outcome::failed(format!("argument '{key}' must be a number")),
            None => return Outcome::failed(format!("argument '{key}' is missing")),
        }
    }
    let (a, b) = (nums[0], nums[1]);
    // Integers stay integers so 2+3 prints "5", not "5.0".
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64())
        && let Some(sum) = x.checked_add(y)
    {
        return Outcome::ok(sum.to_string(), Some(json!({"result": sum})));
    }
    let sum = a.as_f64().unwrap_or(f64::NAN) + b.as_f64().unwrap_or(f64::NAN);
    if !sum.is_finite() {
        return Outcome::failed("the sum is not a finite number");
    }
    Outcome::ok(sum.to_string(), Some(json!({"result": sum})))
}

fn sleep(args: &Map<String, Value>) -> Outcome {
    let Some(ms) = args.get("ms").and_then(Value::as_u64) else {
        return Outcome::failed("argument 'ms' must be a non-negative integer");
    };
    std::thread::sleep(Duration::from_millis(ms));
    Outcome::ok(format!("slept {ms} ms"), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn add_formats_integers_and_floats() {
        assert_eq!(call("add", &args(json!({"a": 2, "b": 3}))).text, "5");
        assert_eq!(call("add", &args(json!({"a": 2.5, "b": 3}))).text, "5.5");
        let out = call("add", &args(json!({"a": 1})));
        assert!(out.is_error);
        assert!(out.text.contains("'b'"));
    }

    #[test]
    fn unknown_names_echo() {
        let out = call("exfiltrate", &args(json!({"x": 1})));
        assert_eq!(out.text, r#"{"x":1}"#);
        assert_eq!(out.structured, Some(json!({"x": 1})));
    }

    #[test]
    fn sleep_and_fail() {
        assert_eq!(call("sleep", &args(json!({"ms": 1}))).text, "slept 1 ms");
        let out = call("fail", &Map::new());
        assert!(out.is_error);
        assert_eq!(out.text, "tool failed as asked");
    }
}
