//! Health: checks and verdicts, recovery with backoff, capability enforcement, idle stop.
//!
//! The prober owns the schedule and the verdicts; this file owns what they do to the state.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use hangar_core::backoff;
use hangar_core::config::EnforcementMode;
use hangar_core::ipc::{CheckOutcome, ErrorKind, IpcError, Verdict};
use hangar_core::journal::Happened;
use hangar_core::lifecycle::{Event, State, StopReason};
use hangar_core::record::{ToolDrift, ToolInfo};
use hangar_core::time::rfc3339_millis;
use hangar_core::tool_digest;

use super::process::terminate;
use super::start::list_tools;
use super::{Cause, Inner, Server, Tools, jitter_draw, millis};
use crate::logs::Stream;

impl Server {
    /// Sends the upstream a `tools/list` with `timeout`; a changed tool list is applied.
    pub async fn check(self: &Arc<Self>, timeout: Duration) -> Result<CheckOutcome, IpcError> {
        let (upstream, generation) = {
            let inner = self.lock();
            match (&inner.process, inner.lifecycle.state()) {
                (Some(process), State::Ready | State::Degraded) => (process.upstream.clone(), inner.generation),
                (_, state) => {
                    return Err(IpcError::new(
                        ErrorKind::Stopped,
                        format!("`{}` is {} and has nothing to check", self.id, state.as_str()),
                    ));
                }
            }
        };
        let started = Instant::now();
        let listed = list_tools(&upstream, started + timeout, &self.log).await;
        let duration_ms = millis(started.elapsed());
        Ok(match listed {
            Ok(tools) => {
                self.apply_tools(generation, tools);
                CheckOutcome { generation, ok: true, duration_ms, error_type: None }
            }
            // Reachability only: without a caller's credential, a refusal is an answer.
            Err(crate::upstream::RequestError::Unauthorized { .. }) if self.per_caller() => {
                CheckOutcome { generation, ok: true, duration_ms, error_type: None }
            }
            Err(err) => {
                CheckOutcome { generation, ok: false, duration_ms, error_type: Some(err.kind().as_str().into()) }
            }
        })
    }

    /// Applies the prober's verdict: counts it, and degrades the server at its threshold.
    pub fn verdict(self: &Arc<Self>, verdict: &Verdict) -> State {
        let mut inner = self.lock();
        if verdict.generation != inner.generation {
            // About a process that has since been replaced: not this one's health.
            return inner.lifecycle.state();
        }
        inner.last_check = Some(Instant::now());
        let now = rfc3339_millis(SystemTime::now());
        inner.health.last_check_at = Some(now.clone());
        if verdict.healthy {
            inner.counters.checks_ok += 1;
            inner.health.consecutive_failures = 0;
            inner.health.last_success_at = Some(now);
        } else {
            inner.counters.checks_failed += 1;
            inner.health.consecutive_failures += 1;
            let error_type = verdict.error_type.as_deref().unwrap_or("unknown");
            tracing::info!(mcp_server = %self.id, failures = inner.health.consecutive_failures, error_type, "health check failed");
            self.degrade_at_threshold(&mut inner);
        }
        inner.lifecycle.state()
    }

    /// The upstream broke the protocol (a message over the size limit, skipped unread): counted
    /// once, like a failed check, so a server that keeps doing it is degraded and restarted. A
    /// request it answered fails without counting again (`calls.rs`).
    pub(super) fn protocol_violation(self: &Arc<Self>, generation: u64) {
        let mut inner = self.lock();
        if inner.generation != generation {
            return;
        }
        inner.counters.messages_skipped += 1;
        inner.health.consecutive_failures += 1;
        inner.health.total_failures += 1;
        tracing::warn!(mcp_server = %self.id, failures = inner.health.consecutive_failures, "it sent a message over the size limit; skipped and counted as one failure");
        self.degrade_at_threshold(&mut inner);
    }

