//! Reading the standard MCP request headers: trimmed, single-valued, `=?base64?...?=` unwrapped.

use axum::http::HeaderMap;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use hangar_core::jsonrpc::RpcError;

use super::errors::header_mismatch;

/// One header's value, trimmed, or `None` when absent. Repeated or non-UTF-8 values are
/// malformed.
pub fn single(headers: &HeaderMap, name: &str) -> Result<Option<String>, RpcError> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(header_mismatch(format!("Header mismatch: {name} is given more than once")));
    }
    let text = std::str::from_utf8(value.as_bytes())
        .map_err(|_| header_mismatch(format!("Header mismatch: {name} is not valid UTF-8")))?;
    Ok(Some(text.trim().to_owned()))
}

/// A value possibly wrapped as `=?base64?<b64>?=`; anything not fully wrapped is literal. The
/// Base64 is read strictly (RFC 4648 §4, canonical padding, no stray bits): a header value that
/// is not what an encoder produces is malformed and refused, not guessed at.
pub fn unwrap_encoded(name: &str, value: &str) -> Result<String, RpcError> {
    let Some(encoded) = value.strip_prefix("=?base64?").and_then(|rest| rest.strip_suffix("?=")) else {
        return Ok(value.to_owned());
    };
    let malformed = |why: &str| header_mismatch(format!("Header mismatch: {name} is not valid Base64: {why}"));
    let bytes = STANDARD.decode(encoded).map_err(|err| {
        malformed(match err {
            base64::DecodeError::InvalidByte(..) => "it holds a character outside the Base64 alphabet",
            base64::DecodeError::InvalidLength(_) => "its length is not a multiple of 4",
            base64::DecodeError::InvalidLastSymbol(..) => "its last character has stray bits",
            base64::DecodeError::InvalidPadding => "its padding is wrong",
        })
    })?;
    String::from_utf8(bytes).map_err(|_| malformed("it does not decode to UTF-8 text"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn trims_and_refuses_repeats() {
        let mut headers = HeaderMap::new();
        headers.insert("mcp-method", HeaderValue::from_static("  tools/list "));
        assert_eq!(single(&headers, "Mcp-Method").unwrap().as_deref(), Some("tools/list"));
        headers.append("mcp-method", HeaderValue::from_static("tools/call"));
        assert_eq!(single(&headers, "mcp-method").unwrap_err().code, -32020);
        assert_eq!(single(&headers, "mcp-name").unwrap(), None);
    }

    #[test]
    fn unwraps_base64_and_keeps_partial_wrappers_literal() {
        assert_eq!(unwrap_encoded("Mcp-Name", "=?base64?SGVsbG8=?=").unwrap(), "Hello");
        assert_eq!(unwrap_encoded("Mcp-Name", "=?base64?SGVsbG8=").unwrap(), "=?base64?SGVsbG8=");
        assert_eq!(unwrap_encoded("Mcp-Name", "SGVsbG8=").unwrap(), "SGVsbG8=");
        assert_eq!(unwrap_encoded("Mcp-Name", "=?base64?SGVsbG8?=").unwrap_err().code, -32020);
        assert_eq!(unwrap_encoded("Mcp-Name", "=?base64?/w==?=").unwrap_err().code, -32020, "not UTF-8");
    }

    #[test]
    fn base64_is_read_strictly() {
        for (encoded, plain) in [("SGk=", "Hi"), ("SGVs", "Hel"), ("", ""), ("5pel5pys6Kqe", "日本語")] {
            assert_eq!(unwrap_encoded("Mcp-Name", &format!("=?base64?{encoded}?=")).unwrap(), plain);
        }
        for (bad, why) in [
            ("SGVsbG8", "padding"),
            ("SGVs!!!bG8=", "outside the Base64 alphabet"),
            ("S===", ""),
            ("SGV=sbG8", ""),
            ("SGl=", "stray bits"),
        ] {
            let err = unwrap_encoded("Mcp-Name", &format!("=?base64?{bad}?=")).unwrap_err();
            assert_eq!(err.code, -32020, "{bad}");
            assert!(err.message.contains(why), "{bad}: {}", err.message);
        }
    }
}
