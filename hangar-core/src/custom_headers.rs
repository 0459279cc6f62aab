//! SEP-2243 custom headers: a tool's parameter annotated `x-mcp-header: <Name>` in its
//! `inputSchema` travels, on the Streamable HTTP transport (2026-07-28), in the header
//! `Mcp-Param-<Name>` as well as in the body, so intermediaries can route on it without reading
//! the body. A server must refuse a request whose header and body disagree (a missing header for
//! a value in the body included) with HTTP 400 and -32020 (`HeaderMismatch`).
//!
//! The pure rules: which parameters of a schema are declared, what a body value reads as in a
//! header, and whether the headers a client sent match its arguments. Base64 unwrapping of
//! header values is the HTTP layer's (it refuses malformed encodings before anything else).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::echo::bounded;

/// The schema annotation that names a parameter's header.
pub const ANNOTATION: &str = "x-mcp-header";
/// What every custom header's name starts with.
pub const HEADER_PREFIX: &str = "Mcp-Param-";
/// The most custom headers one request may carry: more is refused, not read (a client has no
/// reason to send more than a tool declares, and nothing declares this many).
pub const MAX_HEADERS: usize = 64;

/// A request's custom headers: the name after [`HEADER_PREFIX`], lower-case, to the value
/// as decoded.
pub type ParamHeaders = BTreeMap<String, String>;

/// What a caller that resolves a name before it calls (to answer an unknown name or a
/// mismatch before it starts an event stream) asks to have checked: its headers against the
/// arguments it will call with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParamCheck {
    pub headers: ParamHeaders,
    pub arguments: Value,
}

/// One parameter mirrored into a header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    /// The header's name after [`HEADER_PREFIX`], as the tool declared it.
    pub header: String,
    /// The argument it mirrors (a top-level property of the input schema).
    pub param: String,
}

impl Declared {
    /// The full header name, `Mcp-Param-<Name>`.
    pub fn header_name(&self) -> String {
        format!("{HEADER_PREFIX}{}", self.header)
    }
}

/// The parameters `input_schema` mirrors into headers: top-level properties whose annotation
/// is a valid header-name token on a primitive type. A schema that declares one name twice
/// (case-insensitively) is invalid as a whole, per the SEP: none of its declarations count,
/// so such a tool is called as if it declared none.
pub fn declared(input_schema: &Value) -> Vec<Declared> {
    let Some(properties) = input_schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut found: Vec<Declared> = Vec::new();
    for (param, schema) in properties {
        let Some(annotation) = schema.get(ANNOTATION) else { continue };
        let Some(header) = annotation.as_str().filter(|name| is_token(name)) else { continue };
        if !primitive(schema) {
            continue;
        }
        if found.iter().any(|d| d.header.eq_ignore_ascii_case(header)) {
            return Vec::new();
        }
        found.push(Declared { header: header.to_owned(), param: param.clone() });
    }
    found
}

/// RFC 9110 §5.1 `token`: one or more visible ASCII characters that are not delimiters.
fn is_token(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A property whose values fit a header: a string, integer, boolean or number (the conformance
/// suite annotates numbers, and SDKs accept them), or one that names no type.
fn primitive(schema: &Value) -> bool {
    match schema.get("type") {
        None => true,
        Some(Value::String(kind)) => matches!(kind.as_str(), "string" | "integer" | "boolean" | "number"),
        Some(_) => false,
    }
}

/// What a body value reads as in a header: a string as it is, a number or boolean as JSON
/// writes it; `None` for null, absent, or a value no header can carry (object, array).
pub fn header_text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        _ => None,
    }
}

/// How a request's custom headers disagree with its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// The body has a value, the header is absent.
    Missing { header: String },
    /// The header is present, the body has no value for it.
    Unexpected { header: String },
    /// Both are present and differ.
    Differs { header: String, in_header: String, in_body: String },
}

impl Mismatch {
    /// The refusal's text (values bounded: they are the client's own, echoed back to it).
    pub fn message(&self) -> String {
        match self {
            Mismatch::Missing { header } => format!("Header mismatch: {header} header is missing"),
            Mismatch::Unexpected { header } => {
                format!("Header mismatch: {header} header is given but the body has no value for it")
            }
            Mismatch::Differs { header, in_header, in_body } => format!(
                "Header mismatch: {header} header is `{}` but the body says `{}`",
                bounded(in_header),
                bounded(in_body)
            ),
        }
    }
}

