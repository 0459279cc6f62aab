//! Legacy sessions (2025-11-25 and older), kept here so that every API instance sees the same
//! ones: an id ended on one instance is unknown on all of them.
//!
//! A session belongs to the identity that opened it (another identity's request in it is
//! answered as if it did not exist, so ids are never confirmed to strangers), expires after
//! `tool_access.sessions.idle_ttl_s` without use (a held stream counts as use), and at most
//! `tool_access.sessions.max_sessions` are kept. Room is made at the expense of whoever holds
//! the most: opening one more forgets the idlest session of the identity with the most sessions,
//! so one identity's flood of `initialize`s (or `GET /sse`s) evicts its own sessions, never
//! another's while it holds more. One identity holds at most
//! `tool_access.sessions.max_per_identity`; past it an open is refused (`concurrency_limited`).
//! What a session hears of upstreams follows its opener's current view: the caller as of its
//! last request ([`Registry::seen_as`]), and a key's profile as of the last reload
//! ([`Registry::rekey`], which also ends the sessions of a key the config no longer names).
//! Expired sessions are swept ([`Registry::upstream_subscriptions`]), so the upstream listens
//! their subscriptions held end with them. Each keeps what the client set (log level,
//! resource subscriptions) and one stream: the messages for it (answers of the old HTTP+SSE
//! transport, unsolicited upstream log lines, resource updates) go to whoever follows it, from
//! whichever API instance. Answers posted while nobody follows are queued (bounded) for the
//! next follower; upstream notifications are not.
//!
//! [`Registry`] is the pure rule set (time passed in); [`Sessions`] holds it behind a lock.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use hangar_core::access::{Caller, NamedKey};
use hangar_core::config::SessionsConfig;
use hangar_core::echo::bounded;
use hangar_core::ipc::{ClientSession, ErrorKind, IpcError, SessionChange, SessionState};
use hangar_core::mcp::{LEGACY_REVISIONS, log_severity};
use hangar_core::sync::Unpoisoned;
use hangar_core::time::rfc3339_millis;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// Messages kept for a session whose stream nobody holds.
const MAX_PENDING: usize = 256;
/// The most resources one session may subscribe to.
const MAX_SUBSCRIPTIONS: usize = 1024;
/// The longest session id accepted (the API mints 53 characters).
const MAX_ID_LEN: usize = 128;

struct Session {
    owner: String,
    /// When it was opened, its client as it named itself, and how many requests it made, for
    /// `GET /api/clients`.
    opened_at: SystemTime,
    client: Option<String>,
    requests: u64,
    /// Who opened it, for judging what upstream news it may hear.
    caller: Caller,
    state: SessionState,
    last_used: Instant,
    stream: Option<mpsc::UnboundedSender<Value>>,
    pending: VecDeque<Value>,
    /// Where each subscription lives upstream, once the API found its owner: URI as the
    /// client wrote it → (server, URI as that server knows it).
    upstream: HashMap<String, (String, String)>,
}

impl Session {
    /// Its opener as it asks now (a token's groups, or a reload, may have changed its profile).
    fn seen_as(&mut self, caller: &Caller) {
        if self.caller != *caller {
            self.caller = caller.clone();
        }
    }

    fn streaming(&self) -> bool {
        self.stream.as_ref().is_some_and(|stream| !stream.is_closed())
    }

    fn expired(&self, now: Instant, idle_ttl: Duration) -> bool {
        !self.streaming() && now.saturating_duration_since(self.last_used) > idle_ttl
    }

    /// To the stream if one is held; else queued when `queue` says so.
    fn deliver(&mut self, message: Value, queue: bool) {
        let message = match &self.stream {
            Some(stream) => match stream.send(message) {
                Ok(()) => return,
                Err(returned) => returned.0,
            },
            None => message,
        };
        self.stream = None;
        if queue {
            if self.pending.len() == MAX_PENDING {
                self.pending.pop_front();
            }
            self.pending.push_back(message);
        }
    }

