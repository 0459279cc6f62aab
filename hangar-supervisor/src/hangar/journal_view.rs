//! The journal's read requests (`Audit`, `Events`, `Rates`), answered within the caller's view.
//!
//! Admins (a view with `admin`, or the all-seeing view when no auth is configured) see every
//! entry. Others see audit entries only of their own calls to servers their view sees, and events
//! only about servers their view sees (reloads and gaps are everyone's; audit events are
//! admins' only; approvals are approvers' and their callers'), as their view may see them ([`shown`]): a reload names only the servers the view
//! sees and not who reloaded, an action names who took it only to that identity itself. Reads
//! run off the async threads (`spawn_blocking`).

use std::sync::Arc;
use std::time::SystemTime;

use hangar_core::access::Caller;
use hangar_core::ipc::{ErrorKind, IpcError, Reply};
use hangar_core::journal::{
    AuditEntry, AuditPage, AuditQuery, DEFAULT_PAGE, EventPage, Happened, JournalEvent, MAX_PAGE,
};
use hangar_core::policy::View;
use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

use super::Hangar;
use crate::journal::Journal;
use crate::journal::read::{Filter, Found, Keep, ReadError, Reader};

/// The most minutes `Rates` covers: a day.
const MAX_MINUTES: u32 = crate::journal::CHARTED_MINUTES;
/// The longest `outcome` filter (an error type).
const MAX_OUTCOME_LEN: usize = 64;

/// `Audit`: the audit trail as the caller's view sees it.
pub async fn audit_page(hangar: &Hangar, caller: &Caller, view: &View, query: AuditQuery) -> Result<Reply, IpcError> {
    let (journal, reader) = (hangar.shared.journal.clone(), hangar.journal_reader.clone());
    Ok(Reply::Audit(audit(journal, reader, caller, view, query).await?))
}

/// `Events`: a page of them, or with `follow` each as it comes as a notice (`notices`).
pub async fn events(
    hangar: &Hangar,
    (caller, view): (&Caller, &View),
    (since, limit, follow_on): (Option<u64>, Option<usize>, bool),
    notices: Option<mpsc::UnboundedSender<Value>>,
) -> Result<Reply, IpcError> {
    if follow_on {
        let Some(notices) = notices else {
            return Err(IpcError::new(ErrorKind::Internal, "a followed request came without its notice channel"));
        };
        let next = follow(hangar, caller, since, notices).await?;
        return Ok(Reply::Events(EventPage { events: Vec::new(), next }));
    }
    let (journal, reader) = (hangar.shared.journal.clone(), hangar.journal_reader.clone());
    let limit = page_limit(limit)?;
    let filter = Filter { keep: Some(events_keep(view.clone(), caller)), ..Filter::default() };
    let found = read(journal, reader, since, limit, filter).await?;
    let events = found.events.into_iter().filter_map(|event| shown(view, caller, event)).collect();
    Ok(Reply::Events(EventPage { events, next: found.next }))
}

/// `Rates`: audited calls and failures per minute over the last `minutes`.
pub async fn rates(hangar: &Hangar, caller: &Caller, view: &View, minutes: u32) -> Result<Reply, IpcError> {
    if !(1..=MAX_MINUTES).contains(&minutes) {
        return Err(invalid(format!("minutes must be from 1 to {MAX_MINUTES}, got {minutes}")));
    }
    let (journal, reader) = (hangar.shared.journal.clone(), hangar.journal_reader.clone());
    let own = own_calls(caller, view);
    let rates = blocking(move || {
        reader.rates(&journal, minutes, SystemTime::now(), |server, identity| {
            own.as_ref().is_none_or(|own| own(server, identity))
        })
    })
    .await?;
    Ok(Reply::Rates(rates))
}

