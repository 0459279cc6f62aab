//! `approvals:` and a person's approval of a call a profile's rule marks `approve`.
//!
//! An approval is bound to one waiting call: its caller, server, tool, the SHA-256 of its
//! canonical arguments, the rule that asked for it, the config generation it was judged under,
//! and an expiry. Approving releases exactly that call, once; a call with other arguments (or the
//! same ones again) waits for its own. The supervisor owns the pending set, so a decision taken
//! through any API instance releases the call wherever it waits; it does not survive a restart of
//! the supervisor (the waiting calls do not either).
//!
//! Who decides: an admin, or a profile with `approver: true`; never the caller of the call
//! itself, unless `approvals.self_approve` says so.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::key_error::KeyError;

/// The default of `approvals.timeout_s`.
pub const DEFAULT_TIMEOUT_S: u64 = 600;
/// The longest `approvals.timeout_s`: a day.
pub const MAX_TIMEOUT_S: u64 = 86_400;
/// The most calls one identity may have waiting for a decision at once.
pub const MAX_PENDING_PER_IDENTITY: usize = 32;
/// The most calls waiting for a decision at once, over every identity.
pub const MAX_PENDING: usize = 1024;
/// How many decided approvals are kept to be listed as recent.
pub const RECENT: usize = 200;

/// `approvals:`: how calls a rule marks `approve` wait for a person.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsConfig {
    /// How long a call waits for a decision, in seconds; past it the call is refused
    /// (`approval_expired`). 1 to 86,400; default: 600.
    #[schemars(range(min = 1, max = MAX_TIMEOUT_S), extend("default" = DEFAULT_TIMEOUT_S))]
    pub timeout_s: Option<u64>,
    /// Whether a caller who may decide approvals may also decide on its own calls. Default:
    /// `false`.
    #[serde(default)]
    pub self_approve: bool,
}

impl ApprovalsConfig {
    pub fn timeout_s(&self) -> u64 {
        self.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S)
    }

    pub fn check(&self) -> Result<(), KeyError> {
        match self.timeout_s {
            Some(n) if !(1..=MAX_TIMEOUT_S).contains(&n) => Err(KeyError {
                key: "approvals.timeout_s".into(),
                message: format!("expected a whole number of seconds from 1 to {MAX_TIMEOUT_S}, got {n}"),
            }),
            _ => Ok(()),
        }
    }
}

/// Where an approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalState {
    /// The call waits for a decision.
    Pending,
    /// A person approved it: the call ran (or runs).
    Approved,
    /// A person denied it: the call was refused (`forbidden`).
    Denied,
    /// Nobody decided in time: the call was refused (`approval_expired`).
    Expired,
    /// The caller gave up on the call before anyone decided.
    Cancelled,
}

impl ApprovalState {
    pub fn as_str(self) -> &'static str {
        crate::wire_name::of(&self)
    }
}

/// One approval, as `GET /api/approvals` lists it and the journal records it (without
/// `arguments` there).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Approval {
    /// `apr_` and 32 hex digits, unguessable.
    pub id: String,
    pub state: ApprovalState,
    /// Who made the call.
    pub identity: String,
    pub profile: Option<String>,
    pub mcp_server: String,
    /// The tool as its server declared it.
    pub tool: String,
    /// `sha256:<hex>` of the call's arguments in canonical form (keys sorted, no whitespace).
    pub arguments_sha256: String,
    /// The call's arguments as the person deciding sees them: env values of configured servers
    /// masked, cut at `audit.max_argument_bytes`. Listed to those who may see the approval;
    /// never journaled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
    /// The rule that asked for it: `profiles.<name>.rules[<n>]`.
    pub rule: String,
    /// The rule's `reason`, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The config generation the call was judged under (1 at start, one more each reload);
    /// a call approved after a reload is judged again, not released.
    pub generation: u64,
    /// RFC 3339.
    pub requested_at: String,
    pub expires_at: String,
    /// Who approved or denied it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
    /// How the call then ended: `ok`, `is_error`, or its error type; absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
}

/// The approval a call's audit entry names: which one, and who decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalNote {
    pub id: String,
    pub state: ApprovalState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
}

/// `POST /api/approvals/{id}/approve` or `/deny`. Answers
/// [`Reply::Decided`](crate::ipc::Reply::Decided) with the approval as decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decide {
    pub id: String,
    pub approve: bool,
}

/// Whether `id` has the shape of an approval id (what a path segment must be before it is
/// looked up).
pub fn is_approval_id(id: &str) -> bool {
    id.len() == 36
        && id.starts_with("apr_")
        && id[4..].bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn timeout_is_bounded_and_defaults_to_ten_minutes() {
        assert_eq!(ApprovalsConfig::default().timeout_s(), 600);
        assert!(ApprovalsConfig { timeout_s: Some(0), self_approve: false }.check().is_err());
        assert!(ApprovalsConfig { timeout_s: Some(86_401), self_approve: false }.check().is_err());
        assert!(ApprovalsConfig { timeout_s: Some(2), self_approve: false }.check().is_ok());
    }

    #[test]
    fn ids_are_checked_by_shape() {
        assert!(is_approval_id(&format!("apr_{}", "0a".repeat(16))));
        assert!(!is_approval_id("apr_../../etc"));
        assert!(!is_approval_id(&format!("apr_{}", "0A".repeat(16))));
    }

    #[test]
    fn states_have_wire_names() {
        assert_eq!(ApprovalState::Expired.as_str(), "expired");
        let json = serde_json::to_value(ApprovalState::Pending).unwrap();
        assert_eq!(json, "pending");
    }
}
