//! A protected upstream and a witness (--require-auth-file, --record-headers): what the tests of
//! upstream credentials need to see from the far end. Each request's headers can be written to a
//! file, one JSON object per line, so a test sees exactly what reached the upstream; and a
//! request whose `Authorization` is not the file's text (re-read at every request, so a rotation
//! is seen at once) is answered 401 with a `WWW-Authenticate` challenge, as a resource server
//! does (RFC 6750, RFC 9728), and a body quoting the `Authorization` it got.

use std::io::Write as _;
use std::path::PathBuf;

use super::request::Head;
use super::response::Response;
use crate::log::log;

/// What the server checks and records of each request's headers.
#[derive(Debug, Default)]
pub struct Witness {
    /// The expected `Authorization` value is this file's text, without its line break.
    pub require_auth_file: Option<PathBuf>,
    /// Each request's headers are appended here as one JSON line.
    pub record_headers: Option<PathBuf>,
}

/// The challenge a refused request gets; its `error_description` is free text a gateway must
/// never repeat on its own surfaces.
pub const CHALLENGE: &str = "Bearer realm=\"fake-upstream\", scope=\"mcp:tools\", \
     resource_metadata=\"http://127.0.0.1/.well-known/oauth-protected-resource/mcp\", error=\"invalid_token\", \
     error_description=\"FAKE-FREE-TEXT the token is not one I know\"";

impl Witness {
    /// Records `head`, then the refusal it gets, if any.
    pub fn check(&self, head: &Head) -> Option<Response> {
        if let Some(path) = &self.record_headers {
            let headers: serde_json::Map<String, serde_json::Value> =
                head.headers.iter().map(|(name, value)| (name.clone(), value.clone().into())).collect();
            let line = format!("{}\n", serde_json::Value::Object(headers));
            let written = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut file| file.write_all(line.as_bytes()));
            if let Err(e) = written {
                log(&format!("cannot record the request's headers: {e}"));
            }
        }
        let path = self.require_auth_file.as_ref()?;
        let expected = std::fs::read_to_string(path).unwrap_or_default();
        let expected = expected.trim_end_matches(['\n', '\r']);
        if !expected.is_empty() && head.header("authorization") == Some(expected) {
            return None;
        }
        log("refusing a request without the expected Authorization (401)");
        // As some servers do, the refusal quotes what it got: a gateway logging the body must
        // clean its own credential out of it.
        let body = serde_json::json!({
            "error": "invalid_token",
            "note": "FAKE-FREE-TEXT in the body",
            "got": head.header("authorization"),
        });
        Some(Response::json(401, &body).header("WWW-Authenticate", CHALLENGE))
    }
}