async fn audit(
    journal: Arc<Journal>,
    reader: Arc<Reader>,
    caller: &Caller,
    view: &View,
    query: AuditQuery,
) -> Result<AuditPage, IpcError> {
    let limit = page_limit(query.limit)?;
    if let Some(outcome) = &query.outcome
        && (outcome.is_empty()
            || outcome.len() > MAX_OUTCOME_LEN
            || !outcome.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
    {
        return Err(invalid("outcome must be ok, is_error, error, or an error type (lower-case letters and _)"));
    }
    let (from, to) = (time_bound(query.from.as_deref(), "from")?, time_bound(query.to.as_deref(), "to")?);
    let mut filter = Filter {
        kind: Some("audit"),
        identity: query.identity.clone(),
        mcp_server: query.mcp_server,
        outcome: query.outcome,
        keep: None,
    };
    let own = own_calls(caller, view);
    if own.is_some() && query.identity.as_ref().is_some_and(|asked| *asked != caller.identity) {
        // Someone else's calls are not there for a non-admin: an empty page, not an error.
        return Ok(AuditPage { entries: Vec::new(), next: query.since.unwrap_or(0) });
    }
    if own.is_some() {
        filter.identity = Some(caller.identity.clone());
    }
    if own.is_some() || from.is_some() || to.is_some() {
        filter.keep = Some(Arc::new(move |event: &JournalEvent| {
            let Happened::Audit(entry) = &event.what else { return false };
            if !own.as_ref().is_none_or(|own| own(&entry.mcp_server, &entry.identity)) {
                return false;
            }
            if from.is_none() && to.is_none() {
                return true;
            }
            // Parsed once, for both bounds.
            let at = hangar_core::time::parse_millis(&event.at).unwrap_or(0);
            from.is_none_or(|from| at >= from) && to.is_none_or(|to| at < to)
        }));
    }
    // Read from `from` on, unless the caller is paging on with its cursor.
    let since = match (query.since, from) {
        (None, Some(from)) => {
            let reader = reader.clone();
            Some(blocking(move || reader.id_before(from as i64)).await?)
        }
        (since, _) => since,
    };
    let found = read(journal, reader, since, limit, filter).await?;
    let entries = found.events.into_iter().filter_map(audit_entry).collect();
    Ok(AuditPage { entries, next: found.next })
}

/// An audit event's entry, with the journal's id and time (the event carries them).
fn audit_entry(event: JournalEvent) -> Option<AuditEntry> {
    match event.what {
        Happened::Audit(entry) => Some(AuditEntry { id: event.id, at: event.at, ..entry }),
        _ => None,
    }
}

/// Whether an audited call (server, identity) is the caller's to see.
type OwnCalls = Arc<dyn Fn(&str, &str) -> bool + Send + Sync>;

/// For a non-admin, the test of an audited call it may see (its own, to a server it sees);
/// `None` for an admin, who sees every call.
fn own_calls(caller: &Caller, view: &View) -> Option<OwnCalls> {
    if view.is_admin() {
        return None;
    }
    let (view, identity) = (view.clone(), caller.identity.clone());
    Some(Arc::new(move |server: &str, who: &str| who == identity && view.sees_server(server)))
}

/// Which events `view` sees.
fn events_keep(view: View, caller: &Caller) -> Keep {
    let identity = caller.identity.clone();
    Arc::new(move |event: &JournalEvent| sees_event(&view, &identity, event))
}

/// An instance's events are its owner's (and admins'), as its server's are its viewers'.
fn sees_event(view: &View, identity: &str, event: &JournalEvent) -> bool {
    if view.is_admin() {
        return true;
    }
    match &event.what {
        Happened::Audit(_) => false,
        Happened::Reload { .. } | Happened::Gap { .. } => true,
        // Who may decide sees every approval; anyone else its own calls'.
        Happened::Approval { approval } => {
            view.is_approver() || (approval.identity == identity && view.sees_server(&approval.mcp_server))
        }
        other => other.mcp_server().is_some_and(|server| view.sees_unit(identity, server)),
    }
}

/// `event` as `view` (the view of `caller`) may see it, or `None` if it may not see it at all.
/// A non-admin learns that a reload happened and what changed among the servers it sees, never
/// who reloaded nor the other servers; of an action, who took it only if it was itself.
fn shown(view: &View, caller: &Caller, event: JournalEvent) -> Option<JournalEvent> {
    if !sees_event(view, &caller.identity, &event) {
        return None;
    }
    if view.is_admin() {
        return Some(event);
    }
    let JournalEvent { id, at, what } = event;
    let what = match what {
        Happened::Reload { mut changes, .. } => {
            for servers in [&mut changes.added, &mut changes.removed, &mut changes.changed, &mut changes.unchanged] {
                servers.retain(|server| view.sees_server(server));
            }
            Happened::Reload { changes, identity: String::new() }
        }
        Happened::Action { mcp_server, action, identity, .. } if identity != caller.identity => {
            Happened::Action { mcp_server, action, identity: String::new(), profile: None }
        }
        other => other,
    };
    Some(JournalEvent { id, at, what })
}

/// A `from` or `to` bound in milliseconds since the Unix epoch, from its RFC 3339 text.
fn time_bound(text: Option<&str>, key: &str) -> Result<Option<u64>, IpcError> {
    let Some(text) = text else { return Ok(None) };
    hangar_core::time::parse_millis(text)
        .map(Some)
        .ok_or_else(|| invalid(format!("{key} must be an RFC 3339 time such as 2026-12-04T10:00:00Z")))
}

fn page_limit(limit: Option<usize>) -> Result<usize, IpcError> {
    match limit.unwrap_or(DEFAULT_PAGE) {
        limit @ 1..=MAX_PAGE => Ok(limit),
        other => Err(invalid(format!("limit must be from 1 to {MAX_PAGE}, got {other}"))),
    }
}

fn invalid(message: impl Into<String>) -> IpcError {
    IpcError::new(ErrorKind::InvalidArgument, message)
}

/// A page after `since`, or the newest page without it.
async fn read(
    journal: Arc<Journal>,
    reader: Arc<Reader>,
    since: Option<u64>,
    limit: usize,
    filter: Filter,
) -> Result<Found, IpcError> {
    blocking(move || match since {
        Some(since) => reader.after(&journal, since, limit, &filter),
        None => reader.newest(&journal, limit, &filter),
    })
    .await
}

async fn blocking<T: Send + 'static>(
    read: impl FnOnce() -> Result<T, ReadError> + Send + 'static,
) -> Result<T, IpcError> {
    match tokio::task::spawn_blocking(read).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => {
            tracing::warn!(%err, "journal read failed");
            Err(IpcError::new(ErrorKind::Internal, "the journal cannot be read now"))
        }
        Err(err) => Err(IpcError::new(ErrorKind::Internal, format!("the journal read stopped: {err}"))),
    }
}

