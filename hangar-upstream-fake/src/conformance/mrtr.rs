//! The `test_input_required_result_*` fixtures of the 2026-07-28 suite
//! (SEP-2322, "multi round-trip requests"): input_required results, the
//! `requestState` a client must echo, several questions at once, several
//! rounds, and respect for the capabilities the client declared.

use serde_json::{Map, Value, json};

use super::Server;
use super::content::{self, tool_result};
use super::inputs::{self, Ask};
use super::peer::Peer;
use super::request::{Answer, Req};

fn done(text: &str) -> Answer {
    Answer::Result(tool_result(vec![content::text(text)]))
}

fn name_asked() -> Ask {
    Ask::elicit_string("user_name", "What is your name?", "name")
}

fn capital_asked() -> Ask {
    Ask::sample("capital_question", "What is the capital of France?", 100)
}

fn confirm_asked() -> Ask {
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
    Ask::elicit("confirm", "Please confirm", schema)
}

pub fn call(server: &Server, req: &Req, peer: &dyn Peer, tool: &str) -> Answer {
    let outcome = match tool {
        "test_input_required_result_elicitation" => elicitation(req, peer),
        "test_input_required_result_sampling" => sampling(req, peer),
        "test_input_required_result_list_roots" => list_roots(req, peer),
        "test_input_required_result_request_state" | "test_input_required_result_tampered_state" => {
            request_state(server, req, peer, tool)
        }
        "test_input_required_result_multiple_inputs" => multiple_inputs(server, req, peer, tool),
        "test_input_required_result_multi_round" => multi_round(server, req, peer, tool),
        "test_input_required_result_capabilities" => capabilities(req, peer),
        _ => Err(Answer::invalid(format!("unknown tool: {tool}"))),
    };
    outcome.unwrap_or_else(|answer| answer)
}

fn elicitation(req: &Req, peer: &dyn Peer) -> Result<Answer, Answer> {
    let answers = inputs::gather(req, peer, &[name_asked()], None)?;
    Ok(done(&format!("Hello, {}!", name_of(&answers))))
}

fn name_of(answers: &Map<String, Value>) -> &str {
    inputs::accepted(answers.get("user_name")).and_then(|c| c.get("name")).and_then(Value::as_str).unwrap_or("stranger")
}

fn sampling(req: &Req, peer: &dyn Peer) -> Result<Answer, Answer> {
    let answers = inputs::gather(req, peer, &[capital_asked()], None)?;
    Ok(done(&format!("The model answered: {}", inputs::sampled_text(answers.get("capital_question")))))
}

fn list_roots(req: &Req, peer: &dyn Peer) -> Result<Answer, Answer> {
    let answers = inputs::gather(req, peer, &[Ask::roots("client_roots")], None)?;
    Ok(done(&format!("The client's roots: {}", roots_of(answers.get("client_roots")))))
}

fn roots_of(answer: Option<&Value>) -> String {
    let uris: Vec<&str> = answer
        .and_then(|a| a.get("roots"))
        .and_then(Value::as_array)
        .map(|roots| roots.iter().filter_map(|r| r.get("uri").and_then(Value::as_str)).collect())
        .unwrap_or_default();
    if uris.is_empty() { "none".to_owned() } else { uris.join(", ") }
}

/// The round the request's `requestState` stands for (`None` without one);
/// a state we did not issue for this tool is refused.
fn verified_round(server: &Server, req: &Req, tool: &str) -> Result<Option<u32>, Answer> {
    match req.params.get("requestState") {
        None => Ok(None),
        Some(Value::String(state)) => match server.signer.verify(tool, state) {
            Some(round) => Ok(Some(round)),
            None => Err(Answer::invalid("requestState failed its integrity check")),
        },
        Some(_) => Err(Answer::invalid("requestState must be a string")),
    }
}

/// Round 1 hands out a signed state; round 2 must bring it back unchanged
/// along with the answer (`tampered_state` is the same fixture: a changed
/// state fails `verified_round`).
fn request_state(server: &Server, req: &Req, peer: &dyn Peer, tool: &str) -> Result<Answer, Answer> {
    let round = verified_round(server, req, tool)?;
    if req.modern() && round.is_none() && req.params.contains_key("inputResponses") {
        return Err(Answer::invalid("inputResponses came without the requestState they belong to"));
    }
    let answers = inputs::gather(req, peer, &[confirm_asked()], Some(server.signer.issue(tool, 1)))?;
    Ok(done(&format!("state-ok: {}", inputs::describe_elicitation(answers.get("confirm")))))
}

