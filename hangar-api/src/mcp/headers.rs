//! Reading the standard MCP request headers: trimmed, single-valued, `=?base64?...?=` unwrapped.

use axum::http::HeaderMap;

use super::base64;
use super::errors::RpcError;

/// One header's value, trimmed, or `None` when absent. Repeated or non-UTF-8 values are
/// malformed.
pub fn single(headers: &HeaderMap, name: &str) -> Result<Option<String>, RpcError> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(RpcError::header_mismatch(format!("Header mismatch: {name} is given more than once")));
    }
    let text = std::str::from_utf8(value.as_bytes())
        .map_err(|_| RpcError::header_mismatch(format!("Header mismatch: {name} is not valid UTF-8")))?;
    Ok(Some(text.trim().to_owned()))
}

/// A value possibly wrapped as `=?base64?<b64>?=`; anything not fully wrapped is literal.
pub fn unwrap_encoded(name: &str, value: &str) -> Result<String, RpcError> {
    let Some(encoded) = value.strip_prefix("=?base64?").and_then(|rest| rest.strip_suffix("?=")) else {
        return Ok(value.to_owned());
    };
    let malformed =
        |why: &str| RpcError::header_mismatch(format!("Header mismatch: {name} is not valid Base64: {why}"));
    let bytes = base64::decode(encoded).map_err(malformed)?;
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
}
