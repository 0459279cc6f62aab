//! A 2026-07-28 request's custom headers (SEP-2243, `Mcp-Param-<Name>`), read for the
//! supervisor to check against the called tool's `x-mcp-header` parameters: each trimmed,
//! single-valued and `=?base64?...?=`-unwrapped. A malformed one (repeated, not UTF-8, bad
//! Base64) or too many of them is refused here, before anything is called.

use axum::http::HeaderMap;
use hangar_core::custom_headers::{HEADER_PREFIX, MAX_HEADERS, ParamHeaders};
use hangar_core::jsonrpc::RpcError;

use super::errors::header_mismatch;
use super::headers::{single, unwrap_encoded};

/// The request's `Mcp-Param-*` headers: the name after the prefix, lower-case (header names are
/// case-insensitive; `http` stores them lower-case), to the decoded value.
pub fn read(headers: &HeaderMap) -> Result<ParamHeaders, RpcError> {
    let prefix = HEADER_PREFIX.to_ascii_lowercase();
    let mut found = ParamHeaders::new();
    for name in headers.keys() {
        let Some(param) = name.as_str().strip_prefix(&prefix) else { continue };
        if found.len() == MAX_HEADERS {
            return Err(header_mismatch(format!("Header mismatch: more than {MAX_HEADERS} {HEADER_PREFIX}* headers")));
        }
        let Some(value) = single(headers, name.as_str())? else { continue };
        found.insert(param.to_owned(), unwrap_encoded(name.as_str(), &value)?);
    }
    Ok(found)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use axum::http::{HeaderName, HeaderValue};

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(HeaderName::from_bytes(name.as_bytes()).unwrap(), HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn values_are_trimmed_unwrapped_and_keyed_by_lower_case_name() {
        let read = read(&headers(&[
            ("Mcp-Param-Region", " eu-west "),
            ("mcp-param-greeting", "=?base64?SGVsbG8=?="),
            ("Mcp-Param-Literal", "=?base64?SGVsbG8="),
            ("Mcp-Name", "not a param"),
        ]))
        .unwrap();
        let expected: ParamHeaders = [("greeting", "Hello"), ("literal", "=?base64?SGVsbG8="), ("region", "eu-west")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        assert_eq!(read, expected);
    }

    #[test]
    fn hostile_headers_are_refused_as_mismatches() {
        for bad in [
            headers(&[("Mcp-Param-Region", "=?base64?SGVsbG8?=")]),
            headers(&[("Mcp-Param-Region", "=?base64?SGVs!!!bG8=?=")]),
            headers(&[("Mcp-Param-Region", "a"), ("Mcp-Param-Region", "b")]),
            headers(&[("Mcp-Param-Region", "=?base64?/w==?=")]),
        ] {
            assert_eq!(read(&bad).unwrap_err().code, -32020, "{bad:?}");
        }
        let mut many = HeaderMap::new();
        for n in 0..=MAX_HEADERS {
            many.insert(
                HeaderName::from_bytes(format!("mcp-param-p{n}").as_bytes()).unwrap(),
                HeaderValue::from_static("x"),
            );
        }
        assert_eq!(read(&many).unwrap_err().code, -32020);
        let mut raw = HeaderMap::new();
        raw.insert("mcp-param-region", HeaderValue::from_bytes(b"caf\xe9").unwrap());
        assert_eq!(read(&raw).unwrap_err().code, -32020, "not UTF-8");
    }
}
