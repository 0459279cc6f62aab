//! MCP over streamable HTTP, as far as a load generator needs it: pre-encoded `tools/call`
//! requests for both wires, the legacy handshake, and judging every answer.

use anyhow::{Context, bail};
use bytes::Bytes;
use hyper::Method;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderName, HeaderValue};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use crate::http::{Answer, Conn, Endpoint, snippet};

pub const MODERN: &str = "2026-07-28";
/// What the legacy handshake offers; the server may answer with an older revision.
pub const LEGACY_OFFER: &str = "2025-11-25";
const SESSION: &str = "mcp-session-id";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Wire {
    /// 2026-07-28: stateless, `_meta` in every request, mirrored in headers.
    Modern,
    /// 2025-11-25 / 2025-06-18: `initialize`, then a session.
    Legacy,
}

/// How an answer is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// A `hangar_call` result: also `success: false` and a failed inner call count as errors.
    HangarCall,
    /// Any other tool: a JSON-RPC error or `isError: true`.
    Tool,
}

/// What a request proves its caller with.
#[derive(Debug, Clone)]
pub enum Credential {
    /// An API key, sent in both spellings the hangar (and the Python mcp-hangar) accept.
    ApiKey(String),
    /// An OAuth access token, as `Authorization: Bearer` only: the hangar reads `X-API-Key`
    /// first and as a key, so a token sent there too would be refused.
    Bearer(String),
}

