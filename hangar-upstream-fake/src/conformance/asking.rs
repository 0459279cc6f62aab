//! Tool fixtures that need something from the client: an LLM sample or the
//! user's input. Written once over `inputs::gather`, so on the legacy wire
//! they send the request themselves and on 2026-07-28 they answer
//! `input_required`.

use serde_json::{Value, json};

use super::content::{self, tool_result};
use super::inputs::{self, Ask};
use super::peer::Peer;
use super::request::{Answer, Req};

fn done(text: &str) -> Answer {
    Answer::Result(tool_result(vec![content::text(text)]))
}

/// Runs `finish` on the answers to `asks`, or returns what to send instead.
fn with_answers(
    req: &Req,
    peer: &dyn Peer,
    asks: &[Ask],
    finish: impl FnOnce(&serde_json::Map<String, Value>) -> Answer,
) -> Answer {
    match inputs::gather(req, peer, asks, None) {
        Ok(answers) => finish(&answers),
        Err(answer) => answer,
    }
}

pub fn sampling(req: &Req, peer: &dyn Peer, prompt: &str) -> Answer {
    let asks = [Ask::sample("completion", prompt, 100)];
    with_answers(req, peer, &asks, |a| done(&format!("LLM response: {}", inputs::sampled_text(a.get("completion")))))
}

pub fn elicitation(req: &Req, peer: &dyn Peer, message: &str) -> Answer {
    let schema = json!({
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    });
    let asks = [Ask::elicit("user_input", message, schema)];
    with_answers(req, peer, &asks, |a| {
        done(&format!("User response: {}", inputs::describe_elicitation(a.get("user_input"))))
    })
}

fn completed(answers: &serde_json::Map<String, Value>, key: &str) -> Answer {
    done(&format!("Elicitation completed: {}", inputs::describe_elicitation(answers.get(key))))
}

/// SEP-1034: every primitive type, each with a default.
pub fn sep1034_defaults(req: &Req, peer: &dyn Peer) -> Answer {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": true},
        },
        "required": [],
    });
    let asks = [Ask::elicit("defaults", "Please review and update the form fields with defaults", schema)];
    with_answers(req, peer, &asks, |a| completed(a, "defaults"))
}

