//! The tool catalogue and `tools/call` dispatch. Each fixture lives with its
//! kind: plain content here, notifications in `streaming`, questions for the
//! client in `asking` and `mrtr`.

use serde_json::{Value, json};

use super::content::{self, tool_result};
use super::peer::Peer;
use super::request::{Answer, Req};
use super::{Server, asking, custom_headers, mrtr, streaming, tasks};

/// Served only while `test_trigger_tool_change` has switched it on.
pub const DYNAMIC_TOOL: &str = "test_dynamic_tool";

const NO_ARGS: &str = "no-args";

/// Name, description and input schema (`NO_ARGS` for an empty object) of
/// every fixed tool, in `tools/list` order.
const CATALOGUE: &[(&str, &str, &str)] = &[
    ("test_simple_text", "Returns one text content item.", NO_ARGS),
    ("test_image_content", "Returns a 1x1 PNG image.", NO_ARGS),
    ("test_audio_content", "Returns a short WAV clip.", NO_ARGS),
    ("test_embedded_resource", "Returns an embedded text resource.", NO_ARGS),
    ("test_multiple_content_types", "Returns text, an image and an embedded resource.", NO_ARGS),
    ("test_tool_with_logging", "Sends three info log messages while it runs.", NO_ARGS),
    ("test_logging_tool", "Sends log messages, only when the request asked for a log level.", NO_ARGS),
    ("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100 to the request's progressToken.", NO_ARGS),
    ("test_error_handling", "Always fails with a tool error (isError).", NO_ARGS),
    ("test_sampling", "Asks the client to sample an LLM with the given prompt.", "prompt"),
    ("test_elicitation", "Asks the user, through the client, for a username and an email.", "message"),
    ("test_elicitation_sep1034_defaults", "Elicits a form whose fields all have defaults (SEP-1034).", NO_ARGS),
    ("test_elicitation_sep1330_enums", "Elicits a form with every enum variant (SEP-1330).", NO_ARGS),
    ("test_missing_capability", "Needs the client's sampling capability (-32021 without it).", NO_ARGS),
    ("test_streaming_elicitation", "Asks for input on the response stream of the call.", NO_ARGS),
    ("test_trigger_tool_change", "Adds or removes test_dynamic_tool and announces it.", NO_ARGS),
    ("test_trigger_prompt_change", "Adds or removes test_dynamic_prompt and announces it.", NO_ARGS),
    ("test_input_required_result_elicitation", "input_required: one elicitation.", NO_ARGS),
    ("test_input_required_result_sampling", "input_required: one sampling request.", NO_ARGS),
    ("test_input_required_result_list_roots", "input_required: one roots/list request.", NO_ARGS),
    ("test_input_required_result_request_state", "input_required with a requestState to echo.", NO_ARGS),
    ("test_input_required_result_multiple_inputs", "input_required: elicitation, sampling and roots at once.", NO_ARGS),
    ("test_input_required_result_multi_round", "input_required twice, with a new requestState each round.", NO_ARGS),
    ("test_input_required_result_tampered_state", "input_required with an integrity-protected requestState.", NO_ARGS),
    ("test_input_required_result_capabilities", "Asks only for what the client declared it can answer.", NO_ARGS),
    (TOUCH_RESOURCE, "Tells the subscriptions/listen streams holding `uri` that it changed.", "uri"),
    (JSON_SCHEMA_TOOL, "Has an input schema using JSON Schema 2020-12 keywords.", NO_ARGS),
];

const JSON_SCHEMA_TOOL: &str = "json_schema_2020_12_tool";
/// Sends `notifications/resources/updated` for `uri` on the listens that hold it.
const TOUCH_RESOURCE: &str = "touch_resource";

fn input_schema(name: &str, arg: &str) -> Value {
    match (name, arg) {
        (JSON_SCHEMA_TOOL, _) => json_schema_2020_12(),
        (_, NO_ARGS) => json!({"type": "object", "properties": {}}),
        (_, arg) => json!({
            "type": "object",
            "properties": {arg: {"type": "string"}},
            "required": [arg],
        }),
    }
}

/// The schema the suite's `json-schema-2020-12` scenario expects to arrive
/// unchanged: `$schema`, `$defs` with an `$anchor`, composition and
/// conditional keywords, `additionalProperties: false`.
fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
            },
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"},
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false,
    })
}