/// Headers every request to the endpoint carries.
pub fn base_headers(credential: Option<&Credential>) -> anyhow::Result<Vec<(HeaderName, HeaderValue)>> {
    let mut headers = vec![
        (CONTENT_TYPE, HeaderValue::from_static("application/json")),
        (ACCEPT, HeaderValue::from_static("application/json, text/event-stream")),
    ];
    match credential {
        Some(Credential::ApiKey(key)) => {
            headers.push((HeaderName::from_static("x-api-key"), HeaderValue::from_str(key)?));
            headers.push((AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {key}"))?));
        }
        Some(Credential::Bearer(token)) => {
            headers.push((AUTHORIZATION, HeaderValue::from_str(&format!("Bearer {token}"))?));
        }
        None => {}
    }
    Ok(headers)
}

/// One `tools/call`, encoded once.
#[derive(Debug, Clone)]
pub struct Call {
    /// The whole body with id 1: the modern wire is stateless, so one id serves every request.
    full: Bytes,
    /// The body around its id, for the legacy wire, whose sessions see distinct ids.
    prefix: Bytes,
    suffix: Bytes,
    /// The per-call headers of the modern wire (`Mcp-Method`, `Mcp-Name`, version).
    pub modern_headers: Vec<(HeaderName, HeaderValue)>,
}

impl Call {
    /// `tools/call name(arguments)` for `wire`.
    pub fn new(wire: Wire, name: &str, arguments: &Value) -> anyhow::Result<Call> {
        Call::declaring(wire, name, arguments, false)
    }

    /// [`Call::new`]; with `takes_tasks`, a modern call's client declares the tasks extension
    /// (SEP-2663), so the front door may make it a task.
    pub fn declaring(wire: Wire, name: &str, arguments: &Value, takes_tasks: bool) -> anyhow::Result<Call> {
        let mut params = json!({"name": name, "arguments": arguments});
        if wire == Wire::Modern {
            params["_meta"] = modern_meta();
            if takes_tasks {
                params["_meta"]["io.modelcontextprotocol/clientCapabilities"] =
                    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
            }
        }
        // Serialized with a placeholder id, then split around it: the rest never changes.
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": params}).to_string();
        let Some((prefix, suffix)) = body.split_once("\"id\":0") else { bail!("cannot place the id in {body}") };
        let prefix = format!("{prefix}\"id\":");
        let full = Bytes::from(format!("{prefix}1{suffix}"));
        let modern_headers = vec![
            (HeaderName::from_static("mcp-protocol-version"), HeaderValue::from_static(MODERN)),
            (HeaderName::from_static("mcp-method"), HeaderValue::from_static("tools/call")),
            (
                HeaderName::from_static("mcp-name"),
                HeaderValue::from_str(name).with_context(|| format!("tool name {name:?} is not a header value"))?,
            ),
        ];
        Ok(Call { full, prefix: Bytes::from(prefix), suffix: Bytes::from(suffix.to_owned()), modern_headers })
    }

    /// The body with id 1.
    pub fn body(&self) -> Bytes {
        self.full.clone()
    }

    /// The body with `id`: one small copy (only the legacy wire needs distinct ids).
    pub fn body_with_id(&self, id: u64) -> Bytes {
        let id = id.to_string();
        let mut body = Vec::with_capacity(self.prefix.len() + id.len() + self.suffix.len());
        body.extend_from_slice(&self.prefix);
        body.extend_from_slice(id.as_bytes());
        body.extend_from_slice(&self.suffix);
        Bytes::from(body)
    }
}

/// The `_meta` every 2026-07-28 request carries.
pub fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "hangar-bench", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// A modern request's body and headers, for one-off calls (`hangar_list`, readiness checks).
pub fn modern_tool_call(name: &str, arguments: &Value) -> anyhow::Result<(Bytes, Vec<(HeaderName, HeaderValue)>)> {
    let call = Call::new(Wire::Modern, name, arguments)?;
    Ok((call.body(), call.modern_headers))
}

/// A legacy session: its id (if the server minted one) and the negotiated revision.
#[derive(Debug, Clone)]
pub struct Session {
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// `initialize` and `notifications/initialized` on `conn`.
pub async fn legacy_handshake(
    conn: &mut Conn,
    endpoint: &Endpoint,
    base: &[(HeaderName, HeaderValue)],
) -> anyhow::Result<Session> {
    let init = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": LEGACY_OFFER,
            "capabilities": {},
            "clientInfo": {"name": "hangar-bench", "version": env!("CARGO_PKG_VERSION")},
        },
    });
    let answer = conn.send(Method::POST, &endpoint.path, base, Bytes::from(init.to_string())).await?;
    if answer.status() != 200 {
        bail!("initialize answered HTTP {}: {}", answer.status(), snippet(&answer.body));
    }
    let response = extract_response(&answer).context("initialize")?;
    if let Some(error) = response.get("error") {
        bail!("initialize answered a JSON-RPC error: {error}");
    }
    let version = response.pointer("/result/protocolVersion").and_then(Value::as_str).unwrap_or(LEGACY_OFFER);
    let mut headers = vec![(HeaderName::from_static("mcp-protocol-version"), HeaderValue::from_str(version)?)];
    if let Some(session) = answer.header(SESSION) {
        headers.push((HeaderName::from_static(SESSION), HeaderValue::from_str(session)?));
    }
    let all: Vec<_> = base.iter().chain(&headers).cloned().collect();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let answer = conn.send(Method::POST, &endpoint.path, &all, Bytes::from(initialized.to_string())).await?;
    if !(200..300).contains(&answer.status()) {
        bail!("notifications/initialized answered HTTP {}: {}", answer.status(), snippet(&answer.body));
    }
    Ok(Session { headers })
}

/// The JSON-RPC response in an answer: the body itself, or the event of an event stream that
/// carries a result or an error (notifications before it are skipped).
pub fn extract_response(answer: &Answer) -> anyhow::Result<Value> {
    let is_stream = answer.header("content-type").is_some_and(|t| t.trim_start().starts_with("text/event-stream"));
    if !is_stream {
        return answer.json();
    }
    let text = std::str::from_utf8(&answer.body).context("the event stream is not UTF-8")?;
    let mut data = String::new();
    // A trailing blank line ends the last event even when the stream lacks one.
    for line in text.lines().chain(std::iter::once("")) {
        if let Some(rest) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
        } else if line.is_empty() && !data.is_empty() {
            if let Ok(message) = serde_json::from_str::<Value>(&data)
                && (message.get("result").is_some() || message.get("error").is_some())
            {
                return Ok(message);
            }
            data.clear();
        }
    }
    bail!("the event stream carried no response: {}", snippet(&answer.body))
}