fn multiple_inputs(server: &Server, req: &Req, peer: &dyn Peer, tool: &str) -> Result<Answer, Answer> {
    verified_round(server, req, tool)?;
    let asks = [name_asked(), Ask::sample("greeting", "Generate a greeting", 50), Ask::roots("client_roots")];
    let answers = inputs::gather(req, peer, &asks, Some(server.signer.issue(tool, 1)))?;
    Ok(done(&format!(
        "{} says \"{}\"; roots: {}",
        name_of(&answers),
        inputs::sampled_text(answers.get("greeting")),
        roots_of(answers.get("client_roots"))
    )))
}

/// Two questions in two rounds, each round with its own state: the state
/// says which rounds are behind us. A round-1 retry carries step 1's answer
/// only, so asking step 2 then yields the second input_required.
fn multi_round(server: &Server, req: &Req, peer: &dyn Peer, tool: &str) -> Result<Answer, Answer> {
    let round = verified_round(server, req, tool)?.unwrap_or(0);
    let step2 = Ask::elicit_string("step2", "Step 2: What is your favorite color?", "color");
    if round < 2 {
        let step1 = Ask::elicit_string("step1", "Step 1: What is your name?", "name");
        inputs::gather(req, peer, &[step1], Some(server.signer.issue(tool, 1)))?;
    }
    let answers = inputs::gather(req, peer, &[step2], Some(server.signer.issue(tool, 2)))?;
    let color = inputs::accepted(answers.get("step2")).and_then(|c| c.get("color")).and_then(Value::as_str);
    Ok(done(&format!("Both rounds done; favorite color: {}", color.unwrap_or("unknown"))))
}

/// Asks only what the client declared it can answer.
fn capabilities(req: &Req, peer: &dyn Peer) -> Result<Answer, Answer> {
    let asks: Vec<Ask> =
        [name_asked(), capital_asked()].into_iter().filter(|a| req.has_capability(a.capability())).collect();
    if asks.is_empty() {
        return Ok(done("The client declared neither elicitation nor sampling, so nothing was asked."));
    }
    let answers = inputs::gather(req, peer, &asks, None)?;
    Ok(done(&format!("Answered: {}", answers.keys().cloned().collect::<Vec<_>>().join(", "))))
}

#[cfg(test)]
mod tests {
    use super::super::inputs::tests::ScriptedPeer;
    use super::super::request::LegacySetup;
    use super::super::request::tests::{legacy, modern};
    use super::*;

    const CAPS: &str = "io.modelcontextprotocol/clientCapabilities";

    fn run(server: &Server, tool: &str, params: Value) -> Answer {
        let mut params = params;
        params["name"] = tool.into();
        call(server, &modern(params, json!({})), &ScriptedPeer::default(), tool)
    }

    fn result(answer: Answer) -> Value {
        match answer {
            Answer::Result(v) => v,
            Answer::Error { message, .. } => panic!("unexpected error: {message}"),
        }
    }

    fn accept(content: Value) -> Value {
        json!({"action": "accept", "content": content})
    }

    #[test]
    fn elicitation_round_trip() {
        let s = Server::default();
        let r1 = result(run(&s, "test_input_required_result_elicitation", json!({})));
        assert_eq!(r1["resultType"], "input_required");
        assert_eq!(r1["inputRequests"]["user_name"]["method"], "elicitation/create");
        let retry = json!({"inputResponses": {"user_name": accept(json!({"name": "Alice"})), "unknown_extra_key": {}}});
        let r2 = result(run(&s, "test_input_required_result_elicitation", retry));
        assert_eq!(r2["content"][0]["text"], "Hello, Alice!");
        assert!(r2.get("resultType").is_none(), "completion is added when the answer is rendered");
        let wrong = json!({"inputResponses": {"wrong_key": accept(json!({}))}});
        assert_eq!(result(run(&s, "test_input_required_result_elicitation", wrong))["resultType"], "input_required");
    }