/// Sends the events after `since` (or from now, without it) as the caller's view sees them, each
/// once, in id order as recorded, until the caller goes. Subscribes first, so nothing recorded
/// during the replay is missed; a lagging subscription is made good from the journal.
async fn follow(
    hangar: &Hangar,
    caller: &Caller,
    since: Option<u64>,
    notices: mpsc::UnboundedSender<Value>,
) -> Result<u64, IpcError> {
    let journal = hangar.shared.journal.clone();
    let reader = hangar.journal_reader.clone();
    let mut live = journal.subscribe();
    let start = match since {
        Some(since) => since,
        None => {
            let (journal, reader) = (journal.clone(), reader.clone());
            blocking(move || reader.latest_id(&journal)).await?
        }
    };
    let mut sent = Sent { last: start };
    // The view is judged again for each read and event: a reload's new profiles apply at once.
    let view = || hangar.view(caller);
    if since.is_some() && !replay(&journal, &reader, &view, caller, &mut sent, &notices).await? {
        return Ok(sent.last);
    }
    loop {
        let event = match live.recv().await {
            Ok(event) => event,
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::debug!(missed, "an event follower fell behind; reading on from the journal");
                if !replay(&journal, &reader, &view, caller, &mut sent, &notices).await? {
                    return Ok(sent.last);
                }
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return Ok(sent.last),
        };
        if !sent.offer(&event, &view(), caller, &notices) {
            return Ok(sent.last);
        }
    }
}