/// Whether an HTTP answer to a `tools/call` is a success; the reason if not.
pub fn judge(answer: &Answer, check: Check) -> Result<(), String> {
    if answer.status() != 200 {
        return Err(format!("HTTP {}: {}", answer.status(), snippet(&answer.body)));
    }
    let is_json = answer.header("content-type").is_some_and(|t| t.trim_start().starts_with("application/json"));
    if is_json && plainly_ok(&answer.body, check) {
        return Ok(());
    }
    let response = extract_response(answer).map_err(|e| format!("{e:#}"))?;
    judge_response(&response, check)
}

/// The fields a success is judged by, read without building the whole document (everything
/// else is skipped): the common case costs the load generator as little as possible.
#[derive(Deserialize)]
struct Envelope<S> {
    error: Option<IgnoredAny>,
    result: Option<ToolResult<S>>,
}

#[derive(Deserialize)]
struct ToolResult<S> {
    #[serde(rename = "isError")]
    is_error: Option<bool>,
    #[serde(rename = "structuredContent")]
    structured: Option<S>,
}

#[derive(Deserialize)]
struct Batch {
    success: Option<bool>,
    #[serde(default)]
    results: Vec<BatchEntry>,
}

#[derive(Deserialize)]
struct BatchEntry {
    result: Option<ToolResult<IgnoredAny>>,
}

/// True only when the body is plainly a success; anything else (an error, an event stream, a
/// shape it does not know) goes to the full [`judge_response`], which also says why.
fn plainly_ok(body: &[u8], check: Check) -> bool {
    match check {
        Check::Tool => match serde_json::from_slice::<Envelope<IgnoredAny>>(body) {
            Ok(Envelope { error: None, result: Some(result) }) => result.is_error != Some(true),
            _ => false,
        },
        Check::HangarCall => match serde_json::from_slice::<Envelope<Batch>>(body) {
            Ok(Envelope { error: None, result: Some(ToolResult { is_error, structured: Some(batch) }) }) => {
                is_error != Some(true)
                    && batch.success == Some(true)
                    && batch.results.iter().all(|r| r.result.as_ref().is_none_or(|r| r.is_error != Some(true)))
            }
            _ => false,
        },
    }
}

/// Whether a JSON-RPC response to a `tools/call` is a success; the reason if not.
pub fn judge_response(response: &Value, check: Check) -> Result<(), String> {
    if let Some(error) = response.get("error") {
        return Err(format!("JSON-RPC error: {error}"));
    }
    let Some(result) = response.get("result") else {
        return Err(format!("neither result nor error: {}", snippet(response.to_string().as_bytes())));
    };
    if result.get("isError") == Some(&Value::Bool(true)) {
        return Err(format!("isError: true: {}", snippet(result.to_string().as_bytes())));
    }
    if check == Check::HangarCall {
        let Some(report) = batch_report(result) else {
            return Err(format!("hangar_call result without `success`: {}", snippet(result.to_string().as_bytes())));
        };
        let inner_failed = report
            .get("results")
            .and_then(Value::as_array)
            .is_some_and(|results| results.iter().any(|r| r.pointer("/result/isError") == Some(&Value::Bool(true))));
        if report.get("success") != Some(&Value::Bool(true)) || inner_failed {
            return Err(format!("hangar_call failed: {}", snippet(report.to_string().as_bytes())));
        }
    }
    Ok(())
}

