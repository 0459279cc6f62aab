//! The calls waiting for a person's approval (a rule's `then: approve`), and those decided
//! lately: the supervisor's, so every API instance lists and decides the same ones.
//!
//! Each pending approval is one waiting call's ([`Waiting`]): a decision releases that call
//! once, through its own channel, and is gone from the pending set in the same step, so nothing
//! decides it twice. A call that stops waiting (its caller gave up, or the wait timed out) takes
//! its approval out of the set as it goes. Every change is journaled (`approval` events, never
//! the arguments); the set itself is in memory and does not survive the supervisor.
//!
//! Bounded: at most [`MAX_PENDING_PER_IDENTITY`] waiting calls per identity (one identity cannot
//! crowd out the others) and [`MAX_PENDING`] in all, and the last [`RECENT`] decided ones.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use hangar_core::approvals::{Approval, ApprovalState, MAX_PENDING, MAX_PENDING_PER_IDENTITY, RECENT};
use hangar_core::ipc::{ErrorKind, IpcError};
use hangar_core::journal::Happened;
use hangar_core::sync::Unpoisoned;
use hangar_core::time::rfc3339_millis;
use tokio::sync::oneshot;

use crate::journal::Journal;

/// The pending and recent approvals.
#[derive(Default)]
pub struct Approvals {
    book: Mutex<Book>,
}

#[derive(Default)]
struct Book {
    pending: HashMap<String, Pending>,
    /// Newest last.
    recent: VecDeque<Approval>,
}

struct Pending {
    approval: Approval,
    release: oneshot::Sender<Approval>,
}

/// One call waiting for its approval: dropped before a decision (its caller gave up), it takes
/// the approval out of the pending set as `cancelled`.
pub struct Waiting<'a> {
    approvals: &'a Approvals,
    journal: &'a Journal,
    id: String,
    decided: Option<oneshot::Receiver<Approval>>,
}

impl Approvals {
    /// Puts `approval` (pending) in the set, journaled, for its call to wait on; refused when its
    /// identity, or everyone, has too many waiting already.
    pub fn ask<'a>(&'a self, approval: Approval, journal: &'a Journal) -> Result<Waiting<'a>, IpcError> {
        let (release, decided) = oneshot::channel();
        let id = approval.id.clone();
        {
            let mut book = self.book.locked();
            let identity = &approval.identity;
            if book.pending.values().filter(|p| p.approval.identity == *identity).count() >= MAX_PENDING_PER_IDENTITY {
                return Err(IpcError::new(
                    ErrorKind::ConcurrencyLimited,
                    format!("{MAX_PENDING_PER_IDENTITY} of your calls already wait for approval: wait for a decision"),
                ));
            }
            if book.pending.len() >= MAX_PENDING {
                return Err(IpcError::new(
                    ErrorKind::ConcurrencyLimited,
                    format!("{MAX_PENDING} calls already wait for approval: wait for a decision"),
                ));
            }
            book.pending.insert(id.clone(), Pending { approval: approval.clone(), release });
        }
        record(journal, approval);
        Ok(Waiting { approvals: self, journal, id, decided: Some(decided) })
    }

    /// Every approval `sees` lets through: pending ones first (oldest first), then recent ones
    /// (newest first).
    pub fn list(&self, sees: impl Fn(&Approval) -> bool) -> Vec<Approval> {
        let book = self.book.locked();
        let mut pending: Vec<&Approval> = book.pending.values().map(|p| &p.approval).filter(|a| sees(a)).collect();
        pending.sort_by(|a, b| (&a.requested_at, &a.id).cmp(&(&b.requested_at, &b.id)));
        let recent = book.recent.iter().rev().filter(|a| sees(a));
        pending.into_iter().chain(recent).cloned().collect()
    }

