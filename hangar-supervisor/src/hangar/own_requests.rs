//! The hangar's own requests (servers, probing, metrics, the front door's list, reload,
//! forwards, the fleet), one handler each, so `Hangar::answer` is one line per request. Calls
//! are `crate::calls`'s; sessions are `session_requests.rs`'s; the journal's reads are
//! `journal_view.rs`'s.

use std::sync::atomic::Ordering;
use std::time::Duration;

use hangar_core::ipc::{ErrorKind, FrontDoor, IpcError, MAX_LOG_LINES, Reply, Verdict, WhoAmI};
use hangar_core::lifecycle::StopReason;
use hangar_core::metrics::MetricsSnapshot;
use hangar_core::policy::View;
use hangar_core::sync::UnpoisonedRw;
use serde_json::Value;

use super::{Decision, Hangar, MAX_CALL_TIMEOUT, hangar_only};
use crate::server::{Cause, DEFAULT_CALL_TIMEOUT};

impl Hangar {
    /// `Logs`: the server's last `lines` log lines, for a view that may read them.
    pub(super) fn logs(&self, decide: &Decision<'_>, mcp_server: &str, lines: usize) -> Result<Reply, IpcError> {
        let server = decide.admin_read("logs", mcp_server, self.visible(decide.view(), mcp_server))?;
        if !(1..=MAX_LOG_LINES).contains(&lines) {
            return Err(IpcError::new(
                ErrorKind::InvalidArgument,
                format!("lines must be from 1 to {MAX_LOG_LINES}, got {lines}"),
            ));
        }
        Ok(Reply::Logs(server.log().tail(lines)))
    }

    /// `Start`, by a view that may act.
    pub(super) async fn start(&self, decide: &Decision<'_>, mcp_server: &str) -> Result<Reply, IpcError> {
        let view = decide.view();
        let server = decide.admin("start", mcp_server, self.visible(view, mcp_server))?;
        self.record_action(decide.caller(), view, mcp_server, "start");
        Ok(Reply::Started(server.start(Cause::Explicit).await?))
    }

    /// `Stop`, by a view that may act.
    pub(super) async fn stop(&self, decide: &Decision<'_>, mcp_server: &str) -> Result<Reply, IpcError> {
        let view = decide.view();
        let server = decide.admin("stop", mcp_server, self.visible(view, mcp_server))?;
        self.record_action(decide.caller(), view, mcp_server, "stop");
        Ok(Reply::Stopped(server.stop(StopReason::UserRequest).await))
    }

    /// `WhoAmI`: the caller as the supervisor judges it.
    pub(super) fn whoami(&self, decide: &Decision<'_>) -> Reply {
        let (caller, view) = (decide.caller(), decide.view());
        Reply::WhoAmI(WhoAmI {
            identity: caller.identity.clone(),
            profile: caller.profile.clone(),
            admin: view.is_admin(),
            hangar_tools: view.own_tools(self.front_door.load(Ordering::SeqCst)),
        })
    }

    /// `Targets`: the prober's business, the hangar's own clients only.
    pub(super) fn targets(&self, view: &View) -> Result<Reply, IpcError> {
        hangar_only(view)?;
        Ok(Reply::Targets(self.all().iter().filter_map(|s| s.probe_target()).collect()))
    }

    /// `Check`: a health check of one server, the hangar's own clients only.
    pub(super) async fn check(&self, view: &View, mcp_server: &str, timeout_ms: u64) -> Result<Reply, IpcError> {
        hangar_only(view)?;
        let timeout = Duration::from_millis(timeout_ms).min(MAX_CALL_TIMEOUT);
        Ok(Reply::Checked(self.server(mcp_server)?.check(timeout).await?))
    }

    /// `Verdict`: the prober's judgement applied, the hangar's own clients only.
    pub(super) fn apply_verdict(&self, view: &View, verdict: &Verdict) -> Result<Reply, IpcError> {
        hangar_only(view)?;
        Ok(Reply::Applied { state: self.server(&verdict.mcp_server)?.verdict(verdict) })
    }

    /// `Auth`: the running `auth:` block, the hangar's own clients only.
    pub(super) fn auth_block(&self, view: &View) -> Result<Reply, IpcError> {
        hangar_only(view)?;
        Ok(Reply::Auth(self.access.reading().auth.clone()))
    }

    /// `Metrics`: every server's counters the view sees.
    pub(super) fn metrics(&self, view: &View) -> Reply {
        let refused = self.limiter.reading().refused();
        Reply::Metrics(Box::new(MetricsSnapshot {
            servers: self.all_visible(view).iter().map(|s| s.metrics()).collect(),
            refused,
            journal: self.shared.journal.counts(),
            calls_in_flight: self.calls_in_flight(),
        }))
    }

    /// `FrontDoor`: whether it is on, and the servers it serves to the view.
    pub(super) async fn front_door_servers(&self, view: &View) -> Reply {
        let front_door = self.discover(view).await;
        Reply::FrontDoor(FrontDoor {
            front_door,
            servers: self.all_visible(view).iter().map(|s| s.id().to_owned()).collect(),
            naming: self.naming().as_ref().clone(),
        })
    }

    /// `Reload`, by a view that may act.
    pub(super) async fn reload_for(&self, decide: &Decision<'_>) -> Result<Reply, IpcError> {
        decide.admin("reload", "", Ok(()))?;
        Ok(Reply::Reloaded(self.reload(&decide.caller().identity).await?))
    }

    /// `Forward`: any other MCP request to one upstream (never a `tools/call`, which is a call
    /// of its own). Only the front door forwards: its client addressed that upstream itself.
    pub(super) async fn forward(
        &self,
        decide: &Decision<'_>,
        mcp_server: &str,
        method: &str,
        params: Value,
        timeout_ms: Option<u64>,
    ) -> Result<Reply, IpcError> {
        if method == "tools/call" {
            return Err(IpcError::new(ErrorKind::InvalidArgument, "a tool call is a `call` request"));
        }
        let found = self.visible(decide.view(), mcp_server);
        let server = decide.forward(mcp_server, method, &params, found)?;
        let timeout = timeout_ms.map_or(DEFAULT_CALL_TIMEOUT, Duration::from_millis).min(MAX_CALL_TIMEOUT);
        let _permit = self.admit(&server)?;
        let forwarded = server.forward(method, params, timeout).await;
        Ok(Reply::Forwarded(forwarded.map_err(|err| self.upstream_words(err, true))?))
    }

    /// `Cluster`: the fleet this hangar joined, the hangar's own clients only.
    pub(super) fn cluster(&self, view: &View) -> Result<Reply, IpcError> {
        hangar_only(view)?;
        Ok(Reply::Cluster(self.fleet.get().map(|fleet| fleet.block.clone())))
    }
}
