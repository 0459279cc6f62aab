#![allow(clippy::unwrap_used)]

use hangar_core::batch::{tool_result, with_upstream_blocks};
use serde_json::json;

use super::*;

/// The bytes `write_rendered` writes for `result`, and the bytes `Answer` serializes to.
fn both(id: Value, result: Value) -> (String, String) {
    let answer = Answer { id: Id::from(id), outcome: Ok(result) };
    let Ok(Value::Object(map)) = &answer.outcome else { panic!("not an object") };
    let mut rendered = Vec::new();
    write_rendered(&mut rendered, &answer.id, map).unwrap();
    (String::from_utf8(rendered).unwrap(), serde_json::to_string(&answer).unwrap())
}

/// As the 2026-07-28 era finishes a result: `resultType` and `_meta` beside the tool's keys.
fn finished(mut result: Value) -> Value {
    result["resultType"] = json!("complete");
    result["_meta"] = json!({"io.modelcontextprotocol/serverInfo": {"name": "hangar", "version": "0"}});
    result
}

#[test]
fn a_hangar_call_answer_is_written_byte_for_byte_as_serialized() {
    let report = json!({
        "batch_id": "b1", "elapsed_ms": 3, "failed": 0, "succeeded": 2, "success": true, "total": 2,
        "results": [
            {"index": 0, "call_id": "c0", "success": true, "error": null, "error_type": null, "elapsed_ms": 1,
             "result": {"content": [{"type": "text", "text": "{\"text\":\"hé \\\"quoted\\\"\\n\"}"}],
                        "structuredContent": {"text": "hé \"quoted\"\n"}, "isError": false}},
            {"index": 1, "call_id": "c1", "success": true, "error": null, "error_type": null, "elapsed_ms": 2,
             "result": {"content": [{"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}], "isError": false}},
        ],
    });
    let result = finished(with_upstream_blocks(report));
    assert_eq!(result["content"].as_array().unwrap().len(), 3, "the report, then the calls' two blocks");
    let (rendered, serialized) = both(json!(7), result);
    assert_eq!(rendered, serialized);
}

#[test]
fn a_failed_hangar_tool_and_string_ids_are_written_as_serialized() {
    let failed = tool_result(json!({"error": "nope", "error_type": "forbidden", "details": null}), true);
    let (rendered, serialized) = both(json!("req-1"), finished(failed));
    assert_eq!(rendered, serialized);
}

#[test]
fn without_a_text_block_the_structured_copy_is_serialized() {
    let result = json!({"content": [], "structuredContent": {"a": [1, 2.5, null]}, "isError": false});
    let (rendered, serialized) = both(json!(1), result);
    assert_eq!(rendered, serialized);
}
