//! Authorization decisions, made and recorded in one place: each call or admin action a caller
//! asks for is judged against its view and logged as a structured `tracing` event (target
//! `hangar::audit`: identity, profile, server, tool or method, outcome, error type), and, once
//! answered, recorded in the journal as an [`AuditEntry`] (with its duration, sizes and, as
//! `audit.arguments` says, its arguments: in full, secrets redacted and cut at
//! `audit.max_argument_bytes`, `audit_arguments.rs`). Keys and tokens are never part of either.
//!
//! Also what a view shows of one server ([`Shown`]): its tools as far as the view allows them.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use hangar_core::access::{ANONYMOUS, Caller, HANGAR};
use hangar_core::echo::bounded;
use hangar_core::ipc::{IpcError, Reply};
use hangar_core::journal::{ArgumentsKept, AuditConfig, AuditEntry, CallOutcome, Happened};
use hangar_core::policy::View;
use hangar_core::record::{ServerDetails, ServerSummary, ToolRecord};
use serde_json::Value;

use super::audit_arguments::{Secrets, kept};
use crate::journal::Journal;
use crate::server::Server;

/// `audit:` and the secrets its entries are cleaned of (every server's env values), from one
/// config.
pub struct AuditRules {
    pub config: AuditConfig,
    pub secrets: Secrets,
}

impl AuditRules {
    pub fn of(config: &hangar_core::config::Config) -> AuditRules {
        AuditRules { config: config.audit.clone(), secrets: Secrets::of(config) }
    }
}

pub const TARGET: &str = "hangar::audit";

/// Judges and records the requests of one caller.
pub struct Decision<'a> {
    caller: &'a Caller,
    view: &'a View,
    journal: &'a Journal,
    audit: &'a AuditRules,
    /// When the request was admitted (its entry's duration runs from here to the answer).
    admitted: Instant,
    /// What was judged, once a call or action was: the journal entry waits for the answer.
    judged: OnceLock<Judged>,
    /// The W3C trace id the request carried (or the hangar started), for the entry.
    trace_id: OnceLock<String>,
    /// The profile's rule that decided the call, if one did, for the entry.
    rule: OnceLock<String>,
    /// What redaction found in the answer, by name, for the entry.
    redacted: OnceLock<Vec<String>>,
    /// The approval the call waited for, and who decided it, for the entry.
    approval: OnceLock<hangar_core::approvals::ApprovalNote>,
}

/// What a judged request was, before its answer.
struct Judged {
    mcp_server: String,
    tool: Option<String>,
    method: String,
    bytes_in: u64,
    arguments: Option<Value>,
}

impl<'a> Decision<'a> {
    pub fn by(caller: &'a Caller, view: &'a View, journal: &'a Journal, audit: &'a AuditRules) -> Self {
        Decision {
            caller,
            view,
            journal,
            audit,
            admitted: Instant::now(),
            judged: OnceLock::new(),
            trace_id: OnceLock::new(),
            rule: OnceLock::new(),
            redacted: OnceLock::new(),
            approval: OnceLock::new(),
        }
    }

    pub fn view(&self) -> &View {
        self.view
    }

    pub fn caller(&self) -> &Caller {
        self.caller
    }

    /// The profile's rules on `tool` of `server` called with `arguments`: the rule that matches
    /// first is recorded in the call's audit entry, and one that denies (or cannot be
    /// evaluated) refuses the call as `forbidden`, with its reason and its key path. One that
    /// asks a person to approve is returned: the call waits for the decision
    /// (`crate::calls`'s `approve.rs`).
    pub fn rules(
        &self,
        server: &Server,
        tool: &str,
        arguments: &Value,
    ) -> Result<Option<hangar_core::rules::Verdict>, IpcError> {
        let call = hangar_core::rules::Call {
            server: server.id(),
            prefix: server.prefix(),
            tool,
            arguments,
            identity: &self.caller.identity,
            profile: self.view.profile().unwrap_or_default(),
        };
        let Some(verdict) = self.view.rule_for(&call) else { return Ok(None) };
        let _ = self.rule.set(verdict.rule.clone());
        match verdict.then {
            hangar_core::rules::Then::Deny => {
                let refused = IpcError::forbidden(format!("{} (by {})", verdict.reason, verdict.rule));
                self.log(server.id(), tool, &Err::<(), _>(refused.clone()));
                Err(refused)
            }
            hangar_core::rules::Then::Approve => Ok(Some(verdict)),
            hangar_core::rules::Then::Allow => Ok(None),
        }
    }

    /// The approval the call waited for, as it was decided (or given up), for the entry.
    pub fn approval(&self, approval: &hangar_core::approvals::Approval) {
        let _ = self.approval.set(hangar_core::approvals::ApprovalNote {
            id: approval.id.clone(),
            state: approval.state,
            decided_by: approval.decided_by.clone(),
            decided_at: approval.decided_at.clone(),
        });
    }

