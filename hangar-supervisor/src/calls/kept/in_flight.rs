//! The tool calls running upstream right now, for `GET /api/calls` and the status page: each
//! registered once admitted (so a call waiting for a slot, a person or a start is not "in
//! flight") and gone when its upstream answers or it is dropped.
//!
//! One short lock per call start and end, never held across an await.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime};

use hangar_core::ipc::CallInFlight;
use hangar_core::sync::Unpoisoned;
use hangar_core::time::rfc3339_millis;

/// The calls in flight.
#[derive(Default)]
pub struct InFlight {
    next: AtomicU64,
    calls: Mutex<HashMap<u64, Running>>,
}

struct Running {
    mcp_server: String,
    tool: String,
    identity: String,
    began: Instant,
    began_at: SystemTime,
}

/// A call's place in [`InFlight`], given up when dropped.
pub struct Registered<'a> {
    in_flight: &'a InFlight,
    id: u64,
}

impl InFlight {
    /// Registers a call of `tool` on `mcp_server` (an instance's id for an isolated server) by
    /// `identity`, until the guard is dropped.
    pub fn register(&self, mcp_server: &str, tool: &str, identity: &str) -> Registered<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let running = Running {
            mcp_server: mcp_server.to_owned(),
            tool: tool.to_owned(),
            identity: identity.to_owned(),
            began: Instant::now(),
            began_at: SystemTime::now(),
        };
        self.calls.locked().insert(id, running);
        Registered { in_flight: self, id }
    }

    /// Those `sees` lets through (by server and identity), the longest running first.
    pub fn list(&self, sees: impl Fn(&str, &str) -> bool) -> Vec<CallInFlight> {
        let calls = self.calls.locked();
        let mut listed: Vec<(&Running, CallInFlight)> = calls
            .values()
            .filter(|r| sees(&r.mcp_server, &r.identity))
            .map(|r| {
                let shown = CallInFlight {
                    mcp_server: r.mcp_server.clone(),
                    tool: r.tool.clone(),
                    identity: r.identity.clone(),
                    started_at: rfc3339_millis(r.began_at),
                    elapsed_ms: u64::try_from(r.began.elapsed().as_millis()).unwrap_or(u64::MAX),
                };
                (r, shown)
            })
            .collect();
        listed.sort_by_key(|(r, _)| r.began);
        listed.into_iter().map(|(_, shown)| shown).collect()
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.in_flight.calls.locked().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_listed_while_registered_and_only_to_those_who_see_it() {
        let in_flight = InFlight::default();
        let first = in_flight.register("math", "add", "alice");
        let second = in_flight.register("slow", "sleep", "bob");
        assert_eq!(in_flight.list(|_, _| true).iter().map(|c| c.tool.as_str()).collect::<Vec<_>>(), ["add", "sleep"]);
        let bobs = in_flight.list(|_, identity| identity == "bob");
        assert_eq!((bobs.len(), bobs[0].mcp_server.as_str()), (1, "slow"));
        drop(first);
        assert_eq!(in_flight.list(|_, _| true).len(), 1);
        drop(second);
        assert!(in_flight.list(|_, _| true).is_empty());
    }
}