/// The batch report of a `hangar_call` result: its `structuredContent`, else its text parsed as
/// JSON; unwrapped once more if an implementation nests it under `result`.
fn batch_report(result: &Value) -> Option<Value> {
    let structured = result.get("structuredContent").cloned().or_else(|| {
        let text = result.pointer("/content/0/text")?.as_str()?;
        serde_json::from_str::<Value>(text).ok()
    })?;
    if structured.get("success").is_some() {
        return Some(structured);
    }
    structured.get("result").filter(|r| r.get("success").is_some()).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_spliced_into_the_encoded_body() {
        let call = Call::new(Wire::Legacy, "echo", &json!({"text": "hi"})).unwrap();
        let body: Value = serde_json::from_slice(&call.body_with_id(42)).unwrap();
        assert_eq!(body["id"], 42);
        assert_eq!(body["params"]["arguments"]["text"], "hi");
        assert!(body["params"].get("_meta").is_none());
        let modern = Call::new(Wire::Modern, "hangar_call", &json!({})).unwrap();
        let body: Value = serde_json::from_slice(&modern.body()).unwrap();
        assert_eq!(body["id"], 1);
        assert_eq!(body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], MODERN);
    }

    fn answer(content_type: &str, body: &str) -> Answer {
        let parts = hyper::Response::builder().header("content-type", content_type).body(()).unwrap().into_parts().0;
        Answer { parts, body: Bytes::from(body.to_owned()) }
    }

    #[test]
    fn finds_the_response_in_an_event_stream() {
        let stream = "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\r\n\r\n\
                      event: message\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"id\":3,\"result\":{}}\n";
        let response = extract_response(&answer("text/event-stream", stream)).unwrap();
        assert_eq!(response["id"], 3);
        let plain = extract_response(&answer("application/json", r#"{"id":1,"error":{}}"#)).unwrap();
        assert_eq!(plain["id"], 1);
        assert!(extract_response(&answer("text/event-stream", "data: {\"method\":\"x\"}\n\n")).is_err());
    }

    #[test]
    fn judges_hangar_call_reports() {
        let ok = json!({"result": {"isError": false, "structuredContent": {"success": true, "results": [
            {"success": true, "result": {"isError": false}}]}}});
        assert_eq!(judge_response(&ok, Check::HangarCall), Ok(()));
        let failed = json!({"result": {"content": [{"type": "text", "text": "{\"success\": false}"}]}});
        assert!(judge_response(&failed, Check::HangarCall).is_err());
        let inner = json!({"result": {"structuredContent": {"success": true, "results": [
            {"success": true, "result": {"isError": true}}]}}});
        assert!(judge_response(&inner, Check::HangarCall).is_err());
        assert!(judge_response(&json!({"error": {"code": -32602}}), Check::Tool).is_err());
        assert!(judge_response(&json!({"result": {"isError": true}}), Check::Tool).is_err());
        assert_eq!(judge_response(&json!({"result": {"content": []}}), Check::Tool), Ok(()));
    }

    #[test]
    fn the_fast_path_only_passes_plain_successes() {
        let ok = |v: Value, check| plainly_ok(v.to_string().as_bytes(), check);
        let batch = |success: bool, inner_error: bool| {
            json!({"jsonrpc": "2.0", "id": 1, "result": {"isError": false, "content": [], "structuredContent": {
                "success": success, "results": [{"success": success, "result": {"isError": inner_error}}]}}})
        };
        assert!(ok(batch(true, false), Check::HangarCall));
        assert!(!ok(batch(false, false), Check::HangarCall));
        assert!(!ok(batch(true, true), Check::HangarCall));
        assert!(!ok(json!({"result": {"content": [{"type": "text", "text": "{}"}]}}), Check::HangarCall));
        assert!(ok(json!({"result": {"content": [], "structuredContent": [1]}}), Check::Tool));
        assert!(!ok(json!({"result": {"isError": true}}), Check::Tool));
        assert!(!ok(json!({"error": {"code": 1}}), Check::Tool));
        assert!(!ok(json!({"id": 1}), Check::Tool));
    }
}
