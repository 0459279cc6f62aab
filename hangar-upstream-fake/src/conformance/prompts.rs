//! Prompts: plain, with arguments, with an embedded resource, with an image,
//! one that needs the user's input first (input_required outside tools),
//! and the dynamic one `test_trigger_prompt_change` switches on and off.

use serde_json::{Map, Value, json};

use super::Server;
use super::content;
use super::inputs::{self, Ask};
use super::peer::Peer;
use super::request::{Answer, Req};

pub const WITH_ARGUMENTS: &str = "test_prompt_with_arguments";
pub const DYNAMIC_PROMPT: &str = "test_dynamic_prompt";
const INPUT_REQUIRED: &str = "test_input_required_result_prompt";

/// Required arguments: name and description.
type Arguments = &'static [(&'static str, &'static str)];

/// Name, description and required arguments, in `prompts/list` order.
const CATALOGUE: &[(&str, &str, Arguments)] = &[
    ("test_simple_prompt", "A simple prompt without arguments", &[]),
    (
        WITH_ARGUMENTS,
        "A prompt with required arguments",
        &[("arg1", "First test argument"), ("arg2", "Second test argument")],
    ),
    (
        "test_prompt_with_embedded_resource",
        "A prompt that includes an embedded resource",
        &[("resourceUri", "URI of the resource to embed")],
    ),
    ("test_prompt_with_image", "A prompt that includes image content", &[]),
    (INPUT_REQUIRED, "A prompt that first asks the user for context", &[]),
];

fn entry(name: &str, description: &str, args: &[(&str, &str)]) -> Value {
    let args: Vec<Value> = args.iter().map(|(n, d)| json!({"name": n, "description": d, "required": true})).collect();
    json!({"name": name, "description": description, "arguments": args})
}

pub fn list(server: &Server) -> Value {
    let mut prompts: Vec<Value> = CATALOGUE.iter().map(|(n, d, a)| entry(n, d, a)).collect();
    if server.dynamic_prompt() {
        prompts.push(entry(DYNAMIC_PROMPT, "Added by test_trigger_prompt_change", &[]));
    }
    json!({"prompts": prompts})
}

fn user(content: Value) -> Value {
    json!({"role": "user", "content": content})
}

fn messages(messages: Vec<Value>) -> Answer {
    Answer::Result(json!({"messages": messages}))
}

pub fn get(server: &Server, req: &Req, peer: &dyn Peer) -> Answer {
    let name = match req.str_param("name") {
        Ok(name) => name,
        Err(e) => return e,
    };
    let required: Arguments = match CATALOGUE.iter().find(|(n, ..)| *n == name) {
        Some((_, _, args)) => args,
        None if name == DYNAMIC_PROMPT && server.dynamic_prompt() => &[],
        None => {
            // Tests read this line from the hangar's logs endpoint: a name that reached us undeclared.
            crate::log::log(&format!("asked for an undeclared prompt: {name:?}"));
            return Answer::invalid(format!("unknown prompt: {name}")).with_data(json!({"name": name}));
        }
    };
    let args = match req.params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(args)) if args.values().all(Value::is_string) => args.clone(),
        Some(_) => return Answer::invalid("prompt arguments must be an object of strings"),
    };
    if let Some((missing, _)) = required.iter().find(|(a, _)| !args.contains_key(*a)) {
        return Answer::invalid(format!("missing required argument {missing}"));
    }
    let arg = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or_default();
    match name {
        "test_simple_prompt" => messages(vec![user(content::text("This is a simple prompt for testing."))]),
        WITH_ARGUMENTS => messages(vec![user(content::text(&format!(
            "Prompt with arguments: arg1='{}', arg2='{}'",
            arg("arg1"),
            arg("arg2")
        )))]),
        "test_prompt_with_embedded_resource" => messages(vec![
            user(content::resource(arg("resourceUri"), "text/plain", "Embedded resource content for testing.")),
            user(content::text("Please process the embedded resource above.")),
        ]),
        "test_prompt_with_image" => {
            messages(vec![user(content::image()), user(content::text("Please analyze the image above."))])
        }
        INPUT_REQUIRED => with_context(req, peer),
        _ => messages(vec![user(content::text("The dynamic prompt is here."))]),
    }
}