    /// A person's decision (`approve` or `deny`) on a call of `tool` of `mcp_server`: recorded
    /// as the decider's own entry.
    pub fn decision(&self, action: &str, mcp_server: &str, tool: &str) {
        self.judge(|| Judged { tool: Some(tool.to_owned()), ..self.judged_action(action, mcp_server) });
    }

    /// Redacts what `server` answered (`redaction:`), in place; the entry records what was
    /// found, by name. With `drop_call`, an answer that held anything is refused instead.
    pub fn redact(
        &self,
        redaction: &hangar_core::redaction::Redaction,
        server: &str,
        answer: &mut Value,
    ) -> Result<(), IpcError> {
        if !redaction.is_on() {
            return Ok(());
        }
        let redacted = redaction.apply(answer);
        if redacted.found.is_empty() {
            return Ok(());
        }
        let found: Vec<String> = redacted.found.into_iter().collect();
        let _ = self.redacted.set(found.clone());
        if redacted.withheld {
            return Err(IpcError::forbidden(format!(
                "`{}` answered with {}: withheld whole (redaction.action: drop_call)",
                bounded(server),
                found.join(", ")
            )));
        }
        Ok(())
    }

    /// The trace this request belongs to, which its audit entry names.
    pub fn trace(&self, trace_id: String) {
        let _ = self.trace_id.set(trace_id);
    }

    /// An admin action (`start`, `stop`, `reload`) on `found`: a server the view does not see is
    /// not found (as an unknown one), one it sees needs `admin: true`.
    pub fn admin<T>(&self, action: &str, mcp_server: &str, found: Result<T, IpcError>) -> Result<T, IpcError> {
        let outcome = self.admitted_as_admin(action, mcp_server, found);
        self.judge(|| self.judged_action(action, mcp_server));
        outcome
    }

    /// An admin read (`logs`), judged as an action; journaled only when refused: a read changes
    /// nothing, and an open status-page panel reads a server's log every 2 s.
    pub fn admin_read<T>(&self, action: &str, mcp_server: &str, found: Result<T, IpcError>) -> Result<T, IpcError> {
        let outcome = self.admitted_as_admin(action, mcp_server, found);
        if outcome.is_err() {
            self.judge(|| self.judged_action(action, mcp_server));
        }
        outcome
    }

    fn admitted_as_admin<T>(&self, action: &str, mcp_server: &str, found: Result<T, IpcError>) -> Result<T, IpcError> {
        let outcome = found.and_then(|found| {
            if self.view.is_admin() {
                Ok(found)
            } else {
                Err(IpcError::forbidden(format!("`{action}` needs a profile with `admin: true`")))
            }
        });
        self.log(mcp_server, action, &outcome);
        outcome
    }

    fn judged_action(&self, action: &str, mcp_server: &str) -> Judged {
        Judged {
            mcp_server: mcp_server.to_owned(),
            tool: None,
            method: action.to_owned(),
            bytes_in: 0,
            arguments: None,
        }
    }

    /// A tool call to what `found` names: the tool must be allowed by the view.
    pub fn call(
        &self,
        mcp_server: &str,
        tool: &str,
        arguments: &Value,
        found: Result<(Arc<Server>, String), IpcError>,
    ) -> Result<(Arc<Server>, String), IpcError> {
        let outcome = found.and_then(|(server, tool)| {
            if self.view.allows_tool(&tool) { Ok((server, tool)) } else { Err(tool_forbidden(server.id(), &tool)) }
        });
        let (mcp_server, tool) = match &outcome {
            Ok((server, tool)) => {
                self.log(server.id(), tool, &Ok::<(), IpcError>(()));
                (server.id(), tool.as_str())
            }
            Err(err) => {
                self.log(mcp_server, tool, &Err::<(), _>(err.clone()));
                (mcp_server, tool)
            }
        };
        self.judge(|| self.judged(mcp_server, Some(tool), "tools/call", arguments));
        outcome
    }

    /// Any other MCP request to one server (`prompts/get`, `resources/read`, ...); never a
    /// `tools/call`, which is a call of its own. Lists are not recorded.
    pub fn forward(
        &self,
        mcp_server: &str,
        method: &str,
        params: &Value,
        found: Result<Arc<Server>, IpcError>,
    ) -> Result<Arc<Server>, IpcError> {
        // A fan-out's own bookkeeping (a list gathered from every server, a log level set on
        // each) is not a call of the caller's.
        if !method.ends_with("/list") && method != "logging/setLevel" {
            self.log(mcp_server, method, &found);
            let arguments = params.get("arguments").unwrap_or(params);
            self.judge(|| self.judged(mcp_server, None, method, arguments));
        }
        found
    }

    fn judged(&self, mcp_server: &str, tool: Option<&str>, method: &str, arguments: &Value) -> Judged {
        Judged {
            mcp_server: mcp_server.to_owned(),
            tool: tool.map(str::to_owned),
            method: method.to_owned(),
            bytes_in: hangar_core::json_size::of(arguments),
            arguments: match self.audit.config.arguments {
                ArgumentsKept::None => None,
                ArgumentsKept::Digest => Some(Value::String(hangar_core::tool_digest::value_digest(arguments))),
                ArgumentsKept::Full => Some(kept(arguments, &self.audit.secrets, self.audit.config.max_argument_bytes)),
            },
        }
    }

