//! The blocking HTTP client of the hangar's REST API: JSON in, JSON or a [`CliError`] out.

use std::time::Duration;

use serde_json::Value;
use ureq::http::Response;

use crate::error::CliError;

/// Long enough for a start to wait out a slow handshake.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// An answer: its HTTP status, its JSON body, and the body's text exactly as sent.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub text: String,
}

pub struct Api {
    base: String,
    api_key: Option<String>,
    agent: ureq::Agent,
}

impl Api {
    pub fn new(url: &str, api_key: Option<String>) -> Api {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .build()
            .into();
        Api { base: url.trim_end_matches('/').to_owned(), api_key: api_key.filter(|k| !k.is_empty()), agent }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// GET `path`; a failure status becomes an error.
    pub fn get(&self, path: &str) -> Result<Answer, CliError> {
        ok(self.get_raw(path)?)
    }

    /// POST `path` with no body; a failure status becomes an error.
    pub fn post(&self, path: &str) -> Result<Answer, CliError> {
        ok(self.post_raw(path)?)
    }

    pub fn get_raw(&self, path: &str) -> Result<Answer, CliError> {
        let mut request = self.agent.get(format!("{}{path}", self.base));
        if let Some(key) = &self.api_key {
            request = request.header("X-API-Key", key);
        }
        self.read(request.call())
    }

    pub fn post_raw(&self, path: &str) -> Result<Answer, CliError> {
        // The API refuses a POST that does not say it is JSON (a web page's cross-site form could
        // not say so), even with no body.
        let mut request = self.agent.post(format!("{}{path}", self.base)).header("Content-Type", "application/json");
        if let Some(key) = &self.api_key {
            request = request.header("X-API-Key", key);
        }
        self.read(request.send_empty())
    }

    fn read(&self, result: Result<Response<ureq::Body>, ureq::Error>) -> Result<Answer, CliError> {
        let unreachable = |err: ureq::Error| CliError::Unreachable { url: self.base.clone(), reason: err.to_string() };
        let mut response = result.map_err(unreachable)?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().map_err(unreachable)?;
        let body = match serde_json::from_str(&text) {
            Ok(body) => body,
            Err(_) if text.trim().is_empty() => Value::Null,
            Err(_) if status >= 400 => Value::String(text.clone()),
            Err(err) => {
                return Err(CliError::Protocol {
                    url: self.base.clone(),
                    reason: format!("the body is not JSON: {err}"),
                });
            }
        };
        Ok(Answer { status, body, text: text.trim_end().to_owned() })
    }
}

/// The body of a success; the error envelope (or the bare status) of a failure.
pub fn ok(answer: Answer) -> Result<Answer, CliError> {
    if answer.status < 400 {
        return Ok(answer);
    }
    Err(failure(answer))
}

pub fn failure(answer: Answer) -> CliError {
    let error = &answer.body["error"];
    match (error["code"].as_str(), error["message"].as_str()) {
        (Some(code), Some(message)) => {
            CliError::Api { status: answer.status, code: code.to_owned(), message: message.to_owned() }
        }
        _ => {
            let text: String = answer.text.trim().chars().take(200).collect();
            CliError::Status { status: answer.status, text }
        }
    }
}

/// A path segment, percent-encoded (a server's name goes into the URL).
pub fn segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(segment("math"), "math");
        assert_eq!(segment("a b/c"), "a%20b%2Fc");
        assert_eq!(segment("é"), "%C3%A9");
    }

    #[test]
    fn the_envelope_becomes_an_api_error() {
        let body = json!({"error": {"code": "X", "message": "m", "details": null}});
        let answer = Answer { status: 404, text: body.to_string(), body };
        assert!(matches!(failure(answer), CliError::Api { status: 404, .. }));
        let answer = Answer { status: 502, body: Value::String("bad gateway".into()), text: "bad gateway\n".into() };
        assert_eq!(failure(answer).to_string(), "the hangar answered HTTP 502: bad gateway");
    }
}
