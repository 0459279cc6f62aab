//! JSON-RPC ids, kept as the client wrote them.
//!
//! A `serde_json::Value` would turn `1e2` into `100.0`, `18446744073709551616` into
//! `1.8446744073709552e19` and `-0` into `0`, so the id is never parsed into one: it is kept as
//! its raw JSON text from the request body to the answer, and written back byte for byte.
//! (serde_json's `arbitrary_precision` would do the same for every number everywhere, at a heap
//! allocation per number on the hot path, and it breaks `flatten`ed records read from the
//! control socket; the id is the only number that must survive untouched.)

use hangar_core::jsonrpc::MessageId;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// An id's JSON text, exactly as received.
#[derive(Debug, Clone)]
pub struct Id(Box<RawValue>);

impl Id {
    /// What answers echo when no id could be read.
    pub fn null() -> Id {
        Id(RawValue::NULL.to_owned())
    }

    /// JSON-RPC ids are strings or numbers (raw JSON text starts with `"`, `-` or a digit
    /// exactly for those).
    pub fn is_string_or_number(&self) -> bool {
        matches!(self.0.get().as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9'))
    }

    /// The id as a JSON value (what keys it at the supervisor, as a cancel names it).
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.0.get()).unwrap_or(Value::Null)
    }

    /// The id's JSON text.
    #[cfg(test)]
    pub fn as_str(&self) -> &str {
        self.0.get()
    }
}

impl MessageId for Id {
    fn is_string_or_number(&self) -> bool {
        Id::is_string_or_number(self)
    }
}

impl PartialEq for Id {
    fn eq(&self, other: &Id) -> bool {
        self.0.get() == other.0.get()
    }
}

/// What an answer echoes: an [`Id`] as received, or a `Value` (in practice `Value::Null`, for a
/// message whose id could not be read; a `Value` written back is whatever it holds).
pub trait Echo {
    fn echo(&self) -> Id;
}

impl Echo for Id {
    fn echo(&self) -> Id {
        self.clone()
    }
}

/// An id an invalid message let us read, or null.
impl Echo for Option<Id> {
    fn echo(&self) -> Id {
        self.clone().unwrap_or_else(Id::null)
    }
}

impl Echo for Value {
    fn echo(&self) -> Id {
        Id(RawValue::from_string(self.to_string()).unwrap_or_else(|_| RawValue::NULL.to_owned()))
    }
}

/// Tests build messages as `Value`s; production reads them with [`Incoming::decode`].
#[cfg(test)]
impl From<Value> for Id {
    fn from(value: Value) -> Id {
        value.echo()
    }
}

impl Serialize for Id {
    /// With serde_json's serializer, the raw text as it is.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// One `/mcp` body: its `id` as raw text (when it is an object with one) and everything else.
#[derive(Debug)]
pub struct Incoming {
    /// The body without its `id`.
    pub body: Value,
    pub id: Option<Id>,
    /// `params._meta.progressToken` as written: the client's own id for its progress
    /// notifications, echoed in each.
    pub progress_token: Option<Id>,
}

impl Incoming {
    /// Reads a body in one pass; only an object's top-level `id` is kept raw (and a progress
    /// token, read again from the bytes in the rarer case there is one).
    pub fn decode(bytes: &[u8]) -> Result<Incoming, serde_json::Error> {
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
        if first != Some(&b'{') {
            return Ok(Incoming { body: serde_json::from_slice(bytes)?, id: None, progress_token: None });
        }
        let mut incoming: Incoming = serde_json::from_slice(bytes)?;
        if incoming.body.pointer("/params/_meta/progressToken").is_some_and(|t| t.is_number() || t.is_string()) {
            incoming.progress_token = raw_progress_token(bytes);
        }
        Ok(incoming)
    }
}

/// `params._meta.progressToken` as written; `None` where the body is ambiguous (a repeated key).
fn raw_progress_token(bytes: &[u8]) -> Option<Id> {
    #[derive(Deserialize)]
    struct Body<'a> {
        #[serde(borrow)]
        params: Option<Params<'a>>,
    }
    #[derive(Deserialize)]
    struct Params<'a> {
        #[serde(borrow, rename = "_meta")]
        meta: Option<Meta<'a>>,
    }
    #[derive(Deserialize)]
    struct Meta<'a> {
        #[serde(borrow, rename = "progressToken")]
        progress_token: Option<&'a RawValue>,
    }
    let body: Body = serde_json::from_slice(bytes).ok()?;
    Some(Id(body.params?.meta?.progress_token?.to_owned()))
}

#[cfg(test)]
impl From<Value> for Incoming {
    fn from(mut body: Value) -> Incoming {
        let id = body.as_object_mut().and_then(|map| map.remove("id")).map(Id::from);
        Incoming { body, id, progress_token: None }
    }
}

impl<'de> Deserialize<'de> for Incoming {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Incoming, D::Error> {
        deserializer.deserialize_map(ObjectVisitor)
    }
}

struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = Incoming;

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Incoming, A::Error> {
        let mut map = Map::new();
        let mut id = None;
        // A repeated key keeps its last value, as `Value` does.
        while let Some(key) = access.next_key::<String>()? {
            if key == "id" {
                id = Some(Id(access.next_value::<Box<RawValue>>()?));
            } else {
                map.insert(key, access.next_value()?);
            }
        }
        Ok(Incoming { body: Value::Object(map), id, progress_token: None })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ids_keep_their_exact_text() {
        for id in ["18446744073709551616", "1e2", "-0", "1.0", "1E+2", "-99999999999999999999999", r#""a\u00e9""#] {
            let body = format!(r#"{{"jsonrpc":"2.0","id": {id} ,"method":"ping"}}"#);
            let incoming = Incoming::decode(body.as_bytes()).unwrap();
            let id_out = incoming.id.unwrap();
            assert_eq!(id_out.as_str(), id);
            assert!(id_out.is_string_or_number());
            assert_eq!(serde_json::to_string(&id_out).unwrap(), id, "written back as it came");
            assert_eq!(incoming.body, serde_json::json!({"jsonrpc": "2.0", "method": "ping"}));
        }
    }

    #[test]
    fn progress_tokens_keep_their_exact_text() {
        let body =
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken": 1e2}}}"#;
        assert_eq!(Incoming::decode(body).unwrap().progress_token.unwrap().as_str(), "1e2");
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":"\u0070"}}}"#;
        assert_eq!(Incoming::decode(body).unwrap().progress_token.unwrap().as_str(), r#""\u0070""#);
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":null}}}"#;
        assert!(Incoming::decode(body).unwrap().progress_token.is_none(), "not a token");
    }

    #[test]
    fn other_bodies_and_ids() {
        let incoming = Incoming::decode(b" [1, 2]").unwrap();
        assert_eq!((incoming.body, incoming.id), (serde_json::json!([1, 2]), None));
        let incoming = Incoming::decode(br#"{"id": {"no": 1}, "id": null}"#).unwrap();
        assert!(!incoming.id.unwrap().is_string_or_number(), "the last one wins, and null is no id");
        assert!(Incoming::decode(b"{\"id\": 1").is_err());
        assert!(Incoming::decode(b"{\"id\": 1} x").is_err());
        assert_eq!(serde_json::to_string(&Id::null()).unwrap(), "null");
    }
}