    /// Notes what is being judged (the first judgement of a request counts), unless audit is off.
    fn judge(&self, judged: impl FnOnce() -> Judged) {
        if self.audit.config.enabled {
            let _ = self.judged.get_or_init(judged);
        }
    }

    /// Records the answer to what was judged, if anything was, in the journal.
    pub fn finish(mut self, answer: &Result<Reply, IpcError>) {
        let Some(judged) = self.judged.take() else { return };
        let (outcome, error_type, bytes_out) = match answer {
            Ok(Reply::Called(result) | Reply::Forwarded(result)) => {
                let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
                (
                    if is_error { CallOutcome::IsError } else { CallOutcome::Ok },
                    None,
                    hangar_core::json_size::of(result),
                )
            }
            Ok(_) => (CallOutcome::Ok, None, 0),
            Err(err) => (CallOutcome::Error, Some(err.kind.as_str().to_owned()), 0),
        };
        self.record_entry(judged, outcome, error_type, bytes_out);
    }

    fn record_entry(&self, judged: Judged, outcome: CallOutcome, error_type: Option<String>, bytes_out: u64) {
        self.journal.record(Happened::Audit(AuditEntry {
            id: 0,
            at: String::new(),
            identity: self.caller.identity.clone(),
            profile: self.view.profile().map(str::to_owned),
            mcp_server: judged.mcp_server,
            tool: judged.tool,
            method: judged.method,
            outcome,
            error_type,
            duration_ms: self.admitted.elapsed().as_secs_f64() * 1000.0,
            bytes_in: judged.bytes_in,
            bytes_out,
            arguments: judged.arguments,
            trace_id: self.trace_id.get().cloned(),
            rule: self.rule.get().cloned(),
            redacted: self.redacted.get().cloned().unwrap_or_default(),
            approval: self.approval.get().cloned().map(Box::new),
        }));
    }

    fn log<T>(&self, mcp_server: &str, what: &str, outcome: &Result<T, IpcError>) {
        let identity = self.caller.identity.as_str();
        let profile = self.view.profile().unwrap_or("");
        let (outcome, error_type) = match outcome {
            Ok(_) => ("authorized", ""),
            Err(err) => ("refused", err.kind.as_str()),
        };
        let (mcp_server, what) = (bounded(mcp_server), bounded(what));
        // The hangar's own clients and the anonymous caller of an unauthenticated hangar are
        // everyday traffic; every named caller's decisions are recorded at info.
        if identity == HANGAR || identity == ANONYMOUS {
            tracing::debug!(target: TARGET, identity, profile, %mcp_server, %what, outcome, error_type, "access");
        } else {
            tracing::info!(target: TARGET, identity, profile, %mcp_server, %what, outcome, error_type, "access");
        }
    }
}

/// A request dropped before its answer (its caller cancelled it, or its connection closed) is
/// still on record, as `cancelled`.
impl Drop for Decision<'_> {
    fn drop(&mut self) {
        if let Some(judged) = self.judged.take() {
            self.record_entry(judged, CallOutcome::Error, Some(CANCELLED.to_owned()), 0);
        }
    }
}

/// The `error_type` of a request its caller gave up on (not an `ErrorKind`: nobody is answered).
pub const CANCELLED: &str = "cancelled";

/// A tool the caller's view denies on a server it sees.
pub fn tool_forbidden(mcp_server: &str, tool: &str) -> IpcError {
    IpcError::forbidden(format!(
        "the tool `{}` of `{}` is outside this caller's profile",
        bounded(tool),
        bounded(mcp_server)
    ))
}

/// What a view shows of one server: only the tools it allows.
pub trait Shown {
    fn summary(&self, server: &Server) -> ServerSummary;
    fn details(&self, server: &Server) -> ServerDetails;
    fn tools(&self, server: &Server) -> Vec<ToolRecord>;
    fn declared_tools(&self, server: &Server) -> Vec<Value>;
}

impl Shown for View {
    fn summary(&self, server: &Server) -> ServerSummary {
        let mut summary = server.summary();
        if let View::Profile { .. } = self {
            summary.tools_count = server.tool_names().iter().filter(|t| self.allows_tool(t)).count();
        }
        summary
    }

    fn details(&self, server: &Server) -> ServerDetails {
        let mut details = server.details();
        details.tools.retain(|t| self.allows_tool(&t.name));
        details
    }

    fn tools(&self, server: &Server) -> Vec<ToolRecord> {
        let mut tools = server.tools();
        tools.retain(|t| self.allows_tool(&t.tool.name));
        tools
    }

    fn declared_tools(&self, server: &Server) -> Vec<Value> {
        let mut tools = server.declared_tools();
        tools.retain(|t| t.get("name").and_then(Value::as_str).is_some_and(|name| self.allows_tool(name)));
        tools
    }
}
