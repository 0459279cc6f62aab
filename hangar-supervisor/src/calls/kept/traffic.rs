//! Who has been calling: each identity's requests, tool calls and failed calls since the hangar
//! started, and when it was first and last seen, for `GET /api/clients` and the status page.
//!
//! OAuth identities are unbounded, so at most [`MAX_IDENTITIES`] are kept: making room forgets
//! the one seen longest ago. One short lock per request, never held across an await.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

use hangar_core::ipc::IdentityTraffic;
use hangar_core::sync::Unpoisoned;
use hangar_core::time::rfc3339_millis;

/// The most identities kept.
pub const MAX_IDENTITIES: usize = 10_000;

/// Every identity's traffic.
#[derive(Default)]
pub struct Traffic {
    seen: Mutex<HashMap<String, Seen>>,
}

struct Seen {
    profile: Option<String>,
    first: SystemTime,
    last: SystemTime,
    requests: u64,
    calls: u64,
    errors: u64,
}

/// What [`Traffic::note`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Noted {
    /// A request the supervisor answered, of any kind.
    Request,
    /// A tool call run through the pipeline (a batch's each, a task's run), and whether it
    /// failed (a refusal included; an `isError` result is an answer).
    Call { failed: bool },
}

impl Traffic {
    /// Counts what `identity` (holding `profile`) did just now.
    pub fn note(&self, identity: &str, profile: Option<&str>, noted: Noted) {
        let now = SystemTime::now();
        let mut seen = self.seen.locked();
        if !seen.contains_key(identity) {
            if seen.len() >= MAX_IDENTITIES
                && let Some(stalest) = seen.iter().min_by_key(|(_, s)| s.last).map(|(id, _)| id.clone())
            {
                seen.remove(&stalest);
            }
            let fresh = Seen { profile: None, first: now, last: now, requests: 0, calls: 0, errors: 0 };
            seen.insert(identity.to_owned(), fresh);
        }
        let Some(entry) = seen.get_mut(identity) else { return };
        if entry.profile.as_deref() != profile {
            entry.profile = profile.map(str::to_owned);
        }
        entry.last = now;
        match noted {
            Noted::Request => entry.requests += 1,
            Noted::Call { failed } => {
                entry.calls += 1;
                entry.errors += u64::from(failed);
            }
        }
    }

    /// The identities `sees` lets through, the most recently seen first, each with its count of
    /// open sessions from `sessions`.
    pub fn list(&self, sees: impl Fn(&str) -> bool, sessions: impl Fn(&str) -> u64) -> Vec<IdentityTraffic> {
        let seen = self.seen.locked();
        let mut listed: Vec<(SystemTime, IdentityTraffic)> = seen
            .iter()
            .filter(|(identity, _)| sees(identity))
            .map(|(identity, s)| {
                let shown = IdentityTraffic {
                    identity: identity.clone(),
                    profile: s.profile.clone(),
                    first_seen: rfc3339_millis(s.first),
                    last_seen: rfc3339_millis(s.last),
                    requests: s.requests,
                    calls: s.calls,
                    errors: s.errors,
                    sessions: sessions(identity),
                };
                (s.last, shown)
            })
            .collect();
        listed.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.identity.cmp(&b.1.identity)));
        listed.into_iter().map(|(_, shown)| shown).collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn counts_requests_calls_and_failures_per_identity() {
        let traffic = Traffic::default();
        traffic.note("alice", Some("dev"), Noted::Request);
        traffic.note("alice", Some("dev"), Noted::Call { failed: false });
        traffic.note("alice", Some("dev"), Noted::Call { failed: true });
        traffic.note("bob", None, Noted::Call { failed: false });
        let listed = traffic.list(|_| true, |identity| u64::from(identity == "bob"));
        assert_eq!(listed[0].identity, "bob", "the most recently seen first");
        let alice = &listed[1];
        assert_eq!((alice.requests, alice.calls, alice.errors, alice.sessions), (1, 2, 1, 0));
        assert_eq!(alice.profile.as_deref(), Some("dev"));
        assert_eq!(traffic.list(|identity| identity == "alice", |_| 0).len(), 1, "a view sees its own");
    }

    #[test]
    fn room_is_made_by_forgetting_the_stalest() {
        let traffic = Traffic::default();
        for i in 0..MAX_IDENTITIES {
            traffic.note(&format!("oauth:{i}"), None, Noted::Request);
        }
        traffic.note("oauth:0", None, Noted::Request);
        traffic.note("newcomer", None, Noted::Request);
        let listed = traffic.list(|_| true, |_| 0);
        assert_eq!(listed.len(), MAX_IDENTITIES);
        assert!(listed.iter().any(|t| t.identity == "oauth:0"), "seen again lately: kept");
        assert!(listed.iter().any(|t| t.identity == "newcomer"));
    }
}