fn with_context(req: &Req, peer: &dyn Peer) -> Answer {
    let ask = Ask::elicit_string("user_context", "What context should the prompt use?", "context");
    match inputs::gather(req, peer, &[ask], None) {
        Ok(answers) => {
            let context = inputs::accepted(answers.get("user_context"))
                .and_then(|c| c.get("context"))
                .and_then(Value::as_str)
                .unwrap_or("none given");
            messages(vec![user(content::text(&format!("Answer using this context: {context}")))])
        }
        Err(answer) => answer,
    }
}

#[cfg(test)]
mod tests {
    use super::super::inputs::tests::ScriptedPeer;
    use super::super::request::tests::modern;
    use super::*;

    fn get_prompt(server: &Server, params: Value) -> Answer {
        get(server, &modern(params, json!({})), &ScriptedPeer::default())
    }

    fn msgs(answer: Answer) -> Vec<Value> {
        let Answer::Result(r) = answer else { panic!("expected a result") };
        r["messages"].as_array().unwrap().clone()
    }

    #[test]
    fn fixed_prompts_return_the_suites_messages() {
        let s = Server::default();
        let m = msgs(get_prompt(&s, json!({"name": "test_simple_prompt"})));
        assert_eq!(
            m,
            vec![json!({"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}})]
        );
        let m = msgs(get_prompt(&s, json!({"name": WITH_ARGUMENTS, "arguments": {"arg1": "hello", "arg2": "world"}})));
        assert_eq!(m[0]["content"]["text"], "Prompt with arguments: arg1='hello', arg2='world'");
        let args = json!({"resourceUri": "test://example-resource"});
        let m = msgs(get_prompt(&s, json!({"name": "test_prompt_with_embedded_resource", "arguments": args})));
        assert_eq!(
            m[0]["content"],
            json!({"type": "resource", "resource": {"uri": "test://example-resource", "mimeType": "text/plain",
                   "text": "Embedded resource content for testing."}})
        );
        assert_eq!(m[1]["content"]["text"], "Please process the embedded resource above.");
        let m = msgs(get_prompt(&s, json!({"name": "test_prompt_with_image"})));
        assert_eq!(
            (m[0]["content"]["type"].as_str(), m[0]["content"]["mimeType"].as_str()),
            (Some("image"), Some("image/png"))
        );
        assert_eq!(m[1]["content"]["text"], "Please analyze the image above.");
    }

    #[test]
    fn bad_names_and_arguments_are_invalid_params() {
        let s = Server::default();
        for params in [
            json!({"name": "nope"}),
            json!({"name": WITH_ARGUMENTS, "arguments": {"arg1": "x"}}),
            json!({"name": WITH_ARGUMENTS, "arguments": {"arg1": "x", "arg2": 2}}),
            json!({"name": DYNAMIC_PROMPT}),
        ] {
            assert!(matches!(get_prompt(&s, params), Answer::Error { code: -32602, .. }));
        }
    }

    #[test]
    fn input_required_prompt_asks_then_answers() {
        let s = Server::default();
        let Answer::Result(r1) = get_prompt(&s, json!({"name": INPUT_REQUIRED})) else { panic!("expected a result") };
        assert_eq!(r1["resultType"], "input_required");
        assert_eq!(r1["inputRequests"]["user_context"]["method"], "elicitation/create");
        let retry = json!({"name": INPUT_REQUIRED,
                           "inputResponses": {"user_context": {"action": "accept", "content": {"context": "test context"}}}});
        assert_eq!(msgs(get_prompt(&s, retry))[0]["content"]["text"], "Answer using this context: test context");
    }

    #[test]
    fn listing_describes_every_prompt() {
        let s = Server::default();
        let list = list(&s);
        let prompts = list["prompts"].as_array().unwrap();
        assert_eq!(prompts.len(), CATALOGUE.len());
        assert!(prompts.iter().all(|p| p["name"].is_string() && p["description"].is_string()));
        assert_eq!(
            prompts[1]["arguments"][1],
            json!({"name": "arg2", "description": "Second test argument", "required": true})
        );
    }
}
