//! `hangar_call`'s batch as data: what it asks ([`BatchSpec`], which crosses the control socket
//! when the supervisor runs the batch as a task), what it reports ([`BatchReport`]), and the
//! `tools/call` result that carries the report ([`tool_result`], [`with_upstream_blocks`]).
//! Pure: the API and the supervisor run the calls (`hangar_runtime::batch`) and draw the ids.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ipc_error::{ErrorKind, IpcError};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchSpec {
    pub calls: Vec<CallSpec>,
    pub max_concurrency: usize,
    pub fail_fast: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallSpec {
    pub mcp_server: String,
    pub tool: String,
    pub arguments: Value,
    pub timeout_ms: u64,
}

#[derive(Debug, Serialize)]
pub struct BatchReport {
    pub batch_id: String,
    pub success: bool,
    pub total: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub elapsed_ms: u64,
    pub results: Vec<CallReport>,
}

#[derive(Debug, Serialize)]
pub struct CallReport {
    pub index: usize,
    pub call_id: String,
    pub success: bool,
    /// The upstream's own `tools/call` result, verbatim; null on failure.
    pub result: Value,
    pub error: Option<String>,
    pub error_type: Option<&'static str>,
    pub elapsed_ms: u64,
}

impl BatchReport {
    /// The report of `results` (in index order), counted.
    pub fn of(batch_id: String, elapsed_ms: u64, results: Vec<CallReport>) -> BatchReport {
        let total = results.len();
        let succeeded = results.iter().filter(|r| r.success).count();
        BatchReport {
            batch_id,
            success: succeeded == total,
            total,
            succeeded,
            failed: total - succeeded,
            elapsed_ms,
            results,
        }
    }

    /// The report as JSON. `serde_json::to_value` would deep-copy every upstream result (a cost
    /// proportional to their size), so the results are taken out first and moved back in.
    pub fn into_value(mut self) -> Value {
        let results: Vec<Value> = self.results.iter_mut().map(|r| std::mem::take(&mut r.result)).collect();
        // Cannot fail: every field serializes and every key is a string.
        let mut value = serde_json::to_value(&self).unwrap_or_default();
        if let Some(slots) = value.get_mut("results").and_then(Value::as_array_mut) {
            for (slot, result) in slots.iter_mut().zip(results) {
                slot["result"] = result;
            }
        }
        value
    }
}

impl CallReport {
    pub fn succeeded(index: usize, call_id: String, result: Value, elapsed_ms: u64) -> Self {
        CallReport { index, call_id, success: true, result, error: None, error_type: None, elapsed_ms }
    }

    pub fn failed(index: usize, call_id: String, err: &IpcError, elapsed_ms: u64) -> Self {
        CallReport {
            index,
            call_id,
            success: false,
            result: Value::Null,
            error: Some(err.message.clone()),
            error_type: Some(err.kind.as_str()),
            elapsed_ms,
        }
    }

    /// A call `fail_fast` kept from starting.
    pub fn cancelled(index: usize, call_id: String) -> Self {
        CallReport {
            index,
            call_id,
            success: false,
            result: Value::Null,
            error: Some("not started: an earlier call in the batch failed and fail_fast is set".into()),
            error_type: Some("cancelled"),
            elapsed_ms: 0,
        }
    }

    /// A call whose task ended without a report (it panicked): never expected, still reported.
    pub fn lost(index: usize, call_id: String) -> Self {
        let err = IpcError::new(ErrorKind::Internal, "the call ended without a result");
        CallReport::failed(index, call_id, &err, 0)
    }
}

/// The same JSON as text (for clients that read only text) and as structured content: the
/// result of every `hangar_*` tool.
pub fn tool_result(value: Value, is_error: bool) -> Value {
    // serde_json::to_string writes straight into a buffer; `Value`'s Display goes through
    // fmt::Formatter a piece at a time, several times slower.
    let text = serde_json::to_string(&value).unwrap_or_default();
    let text = Map::from_iter([("type".to_owned(), Value::from("text")), ("text".to_owned(), Value::String(text))]);
    Value::Object(Map::from_iter([
        ("content".to_owned(), Value::Array(vec![Value::Object(text)])),
        ("structuredContent".to_owned(), value),
        ("isError".to_owned(), Value::Bool(is_error)),
    ]))
}

/// The most content blocks of upstream results a `hangar_call` result carries besides its report.
pub const MAX_UPSTREAM_BLOCKS: usize = 64;
/// The most bytes of text and encoded data those blocks hold together.
pub const MAX_UPSTREAM_BLOCK_BYTES: usize = 8 << 20;
/// The content block types of MCP (2025-06-18 and later), which a client can render.
const BLOCK_TYPES: [&str; 5] = ["text", "image", "audio", "resource", "resource_link"];

/// `hangar_call`'s result: the report (text and structured), then the calls' own content blocks.
/// A failed call is in the report, so the result itself is no error.
///
/// A block that is not text (an image, audio, a resource or a link to one) appears once, as its
/// own block after the report: in the report it is replaced by a reference,
/// `{"type", "mimeType"?, "content_index": N}`, N being its place in the result's `content`.
/// So an image's base64 is carried once, not three times (the report's text, its structured
/// copy and the block).
pub fn with_upstream_blocks(mut report: Value) -> Value {
    let blocks = upstream_blocks(&mut report);
    let mut result = tool_result(report, false);
    if let Some(Value::Array(content)) = result.get_mut("content") {
        content.extend(blocks);
    }
    result
}

