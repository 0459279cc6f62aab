//! MCP's own vocabulary on top of JSON-RPC's ([`crate::jsonrpc`]): the protocol revisions, the
//! error codes MCP adds, the `_meta` keys and the standard HTTP headers.
//!
//! The API speaks these to clients and the supervisor to upstreams, so they are named once, here.
//! (`hangar-upstream-fake` keeps its own copies on purpose: it plays a stranger's server.)

/// The stateless revision: the version travels in every request's `_meta` and headers.
pub const MODERN_REVISION: &str = "2026-07-28";
/// The session-based revisions, newest first.
pub const LEGACY_REVISIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// The legacy revision offered, and answered when a client asks for one not spoken.
pub const LATEST_LEGACY_REVISION: &str = LEGACY_REVISIONS[0];
/// Every revision the hangar speaks, newest first (what `server/discover` lists).
pub const ALL_REVISIONS: [&str; 5] =
    [MODERN_REVISION, LEGACY_REVISIONS[0], LEGACY_REVISIONS[1], LEGACY_REVISIONS[2], LEGACY_REVISIONS[3]];

/// Legacy sessions: the session id is not one the server knows (the TypeScript SDK's code).
pub const SESSION_NOT_FOUND: i64 = -32001;
/// Legacy "resource not found"; 2026-07-28 says [`crate::jsonrpc::INVALID_PARAMS`] instead.
pub const LEGACY_RESOURCE_NOT_FOUND: i64 = -32002;
/// 2026-07-28: a standard header is missing, malformed or disagrees with the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// 2026-07-28: the request needs a client capability its `_meta` did not declare.
pub const MISSING_CAPABILITY: i64 = -32021;
/// 2026-07-28: the requested protocol version is not served.
pub const UNSUPPORTED_VERSION: i64 = -32022;
/// The errors of 2026-07-28's own table: answered with HTTP 400, and only a modern server
/// sends them. Their `data` is structured protocol content.
pub const PROTOCOL_ERRORS: [i64; 3] = [HEADER_MISMATCH, MISSING_CAPABILITY, UNSUPPORTED_VERSION];

/// What every protocol key in `params._meta` (or a result's `_meta`) starts with.
pub const META_PREFIX: &str = "io.modelcontextprotocol/";
/// 2026-07-28: the revision a request speaks.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// 2026-07-28: what the client can do, declared per request.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// 2026-07-28: who the client is.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// 2026-07-28: who answered, in a result's `_meta`.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// The least severe log level a request wants to hear about while it runs.
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// Names a `subscriptions/listen` stream in each of its notifications.
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The revision a request speaks (legacy after `initialize`; 2026-07-28 always).
pub const HEADER_PROTOCOL_VERSION: &str = "MCP-Protocol-Version";
/// 2026-07-28: mirrors the body's `method`.
pub const HEADER_METHOD: &str = "Mcp-Method";
/// 2026-07-28: mirrors the body's tool or prompt `name`, or resource `uri`.
pub const HEADER_NAME: &str = "Mcp-Name";
/// Legacy: the session a request belongs to (lower-case, as `http` header names are stored).
pub const HEADER_SESSION_ID: &str = "mcp-session-id";

/// MCP's log levels (syslog severities), least severe first.
pub const LOG_LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/// A log level's rank in [`LOG_LEVELS`]; `None` for a level MCP does not name.
pub fn log_severity(level: &str) -> Option<usize> {
    LOG_LEVELS.iter().position(|known| *known == level)
}

/// The tasks extension (SEP-2663): declared under `capabilities.extensions` by a server that
/// runs calls as tasks, and by a client (in its `_meta` client capabilities) that takes them.
pub const EXTENSION_TASKS: &str = "io.modelcontextprotocol/tasks";
/// MCP Apps (SEP-1865): tools whose `_meta.ui.resourceUri` names a `ui://` resource, an HTML
/// app a host renders.
pub const EXTENSION_UI: &str = "io.modelcontextprotocol/ui";
/// The MIME type of an MCP App's HTML.
pub const APP_MIME_TYPE: &str = "text/html;profile=mcp-app";

/// What the hangar declares of MCP Apps, to clients and to upstreams alike: the HTML apps pass.
pub fn apps_extension() -> serde_json::Value {
    serde_json::json!({"mimeTypes": [APP_MIME_TYPE]})
}
/// The v1 `_meta` key naming a result's task; never on an inlined `tasks/get` result.
pub const META_RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The methods of the tasks extension; `Mcp-Name` mirrors their `params.taskId`.
pub const TASK_METHODS: [&str; 3] = ["tasks/get", "tasks/update", "tasks/cancel"];
/// A task's status notification (SEP-2663; params: the `DetailedTask`), sent on a
/// `subscriptions/listen` stream that asked for the task among its `taskIds`.
pub const NOTIFICATION_TASKS: &str = "notifications/tasks";

/// 2026-07-28 (MRTR): a result's `resultType` when the server needs the client's input first.
pub const RESULT_TYPE_INPUT_REQUIRED: &str = "input_required";
/// MRTR: the questions of an `input_required` result, by key: `{method, params}` each.
pub const INPUT_REQUESTS: &str = "inputRequests";
/// MRTR: the client's answers in the retry, by the same keys.
pub const INPUT_RESPONSES: &str = "inputResponses";
/// MRTR: the server's opaque state, handed back in the retry.
pub const REQUEST_STATE: &str = "requestState";
/// A client giving up on one of its requests (`params.requestId`).
pub const NOTIFICATION_CANCELLED: &str = "notifications/cancelled";
/// What a client can be asked for, by method, and the capability each needs.
pub const CLIENT_REQUESTS: [(&str, &str); 3] =
    [("sampling/createMessage", "sampling"), ("elicitation/create", "elicitation"), ("roots/list", "roots")];