/// The `tools/list` result; the same order every time (2026-07-28 asks for
/// a deterministic order).
pub fn list(server: &Server) -> Value {
    let mut tools: Vec<Value> = CATALOGUE
        .iter()
        .map(|(name, description, arg)| {
            json!({"name": name, "description": description, "inputSchema": input_schema(name, arg)})
        })
        .collect();
    tools.push(custom_headers::declaration());
    if server.dynamic_tool() {
        let schema = input_schema(DYNAMIC_TOOL, NO_ARGS);
        tools.push(
            json!({"name": DYNAMIC_TOOL, "description": "Added by test_trigger_tool_change.", "inputSchema": schema}),
        );
    }
    tools.extend(tasks::definitions());
    json!({"tools": tools})
}

pub fn call(server: &Server, req: &Req, peer: &dyn Peer) -> Answer {
    let name = match req.str_param("name") {
        Ok(name) => name,
        Err(e) => return e,
    };
    let args = match req.arguments() {
        Ok(args) => args,
        Err(e) => return e,
    };
    if name == custom_headers::TOOL {
        return custom_headers::call(req, &args);
    }
    if let Some(answer) = tasks::call(&server.native_tasks, req, peer, name, &args) {
        return answer;
    }
    let listed = CATALOGUE.iter().any(|(n, ..)| *n == name) || (name == DYNAMIC_TOOL && server.dynamic_tool());
    if !listed {
        return Answer::invalid(format!("unknown tool: {name}")).with_data(json!({"name": name}));
    }
    if let Some(arg) = CATALOGUE.iter().find(|(n, ..)| *n == name).map(|(_, _, arg)| *arg)
        && arg != NO_ARGS
        && !args.get(arg).is_some_and(Value::is_string)
    {
        return Answer::invalid(format!("argument {arg} must be a string"));
    }
    let arg = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    match name {
        "test_simple_text" => done(vec![content::text(content::SIMPLE_TEXT)]),
        "test_image_content" => done(vec![content::image()]),
        "test_audio_content" => done(vec![content::audio()]),
        "test_embedded_resource" => {
            done(vec![content::resource(content::EMBEDDED_URI, "text/plain", content::EMBEDDED_TEXT)])
        }
        "test_multiple_content_types" => done(vec![
            content::text(content::MIXED_TEXT),
            content::image(),
            content::resource(content::MIXED_URI, "application/json", content::MIXED_JSON),
        ]),
        "test_error_handling" => Answer::Result(content::tool_error(content::ERROR_TEXT)),
        "test_tool_with_logging" | "test_logging_tool" => streaming::with_logging(req, peer),
        "test_tool_with_progress" => streaming::with_progress(req, peer),
        "test_trigger_tool_change" => done(vec![content::text(&server.toggle_tool(peer))]),
        "test_trigger_prompt_change" => done(vec![content::text(&server.toggle_prompt(peer))]),
        "test_sampling" => asking::sampling(req, peer, &arg("prompt")),
        "test_elicitation" => asking::elicitation(req, peer, &arg("message")),
        "test_elicitation_sep1034_defaults" => asking::sep1034_defaults(req, peer),
        "test_elicitation_sep1330_enums" => asking::sep1330_enums(req, peer),
        "test_missing_capability" => asking::missing_capability(req),
        "test_streaming_elicitation" => asking::streaming_elicitation(req, peer),
        JSON_SCHEMA_TOOL => done(vec![content::text(&format!("called with {}", Value::Object(args.clone())))]),
        TOUCH_RESOURCE => {
            let told = server.listens.touch(&arg("uri"), peer);
            done(vec![content::text(&format!("{told} listen(s) told"))])
        }
        DYNAMIC_TOOL => done(vec![content::text("The dynamic tool is here.")]),
        other => mrtr::call(server, req, peer, other),
    }
}

fn done(content: Vec<Value>) -> Answer {
    Answer::Result(tool_result(content))
}

#[cfg(test)]
mod tests {
    use super::super::inputs::tests::ScriptedPeer;
    use super::super::request::tests::modern;
    use super::*;

    fn call_tool(server: &Server, name: &str, args: Value) -> Answer {
        call(server, &modern(json!({"name": name, "arguments": args}), json!({})), &ScriptedPeer::default())
    }