    /// The URIs, as the client wrote them, of its subscriptions that `mcp_server`'s update of
    /// `upstream_uri` concerns: those bridged to it, else one the client wrote just so.
    fn subscribed_as(&self, mcp_server: &str, upstream_uri: &str) -> Vec<String> {
        let bridged: Vec<String> = self
            .upstream
            .iter()
            .filter(|(_, (server, uri))| server == mcp_server && uri == upstream_uri)
            .map(|(exposed, _)| exposed.clone())
            .collect();
        if !bridged.is_empty() {
            return bridged;
        }
        let unbridged = |s: &&String| **s == upstream_uri && !self.upstream.contains_key(*s);
        self.state.subscriptions.iter().filter(unbridged).cloned().collect()
    }

    /// Whether an upstream's unsolicited notification concerns this session.
    fn wants(&self, method: &str, params: Option<&Value>) -> bool {
        match method {
            "notifications/message" => {
                let level = params.and_then(|p| p.get("level")).and_then(Value::as_str);
                let severity = level.and_then(log_severity).unwrap_or(usize::MAX);
                // A log line outside any call is a shared server's, caused by whoever: only a
                // session that asked for log lines (`logging/setLevel`) hears them.
                let Some(wanted) = self.state.log_level.as_deref().and_then(log_severity) else { return false };
                severity >= wanted
            }
            _ => false,
        }
    }
}

fn unknown() -> IpcError {
    IpcError::new(ErrorKind::NotFound, "no such session (it ended, expired, or never was); send initialize")
}

fn invalid(message: String) -> IpcError {
    IpcError::new(ErrorKind::InvalidArgument, message)
}

pub struct Registry {
    sessions: HashMap<String, Session>,
    /// How long a session lives without use.
    idle_ttl: Duration,
    /// The most sessions kept at once.
    max_sessions: usize,
    /// The most sessions one identity holds at once.
    max_per_identity: usize,
}

impl Default for Registry {
    fn default() -> Self {
        let defaults = SessionsConfig::default();
        Registry {
            sessions: HashMap::new(),
            idle_ttl: defaults.idle_ttl(),
            max_sessions: defaults.max_sessions(),
            max_per_identity: defaults.max_per_identity(),
        }
    }
}

impl Registry {
    /// Takes the config's bounds (at start and on reload); sessions past a lowered bound go at
    /// the next sweep or open.
    pub fn configure(&mut self, config: &SessionsConfig) {
        self.idle_ttl = config.idle_ttl();
        self.max_sessions = config.max_sessions();
        self.max_per_identity = config.max_per_identity();
    }

    /// How long a session lives without use.
    pub fn idle_ttl(&self) -> Duration {
        self.idle_ttl
    }