/// The successful calls' own content blocks, in call order, after the report: an image stays an
/// image a model can see, not escaped JSON inside the report's text. Bounded in count and size; a
/// block of a type MCP does not define, or past the bounds, stays only in the report. Each block
/// taken that is not text is replaced in `report` by its reference.
fn upstream_blocks(report: &mut Value) -> Vec<Value> {
    let results = report.get_mut("results").and_then(Value::as_array_mut).map(Vec::as_mut_slice).unwrap_or_default();
    let blocks = results
        .iter_mut()
        .filter_map(|r| r.pointer_mut("/result/content").and_then(Value::as_array_mut))
        .flatten()
        .filter(|b| b.get("type").and_then(Value::as_str).is_some_and(|t| BLOCK_TYPES.contains(&t)));
    let mut bytes = 0usize;
    let mut out = Vec::new();
    for block in blocks {
        let size = block_bytes(block);
        if out.len() == MAX_UPSTREAM_BLOCKS || bytes.saturating_add(size) > MAX_UPSTREAM_BLOCK_BYTES {
            break;
        }
        bytes += size;
        if block.get("type").and_then(Value::as_str) == Some("text") {
            out.push(block.clone());
            continue;
        }
        // The report's own text is the result's first block.
        let mut reference = Map::from_iter([
            ("type".to_owned(), block["type"].clone()),
            ("content_index".to_owned(), Value::from(out.len() + 1)),
        ]);
        if let Some(mime) = block.get("mimeType") {
            reference.insert("mimeType".to_owned(), mime.clone());
        }
        out.push(std::mem::replace(block, Value::Object(reference)));
    }
    out
}

/// A block's bulk: its text, encoded data or embedded resource's text or blob.
fn block_bytes(block: &Value) -> usize {
    let len = |v: Option<&Value>| v.and_then(Value::as_str).map_or(0, str::len);
    let resource = block.get("resource");
    len(block.get("text"))
        + len(block.get("data"))
        + len(resource.and_then(|r| r.get("text")))
        + len(resource.and_then(|r| r.get("blob")))
        + len(block.get("uri"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_report_counts_its_calls_and_keeps_results_verbatim() {
        let err = IpcError::new(ErrorKind::UpstreamError, "the upstream answered with an error");
        let results = vec![
            CallReport::succeeded(0, "a".into(), json!({"content": [{"type": "text", "text": "5"}]}), 3),
            CallReport::failed(1, "b".into(), &err, 4),
            CallReport::cancelled(2, "c".into()),
        ];
        let value = BatchReport::of("batch".into(), 9, results).into_value();
        assert_eq!(
            (value["total"].clone(), value["succeeded"].clone(), value["failed"].clone()),
            (json!(3), json!(1), json!(2))
        );
        assert_eq!(value["success"], false);
        assert_eq!(value["results"][0]["result"]["content"][0]["text"], "5");
        assert_eq!(value["results"][1]["error_type"], "upstream_error");
        assert_eq!(value["results"][2]["error_type"], "cancelled");
    }

    #[test]
    fn hangar_call_carries_upstream_blocks_after_the_report_within_bounds() {
        let image = json!({"type": "image", "data": "iVBOR", "mimeType": "image/png"});
        let report = json!({"results": [
            {"result": {"content": [{"type": "text", "text": "hi"}, image.clone(), {"type": "mystery", "x": 1}]}},
            {"result": null},
            {"result": {"content": [{"type": "resource_link", "uri": "file:///a", "name": "a"}]}},
        ]});
        let result = with_upstream_blocks(report.clone());
        let content = result["content"].as_array().unwrap();
        let types: Vec<&str> = content.iter().map(|b| b["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["text", "text", "image", "resource_link"], "the report, then the calls' blocks in order");
        assert_eq!(content[2], image, "the image, whole, as its own block");
        let structured = &result["structuredContent"];
        assert_eq!(structured["results"][0]["result"]["content"][0]["text"], "hi", "text stays in the report");
        assert_eq!(
            structured["results"][0]["result"]["content"][1],
            json!({"type": "image", "mimeType": "image/png", "content_index": 2}),
            "the report refers to the image by its place"
        );
        assert_eq!(
            structured["results"][2]["result"]["content"][0],
            json!({"type": "resource_link", "content_index": 3})
        );
        assert_eq!(result.to_string().matches("iVBOR").count(), 1, "the image's data is carried once");

        let many: Vec<Value> = (0..200).map(|i| json!({"type": "text", "text": i.to_string()})).collect();
        let blocks = upstream_blocks(&mut json!({"results": [{"result": {"content": many}}]}));
        assert_eq!(blocks.len(), MAX_UPSTREAM_BLOCKS);
        let huge = json!({"type": "image", "data": "A".repeat(MAX_UPSTREAM_BLOCK_BYTES), "mimeType": "image/png"});
        let mut report = json!({"results": [{"result": {"content": [image, huge.clone()]}}]});
        let blocks = upstream_blocks(&mut report);
        assert_eq!(blocks.len(), 1, "a block past the size bound stays only in the report");
        assert_eq!(report["results"][0]["result"]["content"][1], huge);
    }

    #[test]
    fn a_spec_crosses_the_socket_unchanged() {
        let spec = BatchSpec {
            calls: vec![CallSpec {
                mcp_server: "m".into(),
                tool: "t".into(),
                arguments: json!({"a": 1}),
                timeout_ms: 5,
            }],
            max_concurrency: 2,
            fail_fast: true,
        };
        let wire = serde_json::to_string(&spec).unwrap_or_default();
        assert_eq!(serde_json::from_str::<BatchSpec>(&wire).ok(), Some(spec));
    }
}