/// Whether the headers a client sent (`given`: the name after the prefix, lower-case, to the
/// decoded value) mirror `arguments` for every declared parameter. Headers for parameters the
/// tool does not declare are not the hangar's to judge (an intermediary may add its own).
pub fn check(declared: &[Declared], arguments: &Value, given: &ParamHeaders) -> Result<(), Mismatch> {
    for declaration in declared {
        let header = declaration.header_name();
        let in_body = header_text(arguments.get(&declaration.param));
        match (given.get(&declaration.header.to_ascii_lowercase()), in_body) {
            (None, None) => {}
            (None, Some(_)) => return Err(Mismatch::Missing { header }),
            (Some(_), None) => return Err(Mismatch::Unexpected { header }),
            (Some(in_header), Some(in_body)) if *in_header == in_body => {}
            (Some(in_header), Some(in_body)) => {
                return Err(Mismatch::Differs { header, in_header: in_header.clone(), in_body });
            }
        }
    }
    Ok(())
}

/// The headers a call with `arguments` carries to an upstream: each declared parameter that has
/// a value, as (full header name, plain text); the transport encodes the text.
pub fn headers_for(declared: &[Declared], arguments: &Value) -> Vec<(String, String)> {
    declared.iter().filter_map(|d| header_text(arguments.get(&d.param)).map(|text| (d.header_name(), text))).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "priority": {"type": "integer", "x-mcp-header": "Priority"},
                "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
                "note": {"type": "string"},
            },
        })
    }

    fn given(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn only_valid_annotations_on_primitive_properties_are_declared() {
        let headers: Vec<String> = declared(&schema()).into_iter().map(|d| d.header).collect();
        assert_eq!(headers, ["Dry-Run", "Priority", "Region"]);
        for bad in ["My Region", "Region:Primary", "Région", "Region\t1", ""] {
            let schema = json!({"properties": {"v": {"type": "string", "x-mcp-header": bad}}});
            assert!(declared(&schema).is_empty(), "{bad:?} is no header name");
        }
        let object = json!({"properties": {"v": {"type": "object", "x-mcp-header": "V"}}});
        assert!(declared(&object).is_empty(), "an object cannot ride in a header");
        let twice = json!({"properties": {
            "a": {"type": "string", "x-mcp-header": "MyField"},
            "b": {"type": "string", "x-mcp-header": "myfield"},
        }});
        assert!(declared(&twice).is_empty(), "a duplicate name invalidates every declaration");
        assert!(declared(&json!({"type": "object"})).is_empty());
        assert!(declared(&json!("not a schema")).is_empty());
    }

    #[test]
    fn headers_must_mirror_the_body_exactly() {
        let declared = declared(&schema());
        let args = json!({"region": "eu-west", "priority": 3, "dry": false, "note": "x"});
        let all = given(&[("region", "eu-west"), ("priority", "3"), ("dry-run", "false")]);
        assert_eq!(check(&declared, &args, &all), Ok(()));
        // An undeclared header is someone else's business.
        let mut extra = all.clone();
        extra.insert("tenant".into(), "t1".into());
        assert_eq!(check(&declared, &args, &extra), Ok(()));

        let mut missing = all.clone();
        missing.remove("priority");
        assert_eq!(check(&declared, &args, &missing), Err(Mismatch::Missing { header: "Mcp-Param-Priority".into() }));
        let mut wrong = all.clone();
        wrong.insert("region".into(), "us-east".into());
        let err = check(&declared, &args, &wrong).unwrap_err();
        assert!(err.message().contains("Mcp-Param-Region header is `us-east` but the body says `eu-west`"), "{err:?}");
        let only_region = json!({"region": "eu-west"});
        assert_eq!(
            check(&declared, &only_region, &all),
            Err(Mismatch::Unexpected { header: "Mcp-Param-Dry-Run".into() }),
            "a header for a value the body lacks"
        );
        assert_eq!(check(&declared, &json!({"region": null}), &given(&[])), Ok(()), "null sends no header");
    }

    #[test]
    fn an_upstream_gets_a_header_for_each_value_present() {
        let declared = declared(&schema());
        let headers = headers_for(&declared, &json!({"region": "é", "dry": true, "note": "x"}));
        assert_eq!(
            headers,
            [("Mcp-Param-Dry-Run".to_owned(), "true".to_owned()), ("Mcp-Param-Region".into(), "é".into())]
        );
    }
}
