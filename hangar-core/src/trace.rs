//! W3C Trace Context (level 1): the `traceparent` and `tracestate` a client sends (in a
//! 2026-07-28 request's `params._meta`, or as HTTP headers), read strictly and written back.
//!
//! Bad input is ignored, never fatal: a malformed `traceparent` is as if none was sent (the
//! spec's rule for a receiver), and a malformed `tracestate` is dropped while its `traceparent`
//! is kept.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The `_meta` key (and HTTP header) carrying the trace and parent span.
pub const TRACEPARENT: &str = "traceparent";
/// The `_meta` key (and HTTP header) carrying vendor trace state.
pub const TRACESTATE: &str = "tracestate";

/// `tracestate` may hold at most 32 list members (and we keep at most 512 bytes of it, the size
/// the spec says a receiver must be able to pass on).
const MAX_TRACESTATE_MEMBERS: usize = 32;
const MAX_TRACESTATE_BYTES: usize = 512;

/// One position in a trace: the trace, the span that is the parent of the next one, the flags
/// (bit 0: sampled), and the vendors' `tracestate` as received.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceContext {
    #[serde(with = "hex16")]
    pub trace_id: [u8; 16],
    #[serde(with = "hex8")]
    pub span_id: [u8; 8],
    pub flags: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

impl TraceContext {
    /// Reads a `traceparent` (and its `tracestate`, if any). `None` for anything but a valid
    /// value: version 00 exactly as specified, or a later version's first four fields followed
    /// by nothing or by `-...` (the spec's forward-compatible rule).
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<TraceContext> {
        let value = traceparent.trim_matches([' ', '\t']);
        let bytes = value.as_bytes();
        if bytes.len() < 55 {
            return None;
        }
        let version = hex_byte(&bytes[0..2])?;
        // Version ff is invalid; 00 has exactly 55 characters; later ones may add fields.
        if version == 0xff
            || (version == 0 && bytes.len() != 55)
            || (version != 0 && bytes.len() > 55 && bytes[55] != b'-')
        {
            return None;
        }
        if bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
            return None;
        }
        let trace_id: [u8; 16] = hex_array(&bytes[3..35])?;
        let span_id: [u8; 8] = hex_array(&bytes[36..52])?;
        let flags = hex_byte(&bytes[53..55])?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        let tracestate = tracestate.and_then(valid_tracestate);
        Some(TraceContext { trace_id, span_id, flags, tracestate })
    }

    /// From a request's `params._meta`: its `traceparent` and `tracestate` strings.
    pub fn from_meta(meta: &Map<String, Value>) -> Option<TraceContext> {
        let traceparent = meta.get(TRACEPARENT)?.as_str()?;
        TraceContext::parse(traceparent, meta.get(TRACESTATE).and_then(Value::as_str))
    }

    /// The same trace and state, with `span_id` as the parent of what comes next.
    pub fn child(&self, trace_id: [u8; 16], span_id: [u8; 8], flags: u8) -> TraceContext {
        TraceContext { trace_id, span_id, flags, tracestate: self.tracestate.clone() }
    }

    /// The `traceparent` value (always version 00).
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-{:02x}", hex(&self.trace_id), hex(&self.span_id), self.flags)
    }

    pub fn trace_id_hex(&self) -> String {
        hex(&self.trace_id)
    }

    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// Writes `traceparent` (and `tracestate`, or removes a stale one) into a `_meta` object.
    pub fn write_meta(&self, meta: &mut Map<String, Value>) {
        meta.insert(TRACEPARENT.into(), Value::String(self.traceparent()));
        match &self.tracestate {
            Some(state) => meta.insert(TRACESTATE.into(), Value::String(state.clone())),
            None => meta.remove(TRACESTATE),
        };
    }
}

impl fmt::Display for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.traceparent())
    }
}

/// Writes `trace` into `params._meta` (creating `_meta` if needed); params that are not an
/// object are left alone.
pub fn write_params_meta(params: &mut Map<String, Value>, trace: &TraceContext) {
    let meta = params.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        trace.write_meta(meta);
    }
}

/// The `outcome` attribute of a call's spans, as the audit trail words it: `ok`, `is_error` (a
/// tool's own error result), or the hangar's error type (`timeout`, `forbidden`, ...).
pub fn outcome(result: Result<&Value, crate::ipc_error::ErrorKind>) -> &'static str {
    match result {
        Ok(value) if value.get("isError").and_then(Value::as_bool) == Some(true) => "is_error",
        Ok(_) => "ok",
        Err(kind) => kind.as_str(),
    }
}

/// A `tracestate` worth passing on: list members `key=value` separated by commas (empty members
/// allowed), at most 32 of them and 512 bytes, keys and values of the spec's characters.
fn valid_tracestate(state: &str) -> Option<String> {
    let state = state.trim_matches([' ', '\t']);
    if state.is_empty() || state.len() > MAX_TRACESTATE_BYTES {
        return None;
    }
    let mut members = 0;
    for member in state.split(',').map(|m| m.trim_matches([' ', '\t'])).filter(|m| !m.is_empty()) {
        let (key, value) = member.split_once('=')?;
        if !valid_key(key) || !valid_value(value) {
            return None;
        }
        members += 1;
    }
    (members > 0 && members <= MAX_TRACESTATE_MEMBERS).then(|| state.to_owned())
}

