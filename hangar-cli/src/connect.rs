//! `hangar connect SERVER`: connects the caller's own account at a `per: user` upstream, for a
//! person without a browser where the CLI runs (a server, an SSH session). The hangar mints a
//! connect flow for the CLI's caller (`POST /oauth/connect/{server}`, answered `{url,
//! expires_at}`); the command prints the URL and until when it works, to be opened in any
//! browser. The URL starts a flow for this caller only and works once: the account connected
//! there serves this caller's calls, never another's.

use hangar_core::terminal::visible;
use serde_json::Value;

use crate::client::{Answer, Api, segment};
use crate::error::CliError;

/// Asks the hangar for a connect URL for `server`, as the CLI's caller.
pub fn begin(api: &Api, server: &str) -> Result<Answer, CliError> {
    let answer = api.post(&format!("/oauth/connect/{}", segment(server)))?;
    if answer.body["url"].as_str().is_none() {
        let reason = "the connect answer has no `url`".to_owned();
        return Err(CliError::Protocol { url: api.base().to_owned(), reason });
    }
    Ok(answer)
}

/// What a person reads: the URL on a line of its own (to copy whole), and until when it works;
/// each part the API sent shown visibly (`hangar_core::terminal::visible`), the lines between
/// them the command's own.
pub fn instructions(server: &str, body: &Value) -> String {
    let server = visible(server);
    let url = visible(body["url"].as_str().unwrap_or_default());
    let until = match body["expires_at"].as_str() {
        Some(at) => format!("It works once, until {}.", visible(at)),
        None => "It works once.".to_owned(),
    };
    format!("To connect your account at {server}, open this URL in a browser and sign in there:\n\n  {url}\n\n{until}")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::testing::answer_once;
    use hangar_runtime::exit::Sysexit;

    #[test]
    fn the_url_and_its_expiry_are_printed() {
        let body = json!({"url": "http://h/oauth/connect/lin?flow=abc", "expires_at": "2026-12-04T17:00:00Z"});
        let text = instructions("lin", &body);
        assert!(text.contains("\n  http://h/oauth/connect/lin?flow=abc\n"), "{text}");
        assert!(text.ends_with("It works once, until 2026-12-04T17:00:00Z."), "{text}");
        // No answer adds a line of its own.
        let forged = json!({"url": "http://h/x\nOK, connected", "expires_at": null});
        assert_eq!(instructions("lin", &forged).lines().count(), 5);
    }

    #[test]
    fn it_asks_as_the_clis_caller_and_names_the_server_in_the_path() {
        let body = r#"{"url":"http://h/oauth/connect/a%20b?flow=f","expires_at":"2026-12-04T17:00:00Z"}"#;
        let (url, server) = answer_once("200 OK", body);
        let answer = begin(&Api::new(&url, Some("k3y".into())), "a b").unwrap();
        assert_eq!(answer.body["url"], "http://h/oauth/connect/a%20b?flow=f");
        let head = server.join().unwrap().to_ascii_lowercase();
        assert!(head.starts_with("post /oauth/connect/a%20b "), "{head}");
        assert!(head.contains("x-api-key: k3y"), "the caller's key is sent: {head}");
        assert!(head.contains("content-type: application/json"), "{head}");
    }

    #[test]
    fn a_refusal_keeps_the_apis_words_and_exits_1() {
        let body =
            r#"{"error":{"code":"invalid_argument","message":"`math` takes no per-user connection","details":null}}"#;
        let (url, server) = answer_once("400 Bad Request", body);
        let err = begin(&Api::new(&url, None), "math").unwrap_err();
        assert_eq!(err.to_string(), "`math` takes no per-user connection (invalid_argument)");
        assert_eq!(err.exit_code(), 1);
        server.join().unwrap();
    }

    #[test]
    fn an_answer_without_a_url_exits_76() {
        let (url, server) = answer_once("200 OK", r#"{"expires_at":"2026-12-04T17:00:00Z"}"#);
        let err = begin(&Api::new(&url, None), "lin").unwrap_err();
        assert_eq!(err.exit_code(), 76, "{err}");
        server.join().unwrap();
    }
}
