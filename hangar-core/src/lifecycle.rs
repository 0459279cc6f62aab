//! The server lifecycle: a pure state machine with dead reasons.
//!
//! ```text
//! cold         -> initializing                 start (explicit, or lazily by the first call)
//! initializing -> ready | dead | degraded      handshake done / start failed / failures reached the threshold
//! ready        -> cold                         stop, or idle longer than idle_ttl_s
//! ready        -> dead (crashed)               the process exited or the pipe broke
//! ready        -> degraded                     max_consecutive_failures health checks failed in a row
//! degraded     -> initializing                 a recovery restart (backoff)
//! degraded     -> dead (given_up)              the recovery budget is spent
//! dead         -> initializing                 a start once retry_allowed_at has passed (capability_blocked: explicit only)
//! ```
//!
//! Nothing here does I/O or reads a clock: callers pass `now`, so every rule is unit-tested.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Cold,
    Initializing,
    Ready,
    Degraded,
    Dead,
}

impl State {
    pub fn as_str(self) -> &'static str {
        crate::wire_name::of(&self)
    }

    /// The value of the per-server state gauge in `/metrics`.
    pub fn gauge(self) -> u8 {
        self as u8
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeadReason {
    /// Recovery restarts after a degradation all failed.
    GivenUp,
    /// A ready server's process exited or its pipe broke.
    Crashed,
    /// The process exited, or did not complete the handshake, during a start.
    StartFailed,
    /// It serves a tool outside `expected_tools` in block mode.
    CapabilityBlocked,
    /// Its HTTP endpoint refused the hangar's credentials (401 or 403) during a start: it waits
    /// for an explicit start or a reload with new credentials, not a backoff (which would ask
    /// again with the same ones).
    UpstreamUnauthorized,
}

impl std::fmt::Display for DeadReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl DeadReason {
    pub fn as_str(self) -> &'static str {
        crate::wire_name::of(&self)
    }

    /// How a server dead for this reason comes back.
    pub fn revived_by(self) -> RevivedBy {
        match self {
            DeadReason::CapabilityBlocked | DeadReason::UpstreamUnauthorized => RevivedBy::Start,
            _ => RevivedBy::CallOrStart,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RevivedBy {
    Start,
    CallOrStart,
}

impl RevivedBy {
    pub fn as_str(self) -> &'static str {
        crate::wire_name::of(&self)
    }
}

/// Why and since when a server is dead.
#[derive(Debug, Clone, PartialEq)]
pub struct Dead {
    pub reason: DeadReason,
    pub since: SystemTime,
    /// `None` where no backoff applies; always `None` for `capability_blocked`.
    pub retry_allowed_at: Option<SystemTime>,
    /// How its process ended, in the hangar's words, when that is known (see [`Lifecycle::explain`]).
    pub detail: Option<String>,
}

impl Dead {
    /// Whether a call (not an explicit start) may bring the server back at `now`.
    pub fn call_may_revive(&self, now: SystemTime) -> bool {
        self.reason.revived_by() == RevivedBy::CallOrStart && self.retry_allowed_at.is_none_or(|at| now >= at)
    }

    /// When the next explicit start may run, if not at `now`: a server that keeps failing is
    /// started again only after its backoff, from every surface. A blocked server (no backoff)
    /// may always be started: that is how it is revived.
    pub fn next_start_at(&self, now: SystemTime) -> Option<SystemTime> {
        self.retry_allowed_at.filter(|at| now < *at)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    UserRequest,
    Idle,
    Shutdown,
    /// Removed or changed by a config reload.
    Reload,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        crate::wire_name::of(&self)
    }
}

/// Something that happened to a server.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// An explicit start, a lazy start by a call, or a recovery restart.
    Start,
    /// The handshake and tool listing completed.
    HandshakeDone,
    /// The process exited or its handshake failed during a start.
    StartFailed {
        retry_allowed_at: Option<SystemTime>,
    },
    /// The process exited or its pipe broke.
    Exited {
        retry_allowed_at: Option<SystemTime>,
    },
    /// Health checks failed `max_consecutive_failures` times in a row.
    ThresholdReached,
    /// The recovery budget is spent.
    GaveUp {
        retry_allowed_at: Option<SystemTime>,
    },
    /// It serves a tool outside its expected tools, in block mode.
    CapabilityBlocked,
    /// Its endpoint refused the hangar's credentials during a start.
    Unauthorized,
    Stop(StopReason),
}

/// A transition that the state machine does not allow.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("a {state} server cannot take `{event}`")]
pub struct Refused {
    pub state: &'static str,
    pub event: &'static str,
}

/// The lifecycle of one server.
#[derive(Debug, Clone, PartialEq)]
pub struct Lifecycle {
    state: State,
    dead: Option<Dead>,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle { state: State::Cold, dead: None }
    }
}