/// SEP-1330: the five enum shapes (untitled and titled single-select, the
/// deprecated enumNames, untitled and titled multi-select).
pub fn sep1330_enums(req: &Req, peer: &dyn Peer) -> Answer {
    let titled = |titles: [&str; 3]| -> Vec<Value> {
        titles.iter().enumerate().map(|(i, t)| json!({"const": format!("value{}", i + 1), "title": t})).collect()
    };
    let schema = json!({
        "type": "object",
        "properties": {
            "untitledSingle": {
                "type": "string",
                "description": "Select one option",
                "enum": ["option1", "option2", "option3"],
            },
            "titledSingle": {
                "type": "string",
                "description": "Select one option with titles",
                "oneOf": titled(["First Option", "Second Option", "Third Option"]),
            },
            "legacyEnum": {
                "type": "string",
                "description": "Select one option (legacy)",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "description": "Select multiple options",
                "minItems": 1,
                "maxItems": 3,
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {
                "type": "array",
                "description": "Select multiple options with titles",
                "minItems": 1,
                "maxItems": 3,
                "items": {"anyOf": titled(["First Choice", "Second Choice", "Third Choice"])},
            },
        },
        "required": [],
    });
    let asks = [Ask::elicit("enums", "Please select options from the enum fields", schema)];
    with_answers(req, peer, &asks, |a| completed(a, "enums"))
}

/// Refuses with -32021 unless the client declared `sampling`; it asks
/// nothing, it only checks (the suite's undeclared-capability probe).
pub fn missing_capability(req: &Req) -> Answer {
    if req.has_capability("sampling") {
        done("The client declared the sampling capability.")
    } else {
        Answer::missing_capability("sampling")
    }
}

/// Asks for input on the call's own response stream: on 2026-07-28 that is
/// an `input_required` result, never a request of ours.
pub fn streaming_elicitation(req: &Req, peer: &dyn Peer) -> Answer {
    let asks = [Ask::elicit_string("confirmation", "Continue streaming?", "answer")];
    with_answers(req, peer, &asks, |a| {
        done(&format!("Streaming elicitation completed: {}", inputs::describe_elicitation(a.get("confirmation"))))
    })
}

#[cfg(test)]
mod tests {
    use super::super::inputs::tests::ScriptedPeer;
    use super::super::request::LegacySetup;
    use super::super::request::tests::{legacy, modern};
    use super::*;

    fn first_request(answer: Answer) -> Value {
        let Answer::Result(r) = answer else { panic!("expected a result") };
        assert_eq!(r["resultType"], "input_required");
        r["inputRequests"].as_object().unwrap().values().next().unwrap().clone()
    }

    fn text(answer: Answer) -> String {
        let Answer::Result(r) = answer else { panic!("expected a result") };
        r["content"][0]["text"].as_str().unwrap().to_owned()
    }

    #[test]
    fn legacy_sampling_asks_the_client_and_reports_its_text() {
        let setup = LegacySetup { capabilities: json!({"sampling": {}}), log_level: None };
        let peer = ScriptedPeer::default();
        *peer.answers.lock().unwrap() =
            vec![Ok(json!({"role": "assistant", "content": {"type": "text", "text": "hi"}}))];
        assert_eq!(text(sampling(&legacy(json!({}), &setup), &peer, "Test prompt")), "LLM response: hi");
        let asked = peer.asked.lock().unwrap();
        assert_eq!(asked[0].0, "sampling/createMessage");
        assert_eq!(asked[0].1["messages"][0]["content"]["text"], "Test prompt");
        assert_eq!(asked[0].1["maxTokens"], 100);
    }

    #[test]
    fn modern_sampling_and_elicitation_answer_input_required_then_finish() {
        let r = first_request(sampling(&modern(json!({}), json!({})), &ScriptedPeer::default(), "p"));
        assert_eq!(r["method"], "sampling/createMessage");
        let r = first_request(elicitation(&modern(json!({}), json!({})), &ScriptedPeer::default(), "Please"));
        assert_eq!(r["params"]["message"], "Please");
        assert_eq!(r["params"]["requestedSchema"]["required"], json!(["username", "email"]));
        let retry = json!({"inputResponses": {"user_input": {"action": "accept", "content": {"username": "u"}}}});
        let got = text(elicitation(&modern(retry, json!({})), &ScriptedPeer::default(), "Please"));
        assert_eq!(got, r#"User response: action=accept, content={"username":"u"}"#);
    }

    #[test]
    fn sep1034_fields_carry_their_defaults() {
        let r = first_request(sep1034_defaults(&modern(json!({}), json!({})), &ScriptedPeer::default()));
        let p = &r["params"]["requestedSchema"]["properties"];
        assert_eq!((p["name"]["type"].as_str(), p["name"]["default"].as_str()), (Some("string"), Some("John Doe")));
        assert_eq!((p["age"]["type"].as_str(), p["age"]["default"].as_i64()), (Some("integer"), Some(30)));
        assert_eq!((p["score"]["type"].as_str(), p["score"]["default"].as_f64()), (Some("number"), Some(95.5)));
        assert_eq!(p["status"]["default"], "active");
        assert!(p["status"]["enum"].as_array().unwrap().contains(&json!("active")));
        assert_eq!((p["verified"]["type"].as_str(), p["verified"]["default"].as_bool()), (Some("boolean"), Some(true)));
    }

    #[test]
    fn sep1330_has_each_enum_shape() {
        let r = first_request(sep1330_enums(&modern(json!({}), json!({})), &ScriptedPeer::default()));
        let p = &r["params"]["requestedSchema"]["properties"];
        assert!(p["untitledSingle"]["enum"].is_array() && p["untitledSingle"].get("oneOf").is_none());
        assert_eq!(p["titledSingle"]["oneOf"][0], json!({"const": "value1", "title": "First Option"}));
        assert!(p["titledSingle"].get("enum").is_none());
        assert_eq!(p["legacyEnum"]["enumNames"].as_array().unwrap().len(), 3);
        assert_eq!(p["untitledMulti"]["items"]["type"], "string");
        assert!(p["untitledMulti"]["items"]["enum"].is_array());
        assert_eq!(p["titledMulti"]["items"]["anyOf"][2], json!({"const": "value3", "title": "Third Choice"}));
    }

    #[test]
    fn missing_capability_needs_sampling() {
        let without = modern(json!({}), json!({"io.modelcontextprotocol/clientCapabilities": {}}));
        let Answer::Error { code, data, .. } = missing_capability(&without) else { panic!("expected -32021") };
        assert_eq!((code, data), (-32021, Some(json!({"requiredCapabilities": {"sampling": {}}}))));
        assert!(matches!(missing_capability(&modern(json!({}), json!({}))), Answer::Result(_)));
    }

    #[test]
    fn streaming_elicitation_never_sends_a_request_on_the_modern_wire() {
        let peer = ScriptedPeer::default();
        let r = first_request(streaming_elicitation(&modern(json!({}), json!({})), &peer));
        assert_eq!(r["method"], "elicitation/create");
        assert!(peer.asked.lock().unwrap().is_empty() && peer.notes.lock().unwrap().is_empty());
    }
}
