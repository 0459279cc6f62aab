//! Which trace a request belongs to (W3C Trace Context): `params._meta` as the 2026-07-28
//! revision carries it, else the HTTP `traceparent` and `tracestate` headers. Malformed context
//! is ignored (the request is served as if it had none), never refused.

use axum::http::{HeaderMap, HeaderName};
use hangar_core::jsonrpc::RpcError;
use hangar_core::trace::{TRACEPARENT, TRACESTATE, TraceContext};
use serde_json::Value;

use super::headers::single;

/// The context a request carries: its `_meta`'s, else its headers'.
pub fn incoming(headers: &HeaderMap, params: Option<&Value>) -> Option<TraceContext> {
    let by_meta = params.and_then(|p| p.get("_meta")).and_then(Value::as_object).and_then(TraceContext::from_meta);
    by_meta.or_else(|| from_headers(headers))
}

/// The header's name, made once: looking a `&str` up would parse it on every call.
static TRACEPARENT_HEADER: HeaderName = HeaderName::from_static(TRACEPARENT);

/// A repeated or non-UTF-8 `traceparent` counts as none; a bad `tracestate` is dropped alone.
fn from_headers(headers: &HeaderMap) -> Option<TraceContext> {
    // The common case, no header, is one lookup.
    headers.get(&TRACEPARENT_HEADER)?;
    let traceparent = single(headers, TRACEPARENT).ok().flatten()?;
    let tracestate = single(headers, TRACESTATE).ok().flatten();
    TraceContext::parse(&traceparent, tracestate.as_deref())
}

/// The API span's `outcome`: `ok`, `is_error`, the hangar's error type where its answer names
/// one, or `jsonrpc_error` for a JSON-RPC error answer.
pub fn outcome(result: Result<&Value, &RpcError>) -> String {
    match result {
        Ok(value) => value
            .get("structuredContent")
            .and_then(|s| s.get("error_type"))
            .and_then(Value::as_str)
            .filter(|_| value.get("isError").and_then(Value::as_bool) == Some(true))
            .unwrap_or_else(|| hangar_core::trace::outcome(Ok(value)))
            .to_owned(),
        Err(_) => "jsonrpc_error".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;
    use serde_json::json;

    use super::*;

    const META: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const HEADER: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    fn headers(values: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in values {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn meta_wins_over_the_header_and_the_header_serves_alone() {
        let params = json!({"_meta": {"traceparent": META}});
        let both = incoming(&headers(&[("traceparent", HEADER)]), Some(&params));
        assert_eq!(both.map(|t| t.traceparent()).as_deref(), Some(META));
        let header = incoming(&headers(&[("traceparent", HEADER), ("tracestate", "a=b")]), Some(&json!({})));
        assert_eq!(header.as_ref().map(TraceContext::traceparent).as_deref(), Some(HEADER));
        assert_eq!(header.and_then(|t| t.tracestate).as_deref(), Some("a=b"));
    }

    #[test]
    fn bad_context_is_no_context() {
        assert_eq!(incoming(&headers(&[("traceparent", "nonsense")]), None), None);
        assert_eq!(incoming(&headers(&[("traceparent", HEADER), ("traceparent", HEADER)]), None), None);
        let bad_meta = json!({"_meta": {"traceparent": 7}});
        assert_eq!(incoming(&HeaderMap::new(), Some(&bad_meta)), None);
    }

    #[test]
    fn outcomes() {
        assert_eq!(outcome(Ok(&json!({"content": []}))), "ok");
        assert_eq!(outcome(Ok(&json!({"isError": true}))), "is_error");
        let hangar_error = json!({"isError": true, "structuredContent": {"error_type": "timeout"}});
        assert_eq!(outcome(Ok(&hangar_error)), "timeout");
        assert_eq!(outcome(Err(&RpcError::invalid_params("x"))), "jsonrpc_error");
    }
}