    /// Decides pending approval `id`, by `by`, after `may` allows it; the waiting call is
    /// released with the decision. An approval already decided, or none with that id, cannot be.
    pub fn decide(
        &self,
        id: &str,
        (by, approve): (&str, bool),
        may: impl FnOnce(&Approval) -> Result<(), IpcError>,
        journal: &Journal,
    ) -> Result<Approval, IpcError> {
        let decided = {
            let mut book = self.book.locked();
            let Some(pending) = book.pending.get(id) else {
                return Err(match book.recent.iter().find(|a| a.id == id) {
                    Some(done) => IpcError::new(
                        ErrorKind::InvalidArgument,
                        format!("approval {id} is {} already: a decision is taken once", done.state.as_str()),
                    ),
                    None => {
                        IpcError::new(ErrorKind::NotFound, format!("no pending approval with id `{}`", bounded(id)))
                    }
                });
            };
            may(&pending.approval)?;
            let Some(Pending { mut approval, release }) = book.pending.remove(id) else {
                return Err(IpcError::new(ErrorKind::Internal, "the approval went away while it was decided"));
            };
            approval.state = if approve { ApprovalState::Approved } else { ApprovalState::Denied };
            approval.decided_by = Some(by.to_owned());
            approval.decided_at = Some(rfc3339_millis(SystemTime::now()));
            // Its call may have just stopped waiting: then it is recorded without it.
            let _ = release.send(approval.clone());
            book.keep(approval.clone());
            approval
        };
        record(journal, decided.clone());
        Ok(decided)
    }

    /// How the call of approval `id` ended (`ok`, `is_error`, or an error type).
    pub fn finish(&self, id: &str, outcome: &str) {
        let mut book = self.book.locked();
        if let Some(approval) = book.recent.iter_mut().rev().find(|a| a.id == id) {
            approval.outcome = Some(outcome.to_owned());
        }
    }

    /// Takes `id` out of the pending set as `state` (its call stopped waiting), if it is there.
    fn give_up(&self, id: &str, state: ApprovalState) -> Option<Approval> {
        let mut book = self.book.locked();
        let mut approval = book.pending.remove(id)?.approval;
        approval.state = state;
        if state == ApprovalState::Cancelled {
            approval.outcome = Some(hangar_core::ipc::ErrorKind::Cancelled.as_str().to_owned());
        }
        book.keep(approval.clone());
        Some(approval)
    }
}

impl Book {
    fn keep(&mut self, mut approval: Approval) {
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        approval.arguments = None;
        self.recent.push_back(approval);
    }
}

impl Waiting<'_> {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The decision, or `approval_expired` once `timeout` passes without one.
    pub async fn decision(mut self, timeout: Duration) -> Result<Approval, IpcError> {
        let Some(decided) = self.decided.as_mut() else {
            return Err(IpcError::new(ErrorKind::Internal, "an approval was waited for twice"));
        };
        // Waited for in place: a caller that gives up meanwhile drops `self` still waiting, and
        // its `Drop` takes the approval out of the pending set.
        let outcome = tokio::time::timeout(timeout, decided).await;
        self.decided = None;
        match outcome {
            Ok(Ok(approval)) => Ok(approval),
            // Decided as the wait ran out: the decision stands.
            Ok(Err(_)) | Err(_) => match self.approvals.give_up(&self.id, ApprovalState::Expired) {
                Some(expired) => {
                    record(self.journal, expired);
                    Err(IpcError::new(
                        ErrorKind::ApprovalExpired,
                        format!(
                            "nobody approved the call within {} s (approvals.timeout_s): it was not made",
                            timeout.as_secs()
                        ),
                    ))
                }
                None => self.approvals.decided(&self.id).ok_or_else(|| {
                    IpcError::new(ErrorKind::Internal, "the approval went away while it was waited for")
                }),
            },
        }
    }
}

impl Approvals {
    fn decided(&self, id: &str) -> Option<Approval> {
        self.book.locked().recent.iter().rev().find(|a| a.id == id).cloned()
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        // Still waiting: the caller gave up before anyone decided.
        if self.decided.is_some()
            && let Some(cancelled) = self.approvals.give_up(&self.id, ApprovalState::Cancelled)
        {
            record(self.journal, cancelled);
        }
    }
}

/// Journals an approval as it now stands, without its arguments.
fn record(journal: &Journal, mut approval: Approval) {
    approval.arguments = None;
    journal.record(Happened::Approval { approval: Box::new(approval) });
}

