//! Asking the client for input (sampling, elicitation, roots) on either
//! wire. On 2026-07-28 a server never sends requests: it answers
//! `input_required` with the questions, and the client retries with
//! `inputResponses`. On the legacy wire it asks itself, through the peer,
//! and waits. Fixtures describe their questions once and call `gather`.

use serde_json::{Map, Value, json};

use super::peer::{AskError, Peer};
use super::request::{Answer, Req};
use crate::protocol;

/// One question for the client, under the key its answer comes back with.
#[derive(Clone, Debug)]
pub struct Ask {
    pub key: &'static str,
    pub method: &'static str,
    pub params: Value,
}

impl Ask {
    pub fn elicit(key: &'static str, message: &str, schema: Value) -> Self {
        let params = json!({"mode": "form", "message": message, "requestedSchema": schema});
        Self { key, method: "elicitation/create", params }
    }

    /// An elicitation of one required string field.
    pub fn elicit_string(key: &'static str, message: &str, field: &str) -> Self {
        let schema = json!({
            "type": "object",
            "properties": {field: {"type": "string"}},
            "required": [field],
        });
        Self::elicit(key, message, schema)
    }

    pub fn sample(key: &'static str, text: &str, max_tokens: u32) -> Self {
        let params = json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "maxTokens": max_tokens,
        });
        Self { key, method: "sampling/createMessage", params }
    }

    pub fn roots(key: &'static str) -> Self {
        Self { key, method: "roots/list", params: json!({}) }
    }

    /// The client capability answering this question needs.
    pub fn capability(&self) -> &'static str {
        match self.method {
            "sampling/createMessage" => "sampling",
            "roots/list" => "roots",
            _ => "elicitation",
        }
    }
}

/// The `input_required` result asking `asks`, carrying `state` if any.
pub fn input_required(asks: &[Ask], state: Option<String>) -> Answer {
    let requests: Map<String, Value> =
        asks.iter().map(|a| (a.key.to_owned(), json!({"method": a.method, "params": a.params}))).collect();
    let mut result = json!({"resultType": "input_required", "inputRequests": requests});
    if let Some(state) = state {
        result["requestState"] = state.into();
    }
    Answer::Result(result)
}

/// The client's answers to every question in `asks`, keyed as asked; or the
/// answer to send instead (the questions still open, or an error). `state` is
/// the `requestState` to hand out with the questions.
pub fn gather(req: &Req, peer: &dyn Peer, asks: &[Ask], state: Option<String>) -> Result<Map<String, Value>, Answer> {
    if req.modern() { from_retry(req, asks, state) } else { ask_now(req, peer, asks) }
}

fn require_capabilities(req: &Req, asks: &[&Ask]) -> Result<(), Answer> {
    match asks.iter().find(|a| !req.has_capability(a.capability())) {
        Some(ask) => Err(Answer::missing_capability(ask.capability())),
        None => Ok(()),
    }
}

/// 2026-07-28: answers come in `inputResponses`; what is missing is asked
/// again, what is extra is ignored.
fn from_retry(req: &Req, asks: &[Ask], state: Option<String>) -> Result<Map<String, Value>, Answer> {
    let responses = match req.params.get("inputResponses") {
        None => Map::new(),
        Some(Value::Object(responses)) => responses.clone(),
        Some(_) => return Err(Answer::invalid("inputResponses must be an object")),
    };
    let mut answers = Map::new();
    let mut open = Vec::new();
    for ask in asks {
        match responses.get(ask.key) {
            Some(Value::Object(answer)) => {
                answers.insert(ask.key.to_owned(), Value::Object(answer.clone()));
            }
            Some(_) => return Err(Answer::invalid(format!("inputResponses.{} must be an object", ask.key))),
            None => open.push(ask),
        }
    }
    if open.is_empty() {
        return Ok(answers);
    }
    require_capabilities(req, &open)?;
    let open: Vec<Ask> = open.into_iter().cloned().collect();
    Err(input_required(&open, state))
}

/// Legacy: ask each question ourselves, one after another.
fn ask_now(req: &Req, peer: &dyn Peer, asks: &[Ask]) -> Result<Map<String, Value>, Answer> {
    require_capabilities(req, &asks.iter().collect::<Vec<_>>())?;
    let mut answers = Map::new();
    for ask in asks {
        let answer = peer.ask(ask.method, ask.params.clone()).map_err(|e| {
            let why = match e {
                AskError::Unsupported => "this transport cannot send requests to the client".to_owned(),
                AskError::Refused(error) => format!("the client refused it: {error}"),
                AskError::NoAnswer => "the client did not answer".to_owned(),
            };
            Answer::error(protocol::INTERNAL_ERROR, format!("{} failed: {why}", ask.method))
        })?;
        answers.insert(ask.key.to_owned(), answer);
    }
    Ok(answers)
}

/// The accepted content of an elicitation answer, if it was accepted.
pub fn accepted(answer: Option<&Value>) -> Option<&Map<String, Value>> {
    let answer = answer?;
    if answer.get("action").and_then(Value::as_str) != Some("accept") {
        return None;
    }
    answer.get("content").and_then(Value::as_object)
}

/// `action=..., content={...}` for an elicitation answer, as the reference
/// conformance servers print it.
pub fn describe_elicitation(answer: Option<&Value>) -> String {
    let action = answer.and_then(|a| a.get("action")).and_then(Value::as_str).unwrap_or("none");
    let content = answer.and_then(|a| a.get("content")).cloned().unwrap_or_else(|| json!({}));
    format!("action={action}, content={content}")
}