    pub fn open(
        &mut self,
        id: &str,
        caller: &Caller,
        version: &str,
        capabilities: Value,
        now: Instant,
    ) -> Result<SessionState, IpcError> {
        if id.is_empty() || id.len() > MAX_ID_LEN || !id.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(invalid(format!("a session id must be 1 to {MAX_ID_LEN} visible ASCII characters")));
        }
        if !LEGACY_REVISIONS.contains(&version) {
            return Err(invalid(format!("`{}` is not a legacy protocol version", bounded(version))));
        }
        if self.sessions.contains_key(id) {
            return Err(invalid("that session id is taken".to_owned()));
        }
        // Expired sessions are forgotten when used, or here when room is needed.
        let idle_ttl = self.idle_ttl;
        let owned =
            |sessions: &HashMap<String, Session>| sessions.values().filter(|s| s.owner == caller.identity).count();
        if self.sessions.len() >= self.max_sessions || owned(&self.sessions) >= self.max_per_identity {
            self.sessions.retain(|_, session| !session.expired(now, idle_ttl));
        }
        // A cap as large as the whole bound is no cap: the identity's own idlest go instead.
        let held = owned(&self.sessions);
        if held >= self.max_per_identity && self.max_per_identity < self.max_sessions {
            return Err(IpcError::new(
                ErrorKind::ConcurrencyLimited,
                format!(
                    "too many sessions: this identity holds {held}, the most `tool_access.sessions.max_per_identity` \
                     allows; end one (DELETE /mcp) or let one expire"
                ),
            )
            .with_details(json!({"limit": "tool_access.sessions.max_per_identity", "max": self.max_per_identity})));
        }
        while self.sessions.len() >= self.max_sessions
            && let Some(idlest) = self.crowding().map(str::to_owned)
        {
            self.sessions.remove(&idlest);
        }
        let state = SessionState { version: version.to_owned(), capabilities, log_level: None, subscriptions: vec![] };
        let session = Session {
            owner: caller.identity.clone(),
            opened_at: SystemTime::now(),
            client: None,
            requests: 0,
            caller: caller.clone(),
            state: state.clone(),
            last_used: now,
            stream: None,
            pending: VecDeque::new(),
            upstream: HashMap::new(),
        };
        self.sessions.insert(id.to_owned(), session);
        Ok(state)
    }

    /// The session to forget for room: the idlest of the identity holding the most (ties: the
    /// idlest of those identities' sessions).
    fn crowding(&self) -> Option<&str> {
        let mut held: HashMap<&str, usize> = HashMap::new();
        for session in self.sessions.values() {
            *held.entry(session.owner.as_str()).or_default() += 1;
        }
        let most = held.values().copied().max()?;
        self.sessions
            .iter()
            .filter(|(_, s)| held.get(s.owner.as_str()) == Some(&most))
            .min_by_key(|(_, s)| s.last_used)
            .map(|(id, _)| id.as_str())
    }

    /// The session `id` of `identity`, live at `now`, marked used; an expired one is forgotten.
    fn live(&mut self, id: &str, identity: &str, now: Instant) -> Result<&mut Session, IpcError> {
        if self.sessions.get(id).is_some_and(|s| s.expired(now, self.idle_ttl)) {
            self.sessions.remove(id);
        }
        let session = self.sessions.get_mut(id).filter(|s| s.owner == identity).ok_or_else(unknown)?;
        session.last_used = now;
        session.requests += 1;
        Ok(session)
    }

    /// For a call in session `id` of `caller`: the session live at `now`, marked used and seen as
    /// `caller` (as [`Registry::seen_as`]), and its state to carry into the call.
    pub fn in_call(&mut self, id: &str, caller: &Caller, now: Instant) -> Result<&SessionState, IpcError> {
        let session = self.live(id, &caller.identity, now)?;
        session.seen_as(caller);
        Ok(&session.state)
    }

    /// Notes the client's own name for session `id` (`clientInfo`), as the API read it.
    pub fn name_client(&mut self, id: &str, client: Option<String>) {
        if let Some(session) = self.sessions.get_mut(id) {
            session.client = client;
        }
    }

    /// The live sessions whose owner `sees` lets through, the most recently used first.
    pub fn listed(&self, now: Instant, sees: impl Fn(&str) -> bool) -> Vec<ClientSession> {
        let wall = SystemTime::now();
        let mut listed: Vec<(Instant, ClientSession)> = self
            .sessions
            .iter()
            .filter(|(_, s)| !s.expired(now, self.idle_ttl) && sees(&s.owner))
            .map(|(id, s)| {
                let idle = now.saturating_duration_since(s.last_used);
                let shown = ClientSession {
                    session: format!("{}…", id.chars().take(8).collect::<String>()),
                    identity: s.owner.clone(),
                    protocol_version: s.state.version.clone(),
                    client: s.client.clone(),
                    opened_at: rfc3339_millis(s.opened_at),
                    last_used_at: rfc3339_millis(wall.checked_sub(idle).unwrap_or(wall)),
                    requests: s.requests,
                    streaming: s.streaming(),
                };
                (s.last_used, shown)
            })
            .collect();
        listed.sort_by_key(|(used, _)| std::cmp::Reverse(*used));
        listed.into_iter().map(|(_, shown)| shown).collect()
    }

    /// How many live sessions each identity holds.
    pub fn held(&self, now: Instant) -> HashMap<String, u64> {
        let mut held = HashMap::new();
        for session in self.sessions.values().filter(|s| !s.expired(now, self.idle_ttl)) {
            *held.entry(session.owner.clone()).or_default() += 1;
        }
        held
    }

    pub fn use_session(
        &mut self,
        id: &str,
        identity: &str,
        change: Option<SessionChange>,
        now: Instant,
    ) -> Result<SessionState, IpcError> {
        let session = self.live(id, identity, now)?;
        let subscriptions = &mut session.state.subscriptions;
        match change {
            None => {}
            Some(SessionChange::LogLevel(level)) => {
                if log_severity(&level).is_none() {
                    return Err(invalid(format!("`{}` is not a log level", bounded(&level))));
                }
                session.state.log_level = Some(level);
            }
            Some(SessionChange::Subscribe(uri)) if subscriptions.contains(&uri) => {}
            Some(SessionChange::Subscribe(_)) if subscriptions.len() >= MAX_SUBSCRIPTIONS => {
                return Err(invalid(format!("a session may subscribe to at most {MAX_SUBSCRIPTIONS} resources")));
            }
            Some(SessionChange::Subscribe(uri)) => subscriptions.push(uri),
            Some(SessionChange::Unsubscribe(uri)) => {
                subscriptions.retain(|s| *s != uri);
                session.upstream.remove(&uri);
            }
            Some(SessionChange::SubscribeUpstream { uri, .. })
                if !subscriptions.contains(&uri) && subscriptions.len() >= MAX_SUBSCRIPTIONS =>
            {
                return Err(invalid(format!("a session may subscribe to at most {MAX_SUBSCRIPTIONS} resources")));
            }
            Some(SessionChange::SubscribeUpstream { uri, mcp_server, upstream_uri }) => {
                if !subscriptions.contains(&uri) {
                    subscriptions.push(uri.clone());
                }
                session.upstream.insert(uri, (mcp_server, upstream_uri));
            }
            Some(SessionChange::Initialize { version, capabilities }) => {
                if !LEGACY_REVISIONS.contains(&version.as_str()) {
                    return Err(invalid(format!("`{}` is not a legacy protocol version", bounded(&version))));
                }
                session.state.version = version;
                session.state.capabilities = capabilities;
            }
        }
        Ok(session.state.clone())
    }

    /// Ends the session; its stream's follower sees the end.
    pub fn end(&mut self, id: &str, identity: &str, now: Instant) -> Result<(), IpcError> {
        self.live(id, identity, now)?;
        self.sessions.remove(id);
        Ok(())
    }

    pub fn post(&mut self, id: &str, identity: &str, message: Value, now: Instant) -> Result<(), IpcError> {
        self.live(id, identity, now)?.deliver(message, true);
        Ok(())
    }

    /// `stream` now holds the session's stream (a previous holder's ends), queued messages first.
    pub fn follow(
        &mut self,
        id: &str,
        identity: &str,
        stream: mpsc::UnboundedSender<Value>,
        now: Instant,
    ) -> Result<(), IpcError> {
        let session = self.live(id, identity, now)?;
        for message in session.pending.drain(..) {
            let _ = stream.send(message);
        }
        session.stream = Some(stream);
        Ok(())
    }

    /// An upstream's notification outside any request, to every session that holds a stream,
    /// wants it (log level, subscription), and whose opener `sees` the server. A resource update
    /// names the URI as each session wrote it (without the upstream's subscription id).
    pub fn notify(&mut self, mcp_server: &str, message: &Value, sees: impl Fn(&str, &Caller) -> bool) {
        let Some(method) = message.get("method").and_then(Value::as_str) else { return };
        let params = message.get("params");
        for (id, session) in self.sessions.iter_mut() {
            if !session.streaming() || !sees(id, &session.caller) {
                continue;
            }
            if method == "notifications/resources/updated" {
                let uri = params.and_then(|p| p.get("uri")).and_then(Value::as_str).unwrap_or_default();
                for exposed in session.subscribed_as(mcp_server, uri) {
                    let params = json!({"uri": exposed});
                    session.deliver(json!({"jsonrpc": "2.0", "method": method, "params": params}), false);
                }
            } else if session.wants(method, params) {
                session.deliver(message.clone(), false);
            }
        }
    }

    /// Session `id`'s opener as it asks now: what the session hears of upstreams follows the
    /// caller's current profile (a token's groups, or a reload, may have changed it). Another
    /// identity's request changes nothing.
    pub fn seen_as(&mut self, id: &str, caller: &Caller) {
        if let Some(session) = self.sessions.get_mut(id).filter(|s| s.owner == caller.identity) {
            session.seen_as(caller);
        }
    }

    /// After a reload: the sessions of a key the config still names take its profile now, and
    /// those of a key it no longer names end (their streams with them).
    pub fn rekey(&mut self, before: &[NamedKey], after: &[NamedKey]) {
        let named = |keys: &[NamedKey], owner: &str| keys.iter().find(|key| key.name == owner).cloned();
        self.sessions
            .retain(|_, session| named(before, &session.owner).is_none() || named(after, &session.owner).is_some());
        for session in self.sessions.values_mut() {
            if let Some(key) = named(after, &session.owner) {
                session.caller.profile = key.profile;
            }
        }
    }

    /// What each server's `subscriptions/listen` must hold: the URIs, as it knows them, that
    /// live sessions subscribed to through it. Expired sessions are forgotten here (the sweep).
    pub fn upstream_subscriptions(&mut self, now: Instant) -> BTreeMap<String, BTreeSet<String>> {
        let idle_ttl = self.idle_ttl;
        self.sessions.retain(|_, session| !session.expired(now, idle_ttl));
        let mut wanted: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (server, uri) in self.sessions.values().flat_map(|s| s.upstream.values()) {
            wanted.entry(server.clone()).or_default().insert(uri.clone());
        }
        wanted
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.sessions.len()
    }
}