/// Whether a client that `declared` these capabilities (its `_meta` client capabilities, or a
/// legacy session's at `initialize`) can be asked `method` (one of [`CLIENT_REQUESTS`]).
///
/// An elicitation in URL mode (`params.mode: "url"`) needs `elicitation.url` declared; one in
/// form mode, `elicitation` (a client that declares `url` alone takes no forms).
pub fn declares(declared: &serde_json::Value, method: &str, params: Option<&serde_json::Value>) -> bool {
    let Some(capability) = CLIENT_REQUESTS.iter().find(|(known, _)| *known == method).map(|(_, c)| *c) else {
        return false;
    };
    let Some(given) = declared.get(capability) else { return false };
    if method != "elicitation/create" {
        return true;
    }
    match elicitation_mode(params) {
        ElicitationMode::Url => given.get("url").is_some(),
        // `elicitation: {}` is form mode (2025-06-18), as is one that names `form`.
        ElicitationMode::Form => given.get("form").is_some() || given.get("url").is_none(),
    }
}

/// The mode of an `elicitation/create` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElicitationMode {
    Form,
    Url,
}

/// The mode `params` of an `elicitation/create` ask for (form, unless it says `url`).
pub fn elicitation_mode(params: Option<&serde_json::Value>) -> ElicitationMode {
    match params.and_then(|p| p.get("mode")).and_then(serde_json::Value::as_str) {
        Some("url") => ElicitationMode::Url,
        _ => ElicitationMode::Form,
    }
}

/// JSON-RPC's "URL elicitation required" (2025-11-25): its `data` (`elicitations`) is protocol
/// content for the client, as the 2026-07-28 table's errors' is.
pub const URL_ELICITATION_REQUIRED: i64 = -32042;

/// The upstream's answer when its request needs a capability the calling client did not declare:
/// the same words in every era.
pub fn not_declared(method: &str) -> crate::jsonrpc::RpcError {
    let capability = CLIENT_REQUESTS.iter().find(|(known, _)| *known == method).map_or("", |(_, c)| *c);
    crate::jsonrpc::RpcError::new(
        crate::jsonrpc::INTERNAL_ERROR,
        format!("hangar: no client was asked `{method}`: the calling client did not declare `{capability}`"),
    )
}

/// The start of a `requestState` the hangar minted for a call it holds while its client answers
/// a legacy upstream's own request (anything else is an upstream's own state).
pub const HELD_CALL_STATE_PREFIX: &str = "hangar-held-";
/// The start of a `requestState` the hangar minted for a `hangar_call` batch it holds while its
/// client answers the questions of the batch's calls.
pub const HELD_BATCH_STATE_PREFIX: &str = "hangar-batch-";

/// Whether a client whose `_meta` client capabilities are `declared` can be asked anything an
/// upstream may ask ([`CLIENT_REQUESTS`]).
pub fn can_be_asked(declared: &serde_json::Value) -> bool {
    CLIENT_REQUESTS.iter().any(|(_, capability)| declared.get(capability).is_some())
}

/// 2026-07-28: the long-lived request that holds a notification stream open.
pub const METHOD_SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";

/// How a tool declares tasks (`execution.taskSupport`, SEP-2663); a tool that declares none may
/// still be run as the gateway's own task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSupport {
    /// Only as a task: a client that does not take tasks is refused ([`MISSING_CAPABILITY`]).
    Required,
    /// Either way: the upstream may make a task of its own.
    Optional,
    /// Never as a task.
    Forbidden,
}

impl TaskSupport {
    /// What a tool declaration says, if it says anything this revision knows.
    pub fn of(declaration: &serde_json::Value) -> Option<TaskSupport> {
        match declaration.get("execution")?.get("taskSupport")?.as_str()? {
            "required" => Some(TaskSupport::Required),
            "optional" => Some(TaskSupport::Optional),
            "forbidden" => Some(TaskSupport::Forbidden),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_meta_key_is_a_protocol_key() {
        for key in [
            META_PROTOCOL_VERSION,
            META_CLIENT_CAPABILITIES,
            META_CLIENT_INFO,
            META_SERVER_INFO,
            META_LOG_LEVEL,
            META_SUBSCRIPTION_ID,
        ] {
            assert!(key.starts_with(META_PREFIX), "{key}");
        }
    }

    #[test]
    fn a_tools_task_support_is_read_from_its_execution() {
        let declared = |support: &str| serde_json::json!({"name": "t", "execution": {"taskSupport": support}});
        assert_eq!(TaskSupport::of(&declared("required")), Some(TaskSupport::Required));
        assert_eq!(TaskSupport::of(&declared("optional")), Some(TaskSupport::Optional));
        assert_eq!(TaskSupport::of(&declared("forbidden")), Some(TaskSupport::Forbidden));
        assert_eq!(TaskSupport::of(&declared("sometimes")), None);
        assert_eq!(TaskSupport::of(&serde_json::json!({"name": "t"})), None);
    }

    #[test]
    fn every_revision_is_listed_once_newest_first() {
        let mut sorted = ALL_REVISIONS;
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        assert_eq!(sorted, ALL_REVISIONS);
        assert_eq!(&ALL_REVISIONS[1..], LEGACY_REVISIONS);
    }
}