impl Lifecycle {
    pub fn state(&self) -> State {
        self.state
    }

    /// Set exactly when the state is `dead`.
    pub fn dead(&self) -> Option<&Dead> {
        self.dead.as_ref()
    }

    /// Applies `event` at `now`; returns the state it left, or refuses without changing anything.
    pub fn apply(&mut self, event: Event, now: SystemTime) -> Result<State, Refused> {
        let from = self.state;
        let (to, dead) = match (from, &event) {
            (State::Cold | State::Degraded | State::Dead, Event::Start) => (State::Initializing, None),
            (State::Initializing, Event::HandshakeDone) => (State::Ready, None),
            (State::Initializing, Event::StartFailed { retry_allowed_at } | Event::Exited { retry_allowed_at }) => {
                (State::Dead, Some((DeadReason::StartFailed, *retry_allowed_at)))
            }
            (State::Initializing | State::Ready, Event::CapabilityBlocked) => {
                (State::Dead, Some((DeadReason::CapabilityBlocked, None)))
            }
            (State::Initializing, Event::Unauthorized) => (State::Dead, Some((DeadReason::UpstreamUnauthorized, None))),
            (State::Initializing | State::Ready, Event::ThresholdReached) => (State::Degraded, None),
            (State::Ready, Event::Exited { retry_allowed_at }) => {
                (State::Dead, Some((DeadReason::Crashed, *retry_allowed_at)))
            }
            // A recovery restart that fails with the budget spent gives up from `initializing`.
            (State::Initializing | State::Degraded, Event::GaveUp { retry_allowed_at }) => {
                (State::Dead, Some((DeadReason::GivenUp, *retry_allowed_at)))
            }
            // A degraded server's process may die while it waits for recovery; recovery still owns it.
            (State::Degraded, Event::Exited { .. }) => (State::Degraded, None),
            (State::Initializing | State::Ready | State::Degraded, Event::Stop(_)) => (State::Cold, None),
            _ => {
                return Err(Refused { state: from.as_str(), event: event.name() });
            }
        };
        self.state = to;
        self.dead = dead.map(|(reason, retry_allowed_at)| Dead {
            reason,
            since: now,
            // What only an explicit start revives has no backoff.
            retry_allowed_at: if reason.revived_by() == RevivedBy::Start { None } else { retry_allowed_at },
            detail: None,
        });
        Ok(from)
    }

    /// Says how a dead server's process ended (`its process exited with code 3`; or, when the
    /// hangar killed it, what it did and why). Does nothing unless the server is dead.
    pub fn explain(&mut self, detail: String) {
        if let Some(dead) = self.dead.as_mut() {
            dead.detail = Some(detail);
        }
    }
}

/// What a lifecycle leaves to the hangar's next run (saved in the journal as JSON): its state,
/// its dead record to the millisecond (the precision every surface prints), and the backoff
/// streak. Restored by [`Lifecycle::restore`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub state: State,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead: Option<DeadMemory>,
    /// Failures since the server was last stable: the exponent of its next backoff.
    #[serde(default)]
    pub failure_streak: u32,
}