fn bounded(text: &str) -> std::borrow::Cow<'_, str> {
    hangar_core::echo::bounded(text)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn approval(id: &str, identity: &str) -> Approval {
        Approval {
            id: id.into(),
            state: ApprovalState::Pending,
            identity: identity.into(),
            profile: Some("dev".into()),
            mcp_server: "files".into(),
            tool: "delete_file".into(),
            arguments_sha256: "sha256:00".into(),
            arguments: Some(serde_json::json!({"path": "/x"})),
            rule: "profiles.dev.rules[0]".into(),
            reason: None,
            generation: 1,
            requested_at: "2026-12-04T00:00:00.000Z".into(),
            expires_at: "2026-12-04T00:10:00.000Z".into(),
            decided_by: None,
            decided_at: None,
            outcome: None,
        }
    }

    #[tokio::test]
    async fn a_decision_releases_its_call_once() {
        let (approvals, journal) = (Approvals::default(), Journal::in_memory());
        let waiting = approvals.ask(approval("a1", "alice"), &journal).unwrap();
        assert_eq!(approvals.list(|_| true)[0].state, ApprovalState::Pending);
        let decided = approvals.decide("a1", ("bob", true), |_| Ok(()), &journal).unwrap();
        assert_eq!((decided.state, decided.decided_by.as_deref()), (ApprovalState::Approved, Some("bob")));
        let again = approvals.decide("a1", ("bob", false), |_| Ok(()), &journal).unwrap_err();
        assert!(again.message.contains("already"), "{again:?}");
        let released = waiting.decision(Duration::from_secs(5)).await.unwrap();
        assert_eq!(released.state, ApprovalState::Approved);
        approvals.finish("a1", "ok");
        assert_eq!(approvals.list(|_| true)[0].outcome.as_deref(), Some("ok"));
        assert!(approvals.list(|_| true)[0].arguments.is_none(), "recent ones keep no arguments");
    }

    #[tokio::test]
    async fn a_wait_times_out_and_a_dropped_one_is_cancelled() {
        let (approvals, journal) = (Approvals::default(), Journal::in_memory());
        let waiting = approvals.ask(approval("a1", "alice"), &journal).unwrap();
        let expired = waiting.decision(Duration::from_millis(10)).await.unwrap_err();
        assert_eq!(expired.kind, ErrorKind::ApprovalExpired);
        drop(approvals.ask(approval("a2", "alice"), &journal).unwrap());
        let states: Vec<_> = approvals.list(|_| true).iter().map(|a| (a.id.clone(), a.state)).collect();
        assert_eq!(states, [("a2".into(), ApprovalState::Cancelled), ("a1".into(), ApprovalState::Expired)]);
        assert_eq!(approvals.decide("zz", ("bob", true), |_| Ok(()), &journal).unwrap_err().kind, ErrorKind::NotFound);
    }

    #[tokio::test]
    async fn a_caller_giving_up_while_it_waits_cancels_its_approval() {
        let (approvals, journal) = (std::sync::Arc::new(Approvals::default()), Journal::in_memory());
        let waiting = {
            let (approvals, journal) = (approvals.clone(), journal.clone());
            tokio::spawn(async move {
                let waiting = approvals.ask(approval("a1", "alice"), &journal).unwrap();
                waiting.decision(Duration::from_secs(60)).await
            })
        };
        while approvals.list(|a| a.state == ApprovalState::Pending).is_empty() {
            tokio::task::yield_now().await;
        }
        waiting.abort();
        let _ = waiting.await;
        assert_eq!(approvals.list(|_| true)[0].state, ApprovalState::Cancelled);
        assert!(approvals.decide("a1", ("bob", true), |_| Ok(()), &journal).is_err(), "nothing left to decide");
    }

    #[test]
    fn one_identity_cannot_fill_the_set() {
        let (approvals, journal) = (Approvals::default(), Journal::in_memory());
        let held: Vec<_> = (0..MAX_PENDING_PER_IDENTITY)
            .map(|n| approvals.ask(approval(&format!("m{n}"), "mallory"), &journal).unwrap())
            .collect();
        let refused = approvals.ask(approval("m-last", "mallory"), &journal).err().unwrap();
        assert_eq!(refused.kind, ErrorKind::ConcurrencyLimited);
        assert!(approvals.ask(approval("a1", "alice"), &journal).is_ok(), "another identity still may");
        drop(held);
    }
}
