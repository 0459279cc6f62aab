//! `completion/complete` for the prompt arguments and the template's `{id}`.

use serde_json::{Value, json};

use super::prompts::WITH_ARGUMENTS;
use super::request::{Answer, Req};
use super::resources::TEMPLATE;

const WORDS: &[&str] = &["paris", "park", "party", "test", "testing"];
const IDS: &[&str] = &["1", "2", "3", "123"];

pub fn complete(req: &Req) -> Answer {
    let reference = req.params.get("ref");
    let kind = reference.and_then(|r| r.get("type")).and_then(Value::as_str);
    let argument = req.params.get("argument");
    let (Some(name), Some(value)) = (
        argument.and_then(|a| a.get("name")).and_then(Value::as_str),
        argument.and_then(|a| a.get("value")).and_then(Value::as_str),
    ) else {
        return Answer::invalid("argument must have a string name and value");
    };
    let candidates =
        match (kind, reference.and_then(|r| r.get("name").or_else(|| r.get("uri"))).and_then(Value::as_str)) {
            (Some("ref/prompt"), Some(WITH_ARGUMENTS)) if name == "arg1" || name == "arg2" => WORDS,
            (Some("ref/resource"), Some(TEMPLATE)) if name == "id" => IDS,
            _ => return Answer::invalid("nothing to complete for this reference and argument"),
        };
    let values: Vec<&str> = candidates.iter().copied().filter(|c| c.starts_with(value)).collect();
    Answer::Result(json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}))
}

#[cfg(test)]
mod tests {
    use super::super::request::tests::modern;
    use super::*;

    fn complete_with(params: Value) -> Answer {
        complete(&modern(params, json!({})))
    }

    #[test]
    fn prompt_arguments_complete_by_prefix() {
        let got = complete_with(json!({"ref": {"type": "ref/prompt", "name": WITH_ARGUMENTS},
                                       "argument": {"name": "arg1", "value": "test"}}));
        assert_eq!(
            got,
            Answer::Result(json!({"completion": {"values": ["test", "testing"], "total": 2, "hasMore": false}}))
        );
        let got = complete_with(json!({"ref": {"type": "ref/prompt", "name": WITH_ARGUMENTS},
                                       "argument": {"name": "arg2", "value": "zz"}}));
        assert_eq!(got, Answer::Result(json!({"completion": {"values": [], "total": 0, "hasMore": false}})));
    }

    #[test]
    fn template_ids_complete_and_unknown_references_are_invalid() {
        let got = complete_with(json!({"ref": {"type": "ref/resource", "uri": TEMPLATE},
                                       "argument": {"name": "id", "value": "12"}}));
        assert_eq!(got, Answer::Result(json!({"completion": {"values": ["123"], "total": 1, "hasMore": false}})));
        for bad in [
            json!({"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "arg1", "value": ""}}),
            json!({"ref": {"type": "ref/prompt", "name": WITH_ARGUMENTS}}),
        ] {
            assert!(matches!(complete_with(bad), Answer::Error { code: -32602, .. }));
        }
    }
}