    /// A ready server whose consecutive failures reached `max_consecutive_failures` becomes
    /// degraded, and its recovery begins.
    fn degrade_at_threshold(self: &Arc<Self>, inner: &mut Inner) {
        if inner.lifecycle.state() == State::Ready
            && inner.health.consecutive_failures >= self.config.max_consecutive_failures
            && self.transition(inner, Event::ThresholdReached)
        {
            self.begin_recovery(inner);
        }
    }

    /// Starts the recovery task for a server that just became degraded.
    fn begin_recovery(self: &Arc<Self>, inner: &mut Inner) {
        if inner.recovering {
            return;
        }
        inner.recovering = true;
        super::forgive_if_stable(inner);
        tokio::spawn(self.clone().recover());
    }

    /// Restarts a degraded server with backoff until it is ready or the budget is spent.
    async fn recover(self: Arc<Self>) {
        let budget = self.policy.max_retries;
        if budget == 0 {
            let mut inner = self.lock();
            let retry_allowed_at = Some(self.next_retry(&mut inner));
            self.transition(&mut inner, Event::GaveUp { retry_allowed_at });
            inner.recovering = false;
            return;
        }
        for attempt in 0..budget {
            let wait = {
                let inner = self.lock();
                backoff::delay(&self.policy, inner.failure_streak, jitter_draw())
            };
            tracing::info!(mcp_server = %self.id, attempt = attempt + 1, budget, wait = ?wait, "recovery restart scheduled");
            tokio::time::sleep(wait).await;
            let outcome = self.start(Cause::Recovery { last: attempt + 1 == budget }).await;
            let mut inner = self.lock();
            match outcome {
                Ok(_) => break,
                Err(err) if err.kind == ErrorKind::Stopped || inner.lifecycle.state() != State::Degraded => break,
                Err(_) => {
                    inner.failure_streak = inner.failure_streak.saturating_add(1);
                    self.remember(&inner);
                }
            }
        }
        self.lock().recovering = false;
    }

    /// The upstream announced a new tool list.
    pub(super) async fn on_tools_changed(self: &Arc<Self>, generation: u64) {
        let upstream = {
            let inner = self.lock();
            match &inner.process {
                Some(p) if inner.generation == generation && inner.lifecycle.state() == State::Ready => {
                    p.upstream.clone()
                }
                _ => return,
            }
        };
        let deadline = Instant::now() + self.config.probe_timeout();
        if let Ok(tools) = list_tools(&upstream, deadline, &self.log).await {
            self.apply_tools(generation, tools);
        }
    }

    /// Takes a fresh tool list from the process of `generation`, enforcing capabilities.
    pub(super) fn apply_tools(&self, generation: u64, tools: Tools) {
        let mut inner = self.lock();
        if inner.generation != generation || inner.tools == tools {
            return;
        }
        tracing::info!(mcp_server = %self.id, tools = tools.infos.len(), "tool list changed");
        let blocked = self.unexpected_tools(&mut inner, &tools.infos);
        if let Some(drift) = self.drifted_tools(&mut inner, &tools) {
            // The drifted declarations are not taken: nothing serves or lists them.
            inner.blocked_because = Some(drift.detail());
            if self.transition(&mut inner, Event::CapabilityBlocked) {
                tracing::warn!(mcp_server = %self.id, drifted = ?drift.tools().collect::<Vec<_>>(), "blocked: pinned tool definitions drifted");
                self.end_blocked(&mut inner);
            }
            return;
        }
        self.set_tools(&mut inner, tools);
        if let Some(unexpected) = blocked
            && self.transition(&mut inner, Event::CapabilityBlocked)
        {
            tracing::warn!(mcp_server = %self.id, unexpected = ?unexpected, "blocked: its tool list now includes tools outside expected_tools");
            self.end_blocked(&mut inner);
        }
    }

    /// Ends the process of a server just blocked; whatever it does next is no longer its.
    fn end_blocked(&self, inner: &mut Inner) {
        inner.generation += 1;
        if let Some(process) = inner.process.take() {
            inner.meta.pid = None;
            tokio::spawn(terminate(process, Duration::ZERO));
        }
    }