    fn result(answer: Answer) -> Value {
        match answer {
            Answer::Result(v) => v,
            Answer::Error { message, .. } => panic!("unexpected error: {message}"),
        }
    }

    fn names(list: &Value) -> Vec<String> {
        list["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
    }

    #[test]
    fn every_listed_tool_has_a_valid_name_description_and_object_schema() {
        let list = list(&Server::default());
        for tool in list["tools"].as_array().unwrap() {
            let name = tool["name"].as_str().unwrap();
            assert!(name.len() <= 128 && name.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)));
            assert!(!tool["description"].as_str().unwrap().is_empty());
            assert_eq!(tool["inputSchema"]["type"], "object");
        }
        assert_eq!(
            names(&list).len(),
            CATALOGUE.len() + 1 + tasks::definitions().len(),
            "the catalogue, the custom-headers tool and the task fixtures"
        );
    }

    #[test]
    fn content_tools_return_what_the_suite_expects() {
        let s = Server::default();
        let r = result(call_tool(&s, "test_simple_text", json!(null)));
        assert_eq!(r, json!({"content": [{"type": "text", "text": "This is a simple text response for testing."}]}));
        let r = result(call_tool(&s, "test_image_content", json!({})));
        assert_eq!(r["content"][0]["data"], content::PNG_BASE64);
        let r = result(call_tool(&s, "test_audio_content", json!({})));
        assert_eq!(
            (r["content"][0]["type"].as_str(), r["content"][0]["mimeType"].as_str()),
            (Some("audio"), Some("audio/wav"))
        );
        let r = result(call_tool(&s, "test_embedded_resource", json!({})));
        assert_eq!(
            r["content"][0]["resource"],
            json!({"uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."})
        );
        let r = result(call_tool(&s, "test_multiple_content_types", json!({})));
        let types: Vec<&str> = r["content"].as_array().unwrap().iter().map(|c| c["type"].as_str().unwrap()).collect();
        assert_eq!(types, ["text", "image", "resource"]);
        assert_eq!(r["content"][2]["resource"]["text"], r#"{"test":"data","value":123}"#);
    }

    #[test]
    fn error_tool_is_a_tool_error_not_a_protocol_error() {
        let r = result(call_tool(&Server::default(), "test_error_handling", json!({})));
        assert_eq!(r["isError"], true);
        assert_eq!(r["content"][0]["text"], "This tool intentionally returns an error for testing");
    }

    #[test]
    fn unknown_tools_and_bad_arguments_are_invalid_params() {
        let s = Server::default();
        assert!(matches!(call_tool(&s, "nope", json!({})), Answer::Error { code: -32602, .. }));
        assert!(matches!(call_tool(&s, "test_simple_text", json!([1])), Answer::Error { code: -32602, .. }));
        assert!(matches!(call_tool(&s, "test_sampling", json!({})), Answer::Error { code: -32602, .. }));
        assert!(matches!(call_tool(&s, DYNAMIC_TOOL, json!({})), Answer::Error { code: -32602, .. }));
    }

    #[test]
    fn json_schema_tool_keeps_its_2020_12_keywords() {
        let list = list(&Server::default());
        let tool = list["tools"].as_array().unwrap().iter().find(|t| t["name"] == JSON_SCHEMA_TOOL).unwrap();
        let schema = &tool["inputSchema"];
        assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
        assert_eq!(schema["$defs"]["address"]["$anchor"], "addressDef");
        assert_eq!(schema["additionalProperties"], false);
        assert!(schema["allOf"][0]["anyOf"].is_array());
        assert!(schema["if"].is_object() && schema["then"].is_object() && schema["else"].is_object());
    }

    #[test]
    fn trigger_toggles_the_dynamic_tool_and_announces_it() {
        let s = Server::default();
        let peer = ScriptedPeer::default();
        let req = modern(json!({"name": "test_trigger_tool_change"}), json!({}));
        result(call(&s, &req, &peer));
        assert!(names(&list(&s)).contains(&DYNAMIC_TOOL.to_owned()));
        assert!(matches!(call_tool(&s, DYNAMIC_TOOL, json!({})), Answer::Result(_)));
        result(call(&s, &req, &peer));
        assert!(!names(&list(&s)).contains(&DYNAMIC_TOOL.to_owned()));
        let notes = peer.notes.lock().unwrap();
        assert_eq!(notes.len(), 2);
        assert_eq!(notes[0], json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    }
}
