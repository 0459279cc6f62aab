//! An upstream's own words in a failed request's details: kept for the front door's answer to
//! the client that addressed that upstream (as `tool_access.upstream_errors` says), stripped
//! from every other answer, so they never reach a `hangar_*` tool or another surface.

use hangar_core::config::{Config, UpstreamErrors};
use hangar_core::ipc::{IpcError, UPSTREAM_DATA_DETAIL, UPSTREAM_MESSAGE_DETAIL};
use serde_json::Value;

/// `tool_access.upstream_errors` and `tool_access.upstream_error_data`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamWordsRule {
    message: bool,
    data: bool,
}

impl UpstreamWordsRule {
    pub fn of(config: &Config) -> Self {
        let message = config.tool_access.upstream_errors == UpstreamErrors::Pass;
        UpstreamWordsRule { message, data: message && config.tool_access.upstream_error_data }
    }

    /// `err` as answered to its caller: `to_front_door` when the request was the front door's
    /// (an exposed tool's call, a forwarded request), whose client addressed the upstream itself.
    pub fn apply(self, mut err: IpcError, to_front_door: bool) -> IpcError {
        if let Some(Value::Object(details)) = err.details.as_mut() {
            if !(to_front_door && self.message) {
                details.remove(UPSTREAM_MESSAGE_DETAIL);
            }
            if !(to_front_door && self.data) {
                details.remove(UPSTREAM_DATA_DETAIL);
            }
        }
        err
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_core::ipc::ErrorKind;
    use serde_json::json;

    fn failure() -> IpcError {
        IpcError::new(ErrorKind::UpstreamError, "`x` tool `t`: the upstream answered `tools/call` with JSON-RPC error -32603")
            .with_details(json!({"jsonrpc_code": -32603, "jsonrpc_data": null, "upstream_message": "disk full", "upstream_data": {"a": 1}}))
    }

    #[test]
    fn only_the_front_door_hears_the_upstream_and_only_as_configured() {
        let config = |yaml: &str| Config::parse(yaml).unwrap();
        let pass = UpstreamWordsRule::of(&config(""));
        let kept = pass.apply(failure(), true).details.unwrap();
        assert_eq!((kept["upstream_message"].clone(), kept.get("upstream_data")), (json!("disk full"), None));
        let hangar_tool = pass.apply(failure(), false).details.unwrap();
        assert!(hangar_tool.get("upstream_message").is_none() && hangar_tool["jsonrpc_code"] == -32603);
        let with_data = UpstreamWordsRule::of(&config("tool_access: {upstream_error_data: true}\n"));
        assert_eq!(with_data.apply(failure(), true).details.unwrap()["upstream_data"], json!({"a": 1}));
        let hide = UpstreamWordsRule::of(&config("tool_access: {upstream_errors: hide, upstream_error_data: true}\n"));
        let hidden = hide.apply(failure(), true).details.unwrap();
        assert!(hidden.get("upstream_message").is_none() && hidden.get("upstream_data").is_none());
    }
}
