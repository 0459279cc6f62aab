//! Resources: two static ones, a watched one (the legacy subscribe
//! scenarios), and the template `test://template/{id}/data`.

use serde_json::{Value, json};

use super::content::PNG_BASE64;
use super::request::{Answer, Req};

pub const STATIC_TEXT_URI: &str = "test://static-text";
pub const STATIC_TEXT: &str = "This is the content of the static text resource.";
const STATIC_BINARY_URI: &str = "test://static-binary";
const WATCHED_URI: &str = "test://watched-resource";
const WATCHED_TEXT: &str = "Watched resource content";
pub const TEMPLATE: &str = "test://template/{id}/data";
const TEMPLATE_PREFIX: &str = "test://template/";
const TEMPLATE_SUFFIX: &str = "/data";

/// The legacy (2025-11-25) code for an unknown resource; 2026-07-28 uses
/// -32602 instead (SEP-2164).
const LEGACY_NOT_FOUND: i64 = -32002;

pub fn list() -> Value {
    json!({"resources": [
        {"uri": STATIC_TEXT_URI, "name": "static-text", "title": "Static Text Resource",
         "description": "A static text resource for testing", "mimeType": "text/plain"},
        {"uri": STATIC_BINARY_URI, "name": "static-binary", "title": "Static Binary Resource",
         "description": "A static binary resource (image) for testing", "mimeType": "image/png"},
        {"uri": WATCHED_URI, "name": "watched-resource", "title": "Watched Resource",
         "description": "A resource clients may subscribe to (it never changes)", "mimeType": "text/plain"},
    ]})
}

pub fn templates() -> Value {
    json!({"resourceTemplates": [
        {"uriTemplate": TEMPLATE, "name": "template", "title": "Resource Template",
         "description": "A resource template with parameter substitution", "mimeType": "application/json"},
    ]})
}

/// The `{id}` of a URI the template matches: one non-empty path segment.
pub fn template_id(uri: &str) -> Option<&str> {
    let id = uri.strip_prefix(TEMPLATE_PREFIX)?.strip_suffix(TEMPLATE_SUFFIX)?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

/// The template's text, its keys in the order the suite shows them (a
/// serialized map would sort them).
fn template_text(id: &str) -> String {
    let quoted = |s: &str| Value::from(s).to_string();
    format!(r#"{{"id":{},"templateTest":true,"data":{}}}"#, quoted(id), quoted(&format!("Data for ID: {id}")))
}

pub fn read(req: &Req) -> Answer {
    let uri = match req.str_param("uri") {
        Ok(uri) => uri,
        Err(e) => return e,
    };
    let content = match uri {
        STATIC_TEXT_URI => json!({"uri": uri, "mimeType": "text/plain", "text": STATIC_TEXT}),
        STATIC_BINARY_URI => json!({"uri": uri, "mimeType": "image/png", "blob": PNG_BASE64}),
        WATCHED_URI => json!({"uri": uri, "mimeType": "text/plain", "text": WATCHED_TEXT}),
        _ => match template_id(uri) {
            Some(id) => json!({"uri": uri, "mimeType": "application/json", "text": template_text(id)}),
            None => {
                // Never an empty `contents`: an error naming the URI.
                let code = if req.modern() { crate::protocol::INVALID_PARAMS } else { LEGACY_NOT_FOUND };
                return Answer::error(code, "Resource not found").with_data(json!({"uri": uri}));
            }
        },
    };
    Answer::Result(json!({"contents": [content]}))
}

/// Legacy `resources/subscribe` and `unsubscribe`: accepted for any known
/// resource. Nothing here ever changes, so no update is ever owed.
pub fn subscribe(req: &Req) -> Answer {
    match read(req) {
        Answer::Result(_) => Answer::Result(json!({})),
        error => error,
    }
}

#[cfg(test)]
mod tests {
    use super::super::request::LegacySetup;
    use super::super::request::tests::{legacy, modern};
    use super::*;

    fn read_uri(uri: &str) -> Answer {
        read(&modern(json!({"uri": uri}), json!({})))
    }

    fn content(answer: Answer) -> Value {
        let Answer::Result(r) = answer else { panic!("expected a result") };
        assert_eq!(r["contents"].as_array().map(Vec::len), Some(1));
        r["contents"][0].clone()
    }

    #[test]
    fn static_resources_read_as_the_suite_expects() {
        assert_eq!(
            content(read_uri("test://static-text")),
            json!({"uri": "test://static-text", "mimeType": "text/plain",
                   "text": "This is the content of the static text resource."})
        );
        let c = content(read_uri("test://static-binary"));
        assert_eq!((c["mimeType"].as_str(), c["blob"].as_str()), (Some("image/png"), Some(PNG_BASE64)));
    }

    #[test]
    fn template_substitutes_the_id() {
        let c = content(read_uri("test://template/123/data"));
        assert_eq!(c["uri"], "test://template/123/data");
        assert_eq!(c["mimeType"], "application/json");
        assert_eq!(c["text"], r#"{"id":"123","templateTest":true,"data":"Data for ID: 123"}"#);
        assert_eq!(template_id("test://template/a\"b/data"), Some("a\"b"));
        let quoted = content(read_uri("test://template/a\"b/data"));
        assert!(serde_json::from_str::<Value>(quoted["text"].as_str().unwrap()).is_ok());
        assert_eq!(template_id("test://template//data"), None);
        assert_eq!(template_id("test://template/1/2/data"), None);
    }

    #[test]
    fn unknown_resources_are_errors_naming_the_uri_per_era() {
        let uri = "test://nonexistent-resource-for-conformance-testing";
        let Answer::Error { code, data, .. } = read_uri(uri) else { panic!("expected an error") };
        assert_eq!((code, data), (-32602, Some(json!({"uri": uri}))));
        let Answer::Error { code, .. } = read(&legacy(json!({"uri": uri}), &LegacySetup::default())) else {
            panic!("expected an error")
        };
        assert_eq!(code, -32002);
        assert!(matches!(read(&modern(json!({}), json!({}))), Answer::Error { code: -32602, .. }));
    }

    #[test]
    fn listings_have_names_and_the_template() {
        for r in list()["resources"].as_array().unwrap() {
            assert!(r["uri"].is_string() && r["name"].is_string() && r["description"].is_string());
        }
        assert_eq!(list()["resources"][0]["uri"], STATIC_TEXT_URI);
        assert_eq!(templates()["resourceTemplates"][0]["uriTemplate"], TEMPLATE);
    }

    #[test]
    fn subscribe_accepts_known_resources_only() {
        let setup = LegacySetup::default();
        assert_eq!(subscribe(&legacy(json!({"uri": "test://watched-resource"}), &setup)), Answer::Result(json!({})));
        assert!(matches!(subscribe(&legacy(json!({"uri": "test://nope"}), &setup)), Answer::Error { .. }));
    }
}