/// A [`Dead`] as saved: times in milliseconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadMemory {
    pub reason: DeadReason,
    pub since_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_allowed_at_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl From<&Dead> for DeadMemory {
    fn from(dead: &Dead) -> Self {
        DeadMemory {
            reason: dead.reason,
            since_ms: epoch_millis(dead.since),
            retry_allowed_at_ms: dead.retry_allowed_at.map(epoch_millis),
            detail: dead.detail.clone(),
        }
    }
}

impl From<&DeadMemory> for Dead {
    fn from(saved: &DeadMemory) -> Self {
        let at = |ms: u64| SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
        Dead {
            reason: saved.reason,
            since: at(saved.since_ms),
            // The rule of `apply` holds for what is read back too: no backoff for a blocked server.
            retry_allowed_at: saved
                .retry_allowed_at_ms
                .filter(|_| saved.reason.revived_by() != RevivedBy::Start)
                .map(at),
            detail: saved.detail.clone(),
        }
    }
}

fn epoch_millis(at: SystemTime) -> u64 {
    at.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Lifecycle {
    /// What to save of this lifecycle, with the server's backoff streak.
    pub fn memory(&self, failure_streak: u32) -> Memory {
        Memory { state: self.state, dead: self.dead.as_ref().map(DeadMemory::from), failure_streak }
    }

    /// The lifecycle a server starts the hangar's next run with: a dead server stays dead with
    /// the same record (`since`, reason, detail, `retry_allowed_at`: a `given_up` or
    /// `capability_blocked` server waits for an explicit start, a backoff runs out when it would
    /// have); any other comes back `cold` (nothing is running any more, and nothing is started
    /// by a restart). An `upstream_unauthorized` one comes back `cold` too: its credentials are
    /// read anew at each load (a reload that replaces it included), and what refused the old
    /// ones says nothing of the new.
    pub fn restore(memory: &Memory) -> Lifecycle {
        match (memory.state, &memory.dead) {
            (State::Dead, Some(dead)) if dead.reason != DeadReason::UpstreamUnauthorized => {
                Lifecycle { state: State::Dead, dead: Some(Dead::from(dead)) }
            }
            _ => Lifecycle::default(),
        }
    }
}

impl Event {
    fn name(&self) -> &'static str {
        match self {
            Event::Start => "start",
            Event::HandshakeDone => "handshake_done",
            Event::StartFailed { .. } => "start_failed",
            Event::Exited { .. } => "exited",
            Event::ThresholdReached => "threshold_reached",
            Event::GaveUp { .. } => "gave_up",
            Event::CapabilityBlocked => "capability_blocked",
            Event::Unauthorized => "unauthorized",
            Event::Stop(_) => "stop",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
    }

    fn ready() -> Lifecycle {
        let mut l = Lifecycle::default();
        l.apply(Event::Start, t(0)).unwrap();
        l.apply(Event::HandshakeDone, t(1)).unwrap();
        l
    }

    #[test]
    fn starts_cold_and_comes_up() {
        let mut l = Lifecycle::default();
        assert_eq!(l.state(), State::Cold);
        assert_eq!(l.apply(Event::Start, t(0)), Ok(State::Cold));
        assert_eq!(l.state(), State::Initializing);
        assert_eq!(l.apply(Event::HandshakeDone, t(1)), Ok(State::Initializing));
        assert_eq!(l.state(), State::Ready);
        assert!(l.dead().is_none());
    }

    #[test]
    fn exit_during_start_is_start_failed_and_after_is_crashed() {
        let mut l = Lifecycle::default();
        l.apply(Event::Start, t(0)).unwrap();
        l.apply(Event::Exited { retry_allowed_at: None }, t(2)).unwrap();
        let dead = l.dead().unwrap();
        assert_eq!((l.state(), dead.reason, dead.since), (State::Dead, DeadReason::StartFailed, t(2)));

        let mut l = ready();
        l.apply(Event::Exited { retry_allowed_at: Some(t(9)) }, t(3)).unwrap();
        let dead = l.dead().unwrap();
        assert_eq!((dead.reason, dead.since, dead.retry_allowed_at), (DeadReason::Crashed, t(3), Some(t(9))));
    }

    #[test]
    fn only_a_dead_server_is_explained_and_a_start_forgets_it() {
        let mut l = ready();
        l.explain("its process exited with code 3".into());
        assert!(l.dead().is_none());
        l.apply(Event::Exited { retry_allowed_at: None }, t(2)).unwrap();
        l.explain("its process exited with code 3".into());
        assert_eq!(l.dead().unwrap().detail.as_deref(), Some("its process exited with code 3"));
        l.apply(Event::Start, t(3)).unwrap();
        assert!(l.dead().is_none());
    }

    #[test]
    fn degraded_then_given_up_or_recovered() {
        let mut l = ready();
        l.apply(Event::ThresholdReached, t(5)).unwrap();
        assert_eq!(l.state(), State::Degraded);
        l.apply(Event::Exited { retry_allowed_at: None }, t(6)).unwrap();
        assert_eq!(l.state(), State::Degraded, "recovery owns a degraded server whose process died");
        l.apply(Event::GaveUp { retry_allowed_at: Some(t(20)) }, t(7)).unwrap();
        assert_eq!(l.dead().unwrap().reason, DeadReason::GivenUp);

        let mut l = ready();
        l.apply(Event::ThresholdReached, t(5)).unwrap();
        l.apply(Event::Start, t(6)).unwrap();
        l.apply(Event::HandshakeDone, t(7)).unwrap();
        assert_eq!(l.state(), State::Ready);
    }

    #[test]
    fn a_refused_credential_has_no_backoff_needs_a_start_and_is_not_restored() {
        let mut l = Lifecycle::default();
        l.apply(Event::Start, t(1)).unwrap();
        l.apply(Event::Unauthorized, t(2)).unwrap();
        let dead = l.dead().unwrap().clone();
        assert_eq!((dead.reason, dead.retry_allowed_at), (DeadReason::UpstreamUnauthorized, None));
        assert!(!dead.call_may_revive(t(1000)));
        // The next load reads the credentials anew: what refused the old ones is not kept.
        assert_eq!(Lifecycle::restore(&l.memory(1)).state(), State::Cold);
        l.apply(Event::Start, t(3)).unwrap();
        assert_eq!(l.state(), State::Initializing);
    }

    #[test]
    fn capability_blocked_has_no_backoff_and_needs_a_start() {
        let mut l = ready();
        l.apply(Event::CapabilityBlocked, t(4)).unwrap();
        let dead = l.dead().unwrap().clone();
        assert_eq!(dead.reason, DeadReason::CapabilityBlocked);
        assert_eq!(dead.retry_allowed_at, None);
        assert_eq!(dead.reason.revived_by(), RevivedBy::Start);
        assert!(!dead.call_may_revive(t(1000)));
        l.apply(Event::Start, t(5)).unwrap();
        assert_eq!(l.state(), State::Initializing);
        assert!(l.dead().is_none());
    }

    #[test]
    fn a_call_revives_only_after_the_backoff() {
        let dead = Dead { reason: DeadReason::Crashed, since: t(0), retry_allowed_at: Some(t(10)), detail: None };
        assert!(!dead.call_may_revive(t(9)));
        assert!(dead.call_may_revive(t(10)));
        let no_backoff = Dead { retry_allowed_at: None, ..dead };
        assert!(no_backoff.call_may_revive(t(0)));
    }

    #[test]
    fn an_explicit_start_also_waits_for_the_backoff() {
        let dead = Dead { reason: DeadReason::StartFailed, since: t(0), retry_allowed_at: Some(t(10)), detail: None };
        assert_eq!(dead.next_start_at(t(3)), Some(t(10)));
        assert_eq!(dead.next_start_at(t(10)), None);
        let blocked = Dead { reason: DeadReason::CapabilityBlocked, since: t(0), retry_allowed_at: None, detail: None };
        assert_eq!(blocked.next_start_at(t(0)), None, "a start is how a blocked server is revived");
    }

    #[test]
    fn stop_returns_to_cold_and_illegal_moves_change_nothing() {
        let mut l = ready();
        l.apply(Event::Stop(StopReason::Idle), t(9)).unwrap();
        assert_eq!(l.state(), State::Cold);

        let mut cold = Lifecycle::default();
        let before = cold.clone();
        assert_eq!(cold.apply(Event::HandshakeDone, t(0)), Err(Refused { state: "cold", event: "handshake_done" }));
        assert_eq!(cold.apply(Event::Exited { retry_allowed_at: None }, t(0)).map_err(|r| r.event), Err("exited"));
        assert_eq!(cold, before);

        let mut dead = ready();
        dead.apply(Event::Exited { retry_allowed_at: None }, t(2)).unwrap();
        assert!(
            dead.apply(Event::Stop(StopReason::UserRequest), t(3)).is_err(),
            "stopping keeps a dead server's reason"
        );
        assert!(dead.apply(Event::Start, t(3)).is_ok());
    }

    #[test]
    fn every_state_refuses_handshake_done_unless_initializing() {
        for state in [State::Cold, State::Ready, State::Degraded, State::Dead] {
            let mut l = Lifecycle { state, dead: None };
            assert!(l.apply(Event::HandshakeDone, t(0)).is_err(), "{state:?}");
        }
    }

    #[test]
    fn a_dead_server_is_restored_dead_with_the_same_record() {
        let since = SystemTime::UNIX_EPOCH + Duration::from_millis(1_800_000_000_123);
        let mut l = Lifecycle::default();
        l.apply(Event::Start, since).unwrap();
        l.apply(Event::GaveUp { retry_allowed_at: Some(since + Duration::from_millis(5_250)) }, since).unwrap();
        l.explain("its process exited with code 3".into());
        let saved = serde_json::to_string(&l.memory(4)).unwrap();
        let memory: Memory = serde_json::from_str(&saved).unwrap();
        assert_eq!(memory.failure_streak, 4);
        let restored = Lifecycle::restore(&memory);
        assert_eq!(restored, l, "the same state and the same dead record, to the millisecond");
        assert_eq!(restored.dead().unwrap().reason, DeadReason::GivenUp);
    }

    #[test]
    fn a_blocked_server_is_restored_blocked_without_backoff() {
        let mut l = ready();
        l.apply(Event::CapabilityBlocked, t(4)).unwrap();
        let mut memory = l.memory(0);
        // Whatever was saved, a blocked server has no backoff: a start is how it is revived.
        memory.dead.as_mut().unwrap().retry_allowed_at_ms = Some(1);
        let restored = Lifecycle::restore(&memory);
        assert_eq!(restored.state(), State::Dead);
        assert_eq!(restored.dead().unwrap().reason, DeadReason::CapabilityBlocked);
        assert_eq!(restored.dead().unwrap().retry_allowed_at, None);
        assert!(!restored.dead().unwrap().call_may_revive(t(1000)));
    }

    #[test]
    fn every_other_state_comes_back_cold() {
        for state in [State::Cold, State::Initializing, State::Ready, State::Degraded] {
            let restored = Lifecycle::restore(&Memory { state, dead: None, failure_streak: 2 });
            assert_eq!(restored, Lifecycle::default(), "{state:?}");
        }
        // A dead state without its record (a damaged row) cannot be told; it comes back cold.
        let restored = Lifecycle::restore(&Memory { state: State::Dead, dead: None, failure_streak: 0 });
        assert_eq!(restored.state(), State::Cold);
    }

    #[test]
    fn gauge_values_follow_the_documented_order() {
        let gauges: Vec<u8> =
            [State::Cold, State::Initializing, State::Ready, State::Degraded, State::Dead].map(State::gauge).to_vec();
        assert_eq!(gauges, [0, 1, 2, 3, 4]);
    }
}
