//! `hangar start|stop|restart NAME` and `hangar reload`: one request each, a one-line outcome.

use serde_json::Value;

use crate::client::{Answer, Api, failure, ok, segment};
use crate::error::CliError;

pub fn start(api: &Api, name: &str) -> Result<Answer, CliError> {
    api.post(&format!("/api/mcp_servers/{}/start", segment(name)))
}

pub fn stop(api: &Api, name: &str) -> Result<Answer, CliError> {
    api.post(&format!("/api/mcp_servers/{}/stop", segment(name)))
}

/// `POST /api/config/reload`. A 404 that is not about a reload (the router's `NotFound`, or no
/// envelope at all) means this hangar has no such route.
pub fn reload(api: &Api) -> Result<Answer, CliError> {
    let answer = api.post_raw("/api/config/reload")?;
    if answer.status == 404 {
        let code = answer.body["error"]["code"].as_str();
        if code.is_none() || code == Some("NotFound") {
            return Err(CliError::ReloadUnsupported);
        }
        return Err(failure(answer));
    }
    ok(answer)
}

/// `math: ready (2 tools: add, sub)`
pub fn started(name: &str, body: &Value) -> String {
    let name = body["mcp_server"].as_str().unwrap_or(name);
    let state = body["state"].as_str().unwrap_or("started");
    let tools: Vec<&str> =
        body["tools"].as_array().map(|t| t.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    match tools.len() {
        0 => format!("{name}: {state} (no tools)"),
        1 => format!("{name}: {state} (1 tool: {})", tools.join(", ")),
        n => format!("{name}: {state} ({n} tools: {})", tools.join(", ")),
    }
}

/// `math: stopped (user_request)`
pub fn stopped(name: &str, body: &Value) -> String {
    let name = body["stopped"].as_str().unwrap_or(name);
    match body["reason"].as_str() {
        Some(reason) => format!("{name}: stopped ({reason})"),
        None => format!("{name}: stopped"),
    }
}

/// `reloaded; added: a; removed: b; ...`: each non-empty list in the answer, the known ones first.
pub fn reloaded(body: &Value) -> String {
    const KNOWN: [&str; 4] = ["added", "removed", "changed", "unchanged"];
    let mut line = "reloaded".to_owned();
    let Some(fields) = body.as_object() else { return line };
    let others = fields.keys().map(String::as_str).filter(|key| !KNOWN.contains(key));
    for key in KNOWN.into_iter().chain(others) {
        let Some(items) = fields.get(key).and_then(Value::as_array) else { continue };
        let names: Vec<String> =
            items.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)).collect();
        if !names.is_empty() {
            line.push_str(&format!("; {key}: {}", names.join(", ")));
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::testing::answer_once;
    use hangar_runtime::exit::Sysexit;

    #[test]
    fn outcomes_are_one_line() {
        assert_eq!(
            started("m", &json!({"mcp_server": "m", "state": "ready", "tools": ["add"]})),
            "m: ready (1 tool: add)"
        );
        assert_eq!(
            started("m", &json!({"mcp_server": "m", "state": "ready", "tools": ["a", "b"]})),
            "m: ready (2 tools: a, b)"
        );
        assert_eq!(stopped("m", &json!({"stopped": "m", "reason": "user_request"})), "m: stopped (user_request)");
        assert_eq!(reloaded(&json!({"added": ["x"], "removed": [], "ok": true})), "reloaded; added: x");
        let body = json!({"unchanged": ["k"], "added": ["a"], "changed": ["c"], "removed": ["r"]});
        assert_eq!(reloaded(&body), "reloaded; added: a; removed: r; changed: c; unchanged: k");
    }

    #[test]
    fn a_hangar_without_the_reload_route_is_told_apart() {
        let body = r#"{"error":{"code":"NotFound","message":"no route for POST /api/config/reload","details":null}}"#;
        let (url, server) = answer_once("404 Not Found", body);
        let err = reload(&Api::new(&url, Some("k3y".into()))).unwrap_err();
        assert_eq!(err.to_string(), "this hangar does not support reload");
        assert_eq!(err.exit_code(), 1);
        let head = server.join().unwrap().to_ascii_lowercase();
        assert!(head.starts_with("post /api/config/reload "), "{head}");
        assert!(head.contains("x-api-key: k3y"), "the key is sent: {head}");
    }

    #[test]
    fn a_refused_reload_keeps_the_apis_words() {
        let body = r#"{"error":{"code":"InvalidConfig","message":"hangar.yaml: bad","details":null}}"#;
        let (url, server) = answer_once("400 Bad Request", body);
        let err = reload(&Api::new(&url, None)).unwrap_err();
        assert_eq!(err.to_string(), "hangar.yaml: bad (InvalidConfig)");
        assert!(!server.join().unwrap().to_ascii_lowercase().contains("x-api-key"));
    }
}
