//! One health check: ask the supervisor to check a server, judge the outcome, send the verdict.

use hangar_core::access::Caller;
use hangar_core::ipc::{Check, CheckOutcome, ErrorKind, IpcError, Reply, Request, Verdict};
use hangar_runtime::client::Client;

/// Whether a check's outcome counts as healthy. The one place the judgement is made, so it can
/// grow (slow answers, missing tools) without touching the loop.
pub fn judge(outcome: &CheckOutcome) -> bool {
    outcome.ok
}

/// Runs one check of `mcp_server` to its end. A check the supervisor could not run (the link is
/// down, the server is gone) yields no verdict: only a real outcome may count as a failure.
pub async fn run(client: Client, mcp_server: String, timeout_ms: u64) {
    let outcome = match client
        .request(&Caller::hangar(), Request::Check(Check { mcp_server: mcp_server.clone(), timeout_ms }))
        .await
    {
        Ok(Reply::Checked(outcome)) => outcome,
        Ok(_) => {
            tracing::warn!(mcp_server, "the supervisor answered a health check with an unexpected reply");
            return;
        }
        Err(err) => {
            log_not_run(&mcp_server, "health check not run", &err);
            return;
        }
    };
    let healthy = judge(&outcome);
    let verdict = Verdict {
        mcp_server: mcp_server.clone(),
        generation: outcome.generation,
        healthy,
        duration_ms: outcome.duration_ms,
        error_type: outcome.error_type.clone(),
    };
    let state = match client.request(&Caller::hangar(), Request::Verdict(verdict)).await {
        Ok(Reply::Applied { state }) => state.as_str(),
        Ok(_) => {
            tracing::warn!(mcp_server, "the supervisor answered a verdict with an unexpected reply");
            return;
        }
        Err(err) => {
            log_not_run(&mcp_server, "health verdict not applied", &err);
            return;
        }
    };
    let duration_ms = outcome.duration_ms;
    if healthy {
        tracing::debug!(mcp_server, duration_ms, state, "health check passed");
    } else {
        let error_type = outcome.error_type.as_deref().unwrap_or("unknown");
        tracing::info!(mcp_server, duration_ms, error_type, state, "health check failed");
    }
}

/// The expected races (the link dropped, the server stopped meanwhile) stay at debug.
fn log_not_run(mcp_server: &str, what: &str, err: &IpcError) {
    let error_type = err.kind.as_str();
    match err.kind {
        ErrorKind::SupervisorUnavailable | ErrorKind::NotFound | ErrorKind::Stopped | ErrorKind::ShuttingDown => {
            tracing::debug!(mcp_server, error_type, reason = %err.message, "{what}");
        }
        _ => tracing::warn!(mcp_server, error_type, reason = %err.message, "{what}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(ok: bool, error_type: Option<&str>) -> CheckOutcome {
        CheckOutcome { generation: 3, ok, duration_ms: 12, error_type: error_type.map(Into::into) }
    }

    #[test]
    fn an_answer_is_healthy_and_a_failure_is_not() {
        assert!(judge(&outcome(true, None)));
        assert!(!judge(&outcome(false, Some("timeout"))));
        assert!(!judge(&outcome(false, Some("upstream_error"))));
        assert!(!judge(&outcome(false, None)));
    }
}
