//! The fixed payloads the suite's scenarios look for, and content builders.
//! Texts are the ones the suite's scenario descriptions give, byte for byte.

use serde_json::{Value, json};

/// A 1x1 red PNG: the image every SDK's conformance server returns.
pub const PNG_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A complete 46-byte WAV (mono, 16-bit, 8 kHz, one silent sample). The
/// reference servers' WAV announces two data bytes it does not carry; this
/// one is whole, so any client that parses it can.
pub const WAV_BASE64: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQIAAAAAAA==";

pub const SIMPLE_TEXT: &str = "This is a simple text response for testing.";
pub const ERROR_TEXT: &str = "This tool intentionally returns an error for testing";
pub const EMBEDDED_URI: &str = "test://embedded-resource";
pub const EMBEDDED_TEXT: &str = "This is an embedded resource content.";
pub const MIXED_TEXT: &str = "Multiple content types test:";
pub const MIXED_URI: &str = "test://mixed-content-resource";
pub const MIXED_JSON: &str = r#"{"test":"data","value":123}"#;

pub fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

pub fn image() -> Value {
    json!({"type": "image", "data": PNG_BASE64, "mimeType": "image/png"})
}

pub fn audio() -> Value {
    json!({"type": "audio", "data": WAV_BASE64, "mimeType": "audio/wav"})
}

/// An embedded text resource.
pub fn resource(uri: &str, mime_type: &str, text: &str) -> Value {
    json!({"type": "resource", "resource": {"uri": uri, "mimeType": mime_type, "text": text}})
}

/// A complete tool result.
pub fn tool_result(content: Vec<Value>) -> Value {
    json!({"content": content})
}

/// A tool result that reports a failure of the tool itself.
pub fn tool_error(message: &str) -> Value {
    json!({"content": [text(message)], "isError": true})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_are_a_png_and_a_riff_wave() {
        // The base64 of the PNG signature and of "RIFF", then of "WAVE" at byte 8.
        assert!(PNG_BASE64.starts_with("iVBORw0KGgo"));
        assert!(WAV_BASE64.starts_with("UklGR") && WAV_BASE64[8..].starts_with("AABXQVZF"));
        // 46 bytes encode to 64 characters with two '=' of padding.
        assert_eq!((WAV_BASE64.len(), WAV_BASE64.matches('=').count()), (64, 2));
        assert_eq!(audio()["mimeType"], "audio/wav");
        assert_eq!(image()["mimeType"], "image/png");
    }

    #[test]
    fn mixed_json_is_the_suites_object() {
        let v: Value = serde_json::from_str(MIXED_JSON).unwrap();
        assert_eq!(v, json!({"test": "data", "value": 123}));
    }
}
