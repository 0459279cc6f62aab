//! Fixtures that send notifications while they run: log messages and
//! progress. Each waits a little between messages, as the suite asks, so a
//! client sees them arrive one by one before the result.

use std::time::Duration;

use serde_json::json;

use super::content::{self, tool_result};
use super::peer::Peer;
use super::request::{Answer, Level, Req};

/// The pause between two notifications of one call.
const STEP: Duration = Duration::from_millis(50);
/// `logger` of our log messages.
pub const LOGGER: &str = "conformance";
const LOG_MESSAGES: [&str; 3] = ["Tool execution started", "Tool processing data", "Tool execution completed"];

/// Three info log messages, each only if the request allows info (modern:
/// its `logLevel`; legacy: `logging/setLevel`).
pub fn with_logging(req: &Req, peer: &dyn Peer) -> Answer {
    for (i, message) in LOG_MESSAGES.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(STEP);
        }
        if req.logs(Level::Info) {
            let params = json!({"level": Level::Info.name(), "logger": LOGGER, "data": message});
            peer.notify(json!({"jsonrpc": "2.0", "method": "notifications/message", "params": params}));
        }
    }
    Answer::Result(tool_result(vec![content::text("Tool with logging executed successfully")]))
}

/// Progress 0, 50 and 100 of 100 to the request's `progressToken`; without
/// a token nothing may be sent, but the steps still take their time.
pub fn with_progress(req: &Req, peer: &dyn Peer) -> Answer {
    let token = req.progress_token();
    for (i, progress) in [0, 50, 100].into_iter().enumerate() {
        if i > 0 {
            std::thread::sleep(STEP);
        }
        if let Some(token) = token {
            let params = json!({
                "progressToken": token,
                "progress": progress,
                "total": 100,
                "message": format!("Completed step {progress} of 100"),
            });
            peer.notify(json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}));
        }
    }
    let text = match token {
        Some(token) => format!("Progress reported to token {token}"),
        None => "No progressToken was given, so no progress was reported".to_owned(),
    };
    Answer::Result(tool_result(vec![content::text(&text)]))
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::super::inputs::tests::ScriptedPeer;
    use super::super::request::LegacySetup;
    use super::super::request::tests::{legacy, modern};
    use super::*;

    fn notes(peer: &ScriptedPeer) -> Vec<Value> {
        peer.notes.lock().unwrap().clone()
    }

    #[test]
    fn logging_sends_three_info_messages_when_allowed() {
        let peer = ScriptedPeer::default();
        let Answer::Result(r) =
            with_logging(&modern(json!({}), json!({"io.modelcontextprotocol/logLevel": "debug"})), &peer)
        else {
            panic!("expected a result")
        };
        assert_eq!(r["content"][0]["type"], "text");
        let notes = notes(&peer);
        assert_eq!(notes.len(), 3);
        assert_eq!(
            notes[0],
            json!({"jsonrpc": "2.0", "method": "notifications/message",
                   "params": {"level": "info", "logger": "conformance", "data": "Tool execution started"}})
        );
        assert_eq!(notes[2]["params"]["data"], "Tool execution completed");
    }

    #[test]
    fn logging_stays_silent_without_a_modern_log_level_or_below_the_legacy_one() {
        let peer = ScriptedPeer::default();
        with_logging(&modern(json!({}), json!({})), &peer);
        let quiet = LegacySetup { log_level: Some(Level::Warning), ..LegacySetup::default() };
        with_logging(&legacy(json!({}), &quiet), &peer);
        assert!(notes(&peer).is_empty());
        with_logging(&legacy(json!({}), &LegacySetup::default()), &peer);
        assert_eq!(notes(&peer).len(), 3);
    }

    #[test]
    fn progress_goes_to_the_requests_token_and_increases() {
        let peer = ScriptedPeer::default();
        with_progress(&modern(json!({}), json!({"progressToken": "progress-test-1"})), &peer);
        let notes = notes(&peer);
        let progress: Vec<i64> = notes.iter().map(|n| n["params"]["progress"].as_i64().unwrap()).collect();
        assert_eq!(progress, [0, 50, 100]);
        assert!(notes.iter().all(|n| n["method"] == "notifications/progress"
            && n["params"]["progressToken"] == "progress-test-1"
            && n["params"]["total"] == 100));

        let peer = ScriptedPeer::default();
        with_progress(&legacy(json!({"_meta": {"progressToken": 7}}), &LegacySetup::default()), &peer);
        assert_eq!(self::notes(&peer)[0]["params"]["progressToken"], 7);
        let peer = ScriptedPeer::default();
        with_progress(&legacy(json!({}), &LegacySetup::default()), &peer);
        assert!(self::notes(&peer).is_empty());
    }
}