/// The registry behind a lock, with the clock.
#[derive(Default)]
pub struct Sessions(Mutex<Registry>);

impl Sessions {
    /// Runs `rule` on the registry at the current time.
    pub fn with<T>(&self, rule: impl FnOnce(&mut Registry, Instant) -> T) -> T {
        let mut registry = self.0.locked();
        rule(&mut registry, Instant::now())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn caller(identity: &str) -> Caller {
        Caller { identity: identity.into(), profile: None }
    }

    #[test]
    fn a_session_hears_as_its_opener_now_is() {
        let mut registry = Registry::default();
        let now = Instant::now();
        registry.open("s", &caller("alice"), "2025-11-25", Value::Null, now).unwrap();
        registry.open("t", &caller("gone"), "2025-11-25", Value::Null, now).unwrap();
        registry.open("u", &caller("oauth:bob"), "2025-11-25", Value::Null, now).unwrap();
        let dev = Caller { identity: "alice".into(), profile: Some("dev".into()) };
        registry.seen_as("s", &Caller { identity: "mallory".into(), profile: None });
        assert_eq!(registry.sessions["s"].caller, caller("alice"), "another identity changes nothing");
        registry.seen_as("s", &dev);
        assert_eq!(registry.sessions["s"].caller, dev);
        let key = |name: &str, profile: &str| NamedKey {
            name: name.into(),
            hash: String::new(),
            profile: Some(profile.into()),
        };
        registry.rekey(&[key("alice", "dev"), key("gone", "dev")], &[key("alice", "ops")]);
        assert_eq!(registry.sessions["s"].caller.profile.as_deref(), Some("ops"));
        assert!(!registry.sessions.contains_key("t"), "a removed key's session ends");
        assert!(registry.sessions.contains_key("u"), "a token's session is no key's");
    }

    fn opened(registry: &mut Registry, id: &str, now: Instant) {
        registry.open(id, &caller("alice"), "2025-11-25", json!({"roots": {}}), now).unwrap();
    }

    #[test]
    fn a_session_is_known_until_it_ends_and_only_to_its_owner() {
        let (mut registry, now) = (Registry::default(), Instant::now());
        opened(&mut registry, "s1", now);
        let state = registry.use_session("s1", "alice", None, now).unwrap();
        assert_eq!(state.version, "2025-11-25");
        assert_eq!(state.capabilities, json!({"roots": {}}));
        let foreign = registry.use_session("s1", "mallory", None, now).unwrap_err();
        assert_eq!(foreign.kind, ErrorKind::NotFound);
        assert_eq!(registry.end("s1", "mallory", now).unwrap_err().kind, ErrorKind::NotFound);
        registry.end("s1", "alice", now).unwrap();
        assert_eq!(registry.use_session("s1", "alice", None, now).unwrap_err().kind, ErrorKind::NotFound);
        assert_eq!(registry.end("s1", "alice", now).unwrap_err().kind, ErrorKind::NotFound);
        assert_eq!(registry.use_session("never", "alice", None, now).unwrap_err().kind, ErrorKind::NotFound);
    }

    #[test]
    fn an_idle_session_expires_but_use_or_a_held_stream_keeps_it() {
        let (mut registry, start) = (Registry::default(), Instant::now());
        opened(&mut registry, "used", start);
        opened(&mut registry, "idle", start);
        opened(&mut registry, "streaming", start);
        let (stream, _held) = mpsc::unbounded_channel();
        registry.follow("streaming", "alice", stream, start).unwrap();
        let half = start + registry.idle_ttl() / 2;
        registry.use_session("used", "alice", None, half).unwrap();
        let later = start + registry.idle_ttl() + Duration::from_secs(1);
        assert!(registry.use_session("used", "alice", None, later).is_ok());
        assert!(registry.use_session("streaming", "alice", None, later).is_ok());
        assert_eq!(registry.use_session("idle", "alice", None, later).unwrap_err().kind, ErrorKind::NotFound);
    }

    #[test]
    fn opening_past_the_bound_forgets_the_idlest() {
        let (mut registry, start) = (Registry::default(), Instant::now());
        let max = SessionsConfig::default().max_sessions();
        registry.configure(&SessionsConfig { max_per_identity: Some(max), ..SessionsConfig::default() });
        for n in 0..max {
            opened(&mut registry, &format!("s{n}"), start + Duration::from_millis(n as u64));
        }
        let now = start + Duration::from_secs(60);
        registry.use_session("s0", "alice", None, now).unwrap();
        opened(&mut registry, "new", now);
        assert_eq!(registry.len(), max);
        assert!(registry.use_session("s0", "alice", None, now).is_ok(), "recently used");
        assert!(registry.use_session("s1", "alice", None, now).is_err(), "the idlest went");
    }

    #[test]
    fn room_is_made_from_the_identity_holding_the_most_and_one_identity_is_capped() {
        let (mut registry, start) = (Registry::default(), Instant::now());
        let bounds = SessionsConfig { idle_ttl_s: None, max_sessions: Some(4), max_per_identity: Some(3) };
        registry.configure(&bounds);
        registry.open("bob", &caller("bob"), "2025-11-25", json!({}), start).unwrap();
        for n in 0..3 {
            opened(&mut registry, &format!("a{n}"), start + Duration::from_millis(n + 1));
        }
        let refused = registry.open("a3", &caller("alice"), "2025-11-25", json!({}), start).unwrap_err();
        assert_eq!(refused.kind, ErrorKind::ConcurrencyLimited);
        assert!(refused.message.contains("max_per_identity"), "{}", refused.message);
        let later = start + Duration::from_secs(1);
        registry.open("carol", &caller("carol"), "2025-11-25", json!({}), later).unwrap();
        assert!(registry.use_session("bob", "bob", None, later).is_ok(), "the idlest, but not the crowding one's");
        assert!(registry.use_session("a0", "alice", None, later).is_err(), "alice's idlest went");
        assert_eq!(registry.len(), 4);
    }

    #[test]
    fn bad_ids_versions_and_levels_are_refused() {
        let (mut registry, now) = (Registry::default(), Instant::now());
        for id in ["", "with space", &"x".repeat(MAX_ID_LEN + 1)] {
            assert_eq!(
                registry.open(id, &caller("a"), "2025-11-25", json!({}), now).unwrap_err().kind,
                ErrorKind::InvalidArgument
            );
        }
        assert!(registry.open("s", &caller("a"), "2026-07-28", json!({}), now).is_err());
        registry.open("s", &caller("a"), "2024-11-05", json!({}), now).unwrap();
        assert!(registry.open("s", &caller("a"), "2024-11-05", json!({}), now).is_err(), "taken");
        let level = Some(SessionChange::LogLevel("loud".into()));
        assert_eq!(registry.use_session("s", "a", level, now).unwrap_err().kind, ErrorKind::InvalidArgument);
    }

    #[test]
    fn level_and_subscriptions_are_kept_and_choose_what_upstream_news_a_stream_hears() {
        let (mut registry, now) = (Registry::default(), Instant::now());
        opened(&mut registry, "s", now);
        registry.use_session("s", "alice", Some(SessionChange::LogLevel("warning".into())), now).unwrap();
        registry.use_session("s", "alice", Some(SessionChange::Subscribe("file:///a".into())), now).unwrap();
        registry.use_session("s", "alice", Some(SessionChange::Subscribe("file:///b".into())), now).unwrap();
        let state =
            registry.use_session("s", "alice", Some(SessionChange::Unsubscribe("file:///b".into())), now).unwrap();
        assert_eq!(state.log_level.as_deref(), Some("warning"));
        assert_eq!(state.subscriptions, vec!["file:///a".to_owned()]);

        let log = |level: &str| json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": level, "data": level}});
        let updated =
            |uri: &str| json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}});
        registry.notify("srv", &log("error"), |_, _| true);
        let (stream, mut heard) = mpsc::unbounded_channel();
        registry.follow("s", "alice", stream, now).unwrap();
        for message in [log("info"), log("error"), updated("file:///b"), updated("file:///a"), json!({"method": "x"})] {
            registry.notify("srv", &message, |_, _| true);
        }
        registry.notify("srv", &log("emergency"), |_, _| false);
        assert_eq!(heard.try_recv().unwrap(), log("error"));
        assert_eq!(heard.try_recv().unwrap(), updated("file:///a"));
        assert!(heard.try_recv().is_err(), "nothing else: not below the level, not unsubscribed, not unseen");
    }

    #[test]
    fn bridged_subscriptions_name_the_upstream_listens_and_their_updates_the_client_s_uri() {
        let (mut registry, now) = (Registry::default(), Instant::now());
        opened(&mut registry, "s", now);
        opened(&mut registry, "t", now);
        let bridge = |uri: &str, server: &str, upstream: &str| {
            Some(SessionChange::SubscribeUpstream {
                uri: uri.into(),
                mcp_server: server.into(),
                upstream_uri: upstream.into(),
            })
        };
        let state = registry.use_session("s", "alice", bridge("conf__a://x", "conf", "a://x"), now).unwrap();
        assert_eq!(state.subscriptions, vec!["conf__a://x".to_owned()], "bridging subscribes too");
        registry.use_session("t", "alice", bridge("a://x", "conf", "a://x"), now).unwrap();
        registry.use_session("t", "alice", bridge("b://y", "other", "b://y"), now).unwrap();
        let wanted = registry.upstream_subscriptions(now);
        assert_eq!(wanted.len(), 2);
        assert_eq!(wanted["conf"], BTreeSet::from(["a://x".to_owned()]), "one listen per server, URIs merged");

        let (stream, mut heard) = mpsc::unbounded_channel();
        registry.follow("s", "alice", stream, now).unwrap();
        let updated = |uri: &str| {
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                   "params": {"uri": uri, "_meta": {"io.modelcontextprotocol/subscriptionId": 7}}})
        };
        registry.notify("other", &updated("a://x"), |_, _| true);
        registry.notify("conf", &updated("a://x"), |_, _| true);
        let expected =
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "conf__a://x"}});
        assert_eq!(heard.try_recv().unwrap(), expected, "only the owner's update, named as the client wrote it");
        assert!(heard.try_recv().is_err());

        registry.use_session("s", "alice", Some(SessionChange::Unsubscribe("conf__a://x".into())), now).unwrap();
        registry.end("t", "alice", now).unwrap();
        assert!(registry.upstream_subscriptions(now).is_empty(), "no session wants a listen any more");
    }

    #[test]
    fn posts_reach_the_follower_or_wait_for_the_next_one_and_the_end_ends_the_stream() {
        let (mut registry, now) = (Registry::default(), Instant::now());
        opened(&mut registry, "s", now);
        registry.post("s", "alice", json!(1), now).unwrap();
        let (first, first_heard) = mpsc::unbounded_channel();
        registry.follow("s", "alice", first, now).unwrap();
        drop(first_heard);
        registry.post("s", "alice", json!(2), now).unwrap();
        let (second, mut heard) = mpsc::unbounded_channel();
        registry.follow("s", "alice", second, now).unwrap();
        registry.post("s", "alice", json!(3), now).unwrap();
        assert_eq!(heard.try_recv().unwrap(), json!(2), "queued while the first follower was gone");
        assert_eq!(heard.try_recv().unwrap(), json!(3));
        assert_eq!(registry.post("s", "bob", json!(4), now).unwrap_err().kind, ErrorKind::NotFound);
        registry.end("s", "alice", now).unwrap();
        assert!(matches!(heard.try_recv(), Err(mpsc::error::TryRecvError::Disconnected)));
    }

    #[test]
    fn a_session_without_a_follower_queues_a_bounded_number_of_posts() {
        let (mut registry, now) = (Registry::default(), Instant::now());
        opened(&mut registry, "s", now);
        for n in 0..MAX_PENDING + 10 {
            registry.post("s", "alice", json!(n), now).unwrap();
        }
        let (stream, mut heard) = mpsc::unbounded_channel();
        registry.follow("s", "alice", stream, now).unwrap();
        assert_eq!(heard.try_recv().unwrap(), json!(10), "the oldest went first");
    }

    #[test]
    fn the_configured_bounds_hold_and_the_sweep_drops_expired_sessions_subscriptions() {
        let (mut registry, start) = (Registry::default(), Instant::now());
        registry.configure(&SessionsConfig { idle_ttl_s: Some(2.0), max_sessions: Some(2), max_per_identity: None });
        for id in ["a", "b", "c"] {
            opened(&mut registry, id, start);
        }
        assert_eq!(registry.len(), 2, "at most max_sessions");
        let bridge = Some(SessionChange::SubscribeUpstream {
            uri: "a://x".into(),
            mcp_server: "conf".into(),
            upstream_uri: "a://x".into(),
        });
        registry.use_session("c", "alice", bridge, start).unwrap();
        assert_eq!(registry.upstream_subscriptions(start + Duration::from_secs(1)).len(), 1);
        let later = start + Duration::from_secs(3);
        assert!(registry.upstream_subscriptions(later).is_empty(), "the idle session's listen is no longer wanted");
        assert_eq!(registry.len(), 0, "swept");
    }
}
