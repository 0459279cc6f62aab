//! Between stages 2 and 3 of the call pipeline: a call a profile's rule marks `approve` waits
//! here for a person's decision (`crate::calls::kept::Approvals`), before admission, so it holds
//! no permit and spends no quota while it waits.
//!
//! The approval is bound to this call: caller, server, tool, the digest of its arguments, the
//! rule and the config generation, with an expiry (`approvals.timeout_s`). Approved, the call
//! goes on, unless the config was reloaded meanwhile (its rules may have changed: the caller
//! calls again and is judged anew); denied, it is refused `forbidden`; undecided in time, it is
//! refused `approval_expired`. A client that takes tasks waits as a task (its run waits here);
//! any other client's call is held.

use std::time::{Duration, SystemTime};

use hangar_core::approvals::{Approval, ApprovalState};
use hangar_core::ipc::{ErrorKind, IpcError};
use hangar_core::rules::Verdict;
use hangar_core::sync::UnpoisonedRw;
use hangar_core::time::rfc3339_millis;
use serde_json::Value;

use crate::hangar::{Decision, Hangar, kept_arguments};
use crate::server::Server;

impl Hangar {
    /// Waits for a person's decision on the call `verdict` asks one for: its approval's id once
    /// approved, or why the call is refused.
    pub(super) async fn await_approval(
        &self,
        decide: &Decision<'_>,
        (server, tool, arguments): (&Server, &str, &Value),
        verdict: Verdict,
    ) -> Result<String, IpcError> {
        let access = self.access.reading().clone();
        let timeout = Duration::from_secs(access.approvals.timeout_s());
        let now = SystemTime::now();
        let caller = decide.caller();
        let approval = Approval {
            id: mint_id(),
            state: ApprovalState::Pending,
            identity: caller.identity.clone(),
            profile: decide.view().profile().map(str::to_owned),
            mcp_server: server.id().to_owned(),
            tool: tool.to_owned(),
            arguments_sha256: hangar_core::tool_digest::value_digest(arguments),
            arguments: Some(kept_arguments(arguments, &access.audit.secrets, access.audit.config.max_argument_bytes)),
            rule: verdict.rule,
            reason: Some(verdict.reason),
            generation: access.generation,
            requested_at: rfc3339_millis(now),
            expires_at: rfc3339_millis(now + timeout),
            decided_by: None,
            decided_at: None,
            outcome: None,
        };
        tracing::info!(
            target: crate::hangar::AUDIT_TARGET,
            identity = %caller.identity,
            mcp_server = %server.id(),
            tool = %hangar_core::echo::bounded(tool),
            approval = %approval.id,
            "a call waits for approval"
        );
        let waiting = self.calls.approvals.ask(approval, &self.shared.journal)?;
        let id = waiting.id().to_owned();
        let decided = waiting.decision(timeout).await;
        let decided = match decided {
            Ok(decided) => decided,
            Err(err) => {
                if let Some(expired) = self.calls.approvals.list(|a| a.id == id).first() {
                    decide.approval(expired);
                }
                return Err(err);
            }
        };
        decide.approval(&decided);
        let by = decided.decided_by.as_deref().unwrap_or_default();
        match decided.state {
            ApprovalState::Approved if decided.generation == self.access.reading().generation => Ok(id),
            ApprovalState::Approved => Err(IpcError::new(
                ErrorKind::ApprovalExpired,
                format!("approval {id} was given after the config was reloaded: call again to be judged anew"),
            )),
            _ => {
                Err(IpcError::forbidden(format!("{} denied this call (approval {id})", hangar_core::echo::bounded(by))))
            }
        }
    }
}

/// A new approval id: `apr_` and 128 random bits in hex.
fn mint_id() -> String {
    use base64::Engine;
    let random = crate::credentials::flows::random();
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(random.as_bytes()).unwrap_or_default();
    let hex: String = bytes.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("apr_{hex}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_well_formed_and_differ() {
        let (a, b) = (super::mint_id(), super::mint_id());
        assert!(hangar_core::approvals::is_approval_id(&a), "{a}");
        assert_ne!(a, b);
    }
}