/// `simple-key` or `tenant@system`: lowercase letters, digits and `_-*/`, starting with a
/// letter (or a digit, for a tenant id), at most 256 bytes.
fn valid_key(key: &str) -> bool {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "_-*/".contains(c);
    let part = |s: &str, max: usize, first_digit_ok: bool| {
        let first_ok =
            s.chars().next().is_some_and(|c| c.is_ascii_lowercase() || (first_digit_ok && c.is_ascii_digit()));
        first_ok && s.len() <= max && s.chars().all(allowed)
    };
    match key.split_once('@') {
        None => part(key, 256, false),
        Some((tenant, system)) => part(tenant, 241, true) && part(system, 14, false),
    }
}

/// Printable ASCII but `,` and `=`, at most 256 bytes, not ending in a space.
fn valid_value(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 256
        && !value.ends_with(' ')
        && value.bytes().all(|b| (0x20..=0x7e).contains(&b) && b != b',' && b != b'=')
}

/// Lowercase hex only, as the spec requires. Works on bytes, so no input can cut a character.
fn hex_byte(b: &[u8]) -> Option<u8> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    Some(digit(*b.first()?)? << 4 | digit(*b.get(1)?)?)
}

fn hex_array<const N: usize>(s: &[u8]) -> Option<[u8; N]> {
    if s.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = hex_byte(s.get(2 * i..2 * i + 2)?)?;
    }
    Some(out)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

macro_rules! hex_serde {
    ($name:ident, $n:literal) => {
        mod $name {
            use serde::{Deserialize, Deserializer, Serializer, de::Error};

            pub fn serialize<S: Serializer>(bytes: &[u8; $n], s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&super::hex(bytes))
            }

            pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; $n], D::Error> {
                let text = String::deserialize(d)?;
                super::hex_array(text.as_bytes())
                    .ok_or_else(|| D::Error::custom(concat!("expected ", $n, " bytes of lowercase hex")))
            }
        }
    };
}
hex_serde!(hex16, 16);
hex_serde!(hex8, 8);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_round_trips() {
        let trace = TraceContext::parse(VALID, None).expect("valid");
        assert_eq!(trace.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(trace.span_id, [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
        assert!(trace.sampled());
        assert_eq!(trace.traceparent(), VALID);
    }

    #[test]
    fn surrounding_blanks_are_tolerated() {
        assert!(TraceContext::parse(&format!(" {VALID}\t"), None).is_some());
    }

    #[test]
    fn malformed_traceparents_are_ignored() {
        let bad = [
            "",
            "garbage",
            // Upper-case hex.
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
            // All-zero trace id and span id.
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            // Version ff, and version 00 with more fields.
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            // Wrong separators and lengths.
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            // Multi-byte characters where hex belongs must not panic.
            "00-4bf92f3577b34da6a3ce929d0e0e47é-00f067aa0ba902b7-01",
            "é0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ];
        for value in bad {
            assert_eq!(TraceContext::parse(value, Some("a=b")), None, "{value}");
        }
    }

    #[test]
    fn a_later_version_is_read_by_its_first_fields() {
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes-next";
        let trace = TraceContext::parse(later, None).expect("forward compatible");
        assert_eq!(trace.traceparent(), VALID);
        let glued = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x";
        assert_eq!(TraceContext::parse(glued, None), None);
    }

    #[test]
    fn tracestate_is_kept_when_valid_and_dropped_when_not() {
        let kept = TraceContext::parse(VALID, Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE,t@vendor=x"));
        assert_eq!(
            kept.and_then(|t| t.tracestate).as_deref(),
            Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE,t@vendor=x")
        );
        for bad in ["", "novalue", "UPPER=x", "a=b=c", "a=", &"k=v,".repeat(33), &format!("a={}", "x".repeat(600))] {
            let trace = TraceContext::parse(VALID, Some(bad)).expect("traceparent still valid");
            assert_eq!(trace.tracestate, None, "{bad}");
        }
    }

    #[test]
    fn meta_is_read_and_written() {
        let meta = json!({"traceparent": VALID, "tracestate": "a=b", "other": 1});
        let trace = TraceContext::from_meta(meta.as_object().expect("object")).expect("valid");
        let mut params = Map::new();
        write_params_meta(&mut params, &trace.child(trace.trace_id, [1; 8], 1));
        assert_eq!(
            Value::Object(params),
            json!({"_meta": {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-0101010101010101-01", "tracestate": "a=b"}})
        );
        assert_eq!(TraceContext::from_meta(json!({"traceparent": 5}).as_object().expect("object")), None);
    }

    #[test]
    fn outcomes_are_worded_as_the_audit_trail_does() {
        assert_eq!(outcome(Ok(&json!({"content": []}))), "ok");
        assert_eq!(outcome(Ok(&json!({"isError": true}))), "is_error");
        assert_eq!(outcome(Err(crate::ipc_error::ErrorKind::Timeout)), "timeout");
    }

    #[test]
    fn it_crosses_the_socket_as_hex() {
        let trace = TraceContext::parse(VALID, Some("a=b")).expect("valid");
        let wire = serde_json::to_value(&trace).expect("serializes");
        assert_eq!(
            wire,
            json!({"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7", "flags": 1, "tracestate": "a=b"})
        );
        assert_eq!(serde_json::from_value::<TraceContext>(wire).ok(), Some(trace));
        assert!(
            serde_json::from_value::<TraceContext>(json!({"trace_id": "xy", "span_id": "00", "flags": 0})).is_err()
        );
    }
}