    /// Pinned tools whose declaration no longer has its pinned digest, or that are no longer
    /// declared, if the server must be blocked for them. Either way each drift is counted, and
    /// the pinned digest with the old (when known) and new declarations goes to the server's
    /// logs, never to the hangar's own surfaces. In alert mode the server keeps serving.
    pub(super) fn drifted_tools(&self, inner: &mut Inner, tools: &Tools) -> Option<ToolDrift> {
        let pinned = self.config.capabilities.tools.pinned.as_ref()?;
        let mut drift = ToolDrift::default();
        for (name, pin) in pinned {
            let declared = |list: &Tools| {
                list.infos.iter().zip(&list.raw).find(|(info, _)| &info.name == name).map(|(_, raw)| raw.clone())
            };
            let Some(now) = declared(tools) else {
                self.log.push(
                    Stream::Stdout,
                    format!("[hangar] pinned tool `{name}` ({pin}) is no longer declared").as_bytes(),
                );
                drift.missing.push(name.clone());
                continue;
            };
            let digest = tool_digest::digest(&now);
            if &digest == pin {
                continue;
            }
            let mut lines = vec![format!("[hangar] pinned tool `{name}` drifted: pinned {pin}, declared now {digest}")];
            if let Some(before) = declared(&inner.tools) {
                lines.push(format!("[hangar] `{name}` as declared before: {before}"));
            }
            lines.push(format!("[hangar] `{name}` as declared now: {now}"));
            for line in lines {
                self.log.push(Stream::Stdout, line.as_bytes());
            }
            drift.changed.push(name.clone());
        }
        if drift.is_empty() {
            return None;
        }
        inner.counters.tool_drifts += (drift.changed.len() + drift.missing.len()) as u64;
        self.shared.journal.record(Happened::Drift { mcp_server: self.id.clone(), detail: drift.detail() });
        match self.config.capabilities.enforcement_mode {
            EnforcementMode::Block => Some(drift),
            EnforcementMode::Alert => {
                tracing::warn!(mcp_server = %self.id, drifted = ?drift.tools().collect::<Vec<_>>(), "pinned tool definitions drifted (alert mode); the definitions are in its logs, and it keeps running");
                None
            }
        }
    }

    /// Tools outside `expected_tools`, if the server must be blocked for them. In alert mode a
    /// violation is logged and counted and the server keeps serving.
    pub(super) fn unexpected_tools(&self, inner: &mut Inner, tools: &[ToolInfo]) -> Option<Vec<String>> {
        let expected = self.config.capabilities.tools.expected_tools.as_ref()?;
        let unexpected: Vec<String> =
            tools.iter().filter(|t| !expected.contains(&t.name)).map(|t| t.name.clone()).collect();
        if unexpected.is_empty() {
            return None;
        }
        inner.counters.capability_violations += 1;
        match self.config.capabilities.enforcement_mode {
            EnforcementMode::Block => Some(unexpected),
            EnforcementMode::Alert => {
                tracing::warn!(mcp_server = %self.id, unexpected = ?unexpected, "capability violation (alert mode): it serves tools outside expected_tools and keeps running");
                None
            }
        }
    }

    /// Stops a ready server unused for longer than its `idle_ttl_s`.
    pub async fn stop_if_idle(&self) {
        let idle = {
            let inner = self.lock();
            let ttl = self.config.idle_ttl();
            inner.lifecycle.state() == State::Ready
                && inner.calls_in_flight == 0
                && ttl.is_some_and(|ttl| inner.last_used.elapsed() >= ttl)
        };
        if idle {
            tracing::info!(mcp_server = %self.id, "idle for longer than idle_ttl_s; stopping");
            self.stop(StopReason::Idle).await;
        }
    }

    /// How often idle stop should look at this server.
    pub fn idle_tick(&self) -> Option<Duration> {
        self.config.idle_ttl().map(|ttl| (ttl / 4).clamp(Duration::from_millis(50), Duration::from_secs(5)))
    }
}