/// The text of a sampling answer (`content.text`).
pub fn sampled_text(answer: Option<&Value>) -> &str {
    answer.and_then(|a| a.pointer("/content/text")).and_then(Value::as_str).unwrap_or("No response")
}

#[cfg(test)]
pub mod tests {
    use std::sync::Mutex;

    use super::super::request::LegacySetup;
    use super::super::request::tests::{legacy, modern};
    use super::*;

    /// A peer that records everything and answers asks from a script.
    #[derive(Default)]
    pub struct ScriptedPeer {
        pub notes: Mutex<Vec<Value>>,
        pub asked: Mutex<Vec<(String, Value)>>,
        pub answers: Mutex<Vec<Result<Value, AskError>>>,
    }

    impl Peer for ScriptedPeer {
        fn notify(&self, msg: Value) {
            self.notes.lock().unwrap().push(msg);
        }

        fn ask(&self, method: &str, params: Value) -> Result<Value, AskError> {
            self.asked.lock().unwrap().push((method.to_owned(), params));
            let mut answers = self.answers.lock().unwrap();
            if answers.is_empty() { Err(AskError::NoAnswer) } else { answers.remove(0) }
        }
    }

    fn asks() -> Vec<Ask> {
        vec![Ask::elicit_string("user_name", "What is your name?", "name"), Ask::roots("client_roots")]
    }

    #[test]
    fn modern_first_round_asks_everything_with_the_state() {
        let req = modern(json!({}), json!({}));
        let Err(Answer::Result(r)) = gather(&req, &ScriptedPeer::default(), &asks(), Some("s".into())) else {
            panic!("expected input_required");
        };
        assert_eq!(r["resultType"], "input_required");
        assert_eq!(r["requestState"], "s");
        assert_eq!(r["inputRequests"]["user_name"]["method"], "elicitation/create");
        assert_eq!(r["inputRequests"]["user_name"]["params"]["requestedSchema"]["required"], json!(["name"]));
        assert_eq!(r["inputRequests"]["client_roots"], json!({"method": "roots/list", "params": {}}));
    }

    #[test]
    fn modern_retry_reasks_only_what_is_missing_and_ignores_extras() {
        let partial = json!({"inputResponses": {"user_name": {"action": "accept"}, "extra": 1}});
        let Err(Answer::Result(r)) = gather(&modern(partial, json!({})), &ScriptedPeer::default(), &asks(), None)
        else {
            panic!("expected input_required");
        };
        assert_eq!(r["inputRequests"].as_object().map(|m| m.len()), Some(1));
        assert!(r.get("requestState").is_none());

        let full = json!({"inputResponses": {"user_name": {"action": "accept"}, "client_roots": {"roots": []}}});
        let answers = gather(&modern(full, json!({})), &ScriptedPeer::default(), &asks(), None).unwrap();
        assert_eq!(answers["client_roots"], json!({"roots": []}));
    }

    #[test]
    fn modern_bad_input_responses_are_invalid_params() {
        for bad in [json!({"inputResponses": null}), json!({"inputResponses": {"user_name": 12345}})] {
            let got = gather(&modern(bad, json!({})), &ScriptedPeer::default(), &asks(), None);
            assert!(matches!(got, Err(Answer::Error { code: -32602, .. })), "{got:?}");
        }
    }

    #[test]
    fn undeclared_capabilities_are_refused_with_32021() {
        let req = modern(json!({}), json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}));
        let got = gather(&req, &ScriptedPeer::default(), &asks(), None);
        let Err(Answer::Error { code, data, .. }) = got else { panic!("expected an error") };
        assert_eq!(code, -32021);
        assert_eq!(data, Some(json!({"requiredCapabilities": {"roots": {}}})));
    }

    #[test]
    fn legacy_asks_the_peer_in_order() {
        let setup = LegacySetup { capabilities: json!({"elicitation": {}, "roots": {}}), log_level: None };
        let peer = ScriptedPeer::default();
        *peer.answers.lock().unwrap() = vec![Ok(json!({"action": "accept"})), Ok(json!({"roots": []}))];
        let answers = gather(&legacy(json!({}), &setup), &peer, &asks(), None).unwrap();
        assert_eq!(answers["user_name"], json!({"action": "accept"}));
        let asked: Vec<String> = peer.asked.lock().unwrap().iter().map(|(m, _)| m.clone()).collect();
        assert_eq!(asked, ["elicitation/create", "roots/list"]);

        let got = gather(&legacy(json!({}), &setup), &ScriptedPeer::default(), &asks(), None);
        assert!(matches!(got, Err(Answer::Error { code: -32603, .. })));
        let got = gather(&legacy(json!({}), &LegacySetup::default()), &ScriptedPeer::default(), &asks(), None);
        assert!(matches!(got, Err(Answer::Error { code: -32021, .. })));
    }

    #[test]
    fn answer_helpers() {
        let yes = json!({"action": "accept", "content": {"name": "Alice"}});
        assert_eq!(accepted(Some(&yes)).and_then(|c| c["name"].as_str()), Some("Alice"));
        assert_eq!(accepted(Some(&json!({"action": "decline"}))), None);
        assert_eq!(describe_elicitation(Some(&yes)), r#"action=accept, content={"name":"Alice"}"#);
        assert_eq!(describe_elicitation(None), "action=none, content={}");
        assert_eq!(sampled_text(Some(&json!({"content": {"type": "text", "text": "Paris"}}))), "Paris");
    }
}