    #[test]
    fn sampling_and_roots_round_trips() {
        let s = Server::default();
        let r1 = result(run(&s, "test_input_required_result_sampling", json!({})));
        let ask = &r1["inputRequests"]["capital_question"];
        assert_eq!(
            (ask["method"].as_str(), ask["params"]["maxTokens"].as_i64()),
            (Some("sampling/createMessage"), Some(100))
        );
        let retry = json!({"inputResponses": {"capital_question": {"role": "assistant", "content": {"type": "text", "text": "Paris"}}}});
        assert_eq!(
            result(run(&s, "test_input_required_result_sampling", retry))["content"][0]["text"],
            "The model answered: Paris"
        );

        let r1 = result(run(&s, "test_input_required_result_list_roots", json!({})));
        assert_eq!(r1["inputRequests"]["client_roots"], json!({"method": "roots/list", "params": {}}));
        let retry =
            json!({"inputResponses": {"client_roots": {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]}}});
        let text = result(run(&s, "test_input_required_result_list_roots", retry))["content"][0]["text"].clone();
        assert_eq!(text, "The client's roots: file:///test/root");
    }

    #[test]
    fn request_state_round_trips_and_tampering_is_refused() {
        let s = Server::default();
        for tool in ["test_input_required_result_request_state", "test_input_required_result_tampered_state"] {
            let r1 = result(run(&s, tool, json!({})));
            let state = r1["requestState"].as_str().unwrap().to_owned();
            assert!(r1["inputRequests"]["confirm"].is_object());
            let answers = json!({"confirm": accept(json!({"ok": true}))});
            let r2 = result(run(&s, tool, json!({"inputResponses": answers, "requestState": state})));
            assert!(r2["content"][0]["text"].as_str().unwrap().contains("state-ok"));
            let tampered = json!({"inputResponses": answers, "requestState": format!("{state}-TAMPERED")});
            assert!(matches!(run(&s, tool, tampered), Answer::Error { code: -32602, .. }));
            let stateless = json!({"inputResponses": answers});
            assert!(matches!(run(&s, tool, stateless), Answer::Error { code: -32602, .. }));
        }
    }

    #[test]
    fn multiple_inputs_ask_three_kinds_at_once() {
        let s = Server::default();
        let tool = "test_input_required_result_multiple_inputs";
        let r1 = result(run(&s, tool, json!({})));
        let methods: Vec<&str> =
            r1["inputRequests"].as_object().unwrap().values().map(|r| r["method"].as_str().unwrap()).collect();
        assert_eq!(methods.len(), 3);
        for m in ["elicitation/create", "sampling/createMessage", "roots/list"] {
            assert!(methods.contains(&m));
        }
        let answers = json!({
            "user_name": accept(json!({"name": "Alice"})),
            "greeting": {"role": "assistant", "content": {"type": "text", "text": "Hello there!"}},
            "client_roots": {"roots": []},
        });
        let r2 = result(run(&s, tool, json!({"inputResponses": answers, "requestState": r1["requestState"]})));
        assert_eq!(r2["content"][0]["text"], "Alice says \"Hello there!\"; roots: none");
    }

    #[test]
    fn multi_round_takes_three_calls_with_a_new_state_each_round() {
        let s = Server::default();
        let tool = "test_input_required_result_multi_round";
        let r1 = result(run(&s, tool, json!({})));
        assert!(r1["inputRequests"]["step1"].is_object());
        let r2 = result(run(
            &s,
            tool,
            json!({"inputResponses": {"step1": accept(json!({"name": "Alice"}))}, "requestState": r1["requestState"]}),
        ));
        assert!(r2["inputRequests"]["step2"].is_object());
        assert_ne!(r2["requestState"], r1["requestState"]);
        let r3 = result(run(
            &s,
            tool,
            json!({"inputResponses": {"step2": accept(json!({"color": "blue"}))}, "requestState": r2["requestState"]}),
        ));
        assert_eq!(r3["content"][0]["text"], "Both rounds done; favorite color: blue");
    }

    #[test]
    fn legacy_multi_round_asks_both_steps_itself() {
        let setup = LegacySetup { capabilities: json!({"elicitation": {}}), log_level: None };
        let peer = ScriptedPeer::default();
        *peer.answers.lock().unwrap() = vec![Ok(accept(json!({"name": "A"}))), Ok(accept(json!({"color": "red"})))];
        let tool = "test_input_required_result_multi_round";
        let r = result(call(&Server::default(), &legacy(json!({"name": tool}), &setup), &peer, tool));
        assert_eq!(r["content"][0]["text"], "Both rounds done; favorite color: red");
        assert_eq!(peer.asked.lock().unwrap().len(), 2);
    }

    #[test]
    fn capabilities_tool_asks_only_what_was_declared() {
        let s = Server::default();
        let tool = "test_input_required_result_capabilities";
        let only_sampling = modern(json!({"name": tool}), json!({CAPS: {"sampling": {}}}));
        let r = result(call(&s, &only_sampling, &ScriptedPeer::default(), tool));
        let methods: Vec<&str> =
            r["inputRequests"].as_object().unwrap().values().map(|r| r["method"].as_str().unwrap()).collect();
        assert_eq!(methods, ["sampling/createMessage"]);
        let nothing = modern(json!({"name": tool}), json!({CAPS: {}}));
        assert!(result(call(&s, &nothing, &ScriptedPeer::default(), tool)).get("inputRequests").is_none());
    }
}