/// Sends what the journal holds after the last id sent, page by page until caught up. False
/// once the caller is gone.
async fn replay(
    journal: &Arc<Journal>,
    reader: &Arc<Reader>,
    view: &impl Fn() -> View,
    caller: &Caller,
    sent: &mut Sent,
    notices: &mpsc::UnboundedSender<Value>,
) -> Result<bool, IpcError> {
    loop {
        let from = sent.last;
        let filter = Filter { keep: Some(events_keep(view(), caller)), ..Filter::default() };
        let found = read(journal.clone(), reader.clone(), Some(from), MAX_PAGE, filter).await?;
        let view = view();
        for event in &found.events {
            if !sent.offer(event, &view, caller, notices) {
                return Ok(false);
            }
        }
        if found.next <= from {
            return Ok(true);
        }
        sent.last = sent.last.max(found.next);
    }
}

/// What a follower has sent. The journal hands out ids in order (the tail, the live broadcast
/// and every read agree), so one cursor tells a repeat: every id above it at most once.
struct Sent {
    /// The highest id sent or read past (at first, where the follow began).
    last: u64,
}

impl Sent {
    /// Sends `event` as `view` sees it ([`shown`]) unless it was sent before or `view` does not
    /// see it; false once the caller is gone.
    fn offer(
        &mut self,
        event: &JournalEvent,
        view: &View,
        caller: &Caller,
        notices: &mpsc::UnboundedSender<Value>,
    ) -> bool {
        if event.id <= self.last {
            return true;
        }
        self.last = event.id;
        if !sees_event(view, &caller.identity, event) {
            return true;
        }
        let message = if view.is_admin() {
            serde_json::to_value(event)
        } else {
            let Some(event) = shown(view, caller, event.clone()) else { return true };
            serde_json::to_value(&event)
        };
        notices.send(message.unwrap_or(Value::Null)).is_ok()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use hangar_core::config::Config;

    use super::*;

    fn gap() -> Happened {
        Happened::Gap { dropped: 1, reason: None }
    }

    /// A follower that falls behind the live broadcast (more entries at once than it holds) reads
    /// the rest from the journal: every id once, in order.
    #[tokio::test]
    async fn a_lagging_follower_misses_nothing_and_repeats_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let config = Config::parse("mcp_servers:\n  math: {command: [\"true\"]}\n").unwrap();
        let hangar = Hangar::new(&config, None, journal.clone());
        let (notices, mut heard) = mpsc::unbounded_channel();
        let following = tokio::spawn({
            let hangar = hangar.clone();
            async move { follow(&hangar, &Caller::hangar(), None, notices).await }
        });
        let id = |notice: Value| notice["id"].as_u64().unwrap();
        // Live from now: entries until the follower hears one (it is then in its live loop).
        let mut first = None;
        let mut last = 0;
        for _ in 0..500 {
            last = journal.record(gap());
            if let Ok(Some(notice)) = tokio::time::timeout(Duration::from_millis(20), heard.recv()).await {
                first = Some(id(notice));
                break;
            }
        }
        let first = first.expect("the follower heard a live entry");
        // Far more than the broadcast holds, without yielding: the follower lags.
        for _ in 0..3000 {
            last = journal.record(gap());
        }
        for expected in first + 1..=last {
            assert_eq!(id(heard.recv().await.unwrap()), expected);
        }
        let after = journal.record(gap());
        assert_eq!(id(heard.recv().await.unwrap()), after, "live again after the lag");
        following.abort();
    }
}
