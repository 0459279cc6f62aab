//! `mcp_servers.<id>.isolation`: whether one upstream process serves every client, or each
//! identity (or client session) gets an instance of its own, and how an instance is named.
//!
//! An instance is a full upstream of its own (process, sandbox, limits, log, lifecycle), named
//! `<server>@<label>`. The label is a digest of its owner, so it is the same in every run and
//! on every surface, and it says whose it is without saying who: a caller owns the instances
//! whose label starts with the digest of its identity ([`owns`]), which is how events, logs
//! and notifications of an instance reach its owner alone. `@` is never in a server id, so an
//! instance's name cannot be a configured server's.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The default of `mcp_servers.<id>.max_instances`.
pub const DEFAULT_MAX_INSTANCES: u32 = 64;
/// The most `max_instances` accepts.
pub const MAX_MAX_INSTANCES: u32 = 4096;

/// Between a server's id and an instance's label.
pub const SEPARATOR: char = '@';

/// Hex digits of the identity's digest in a label: 64 bits, so no identity finds another's by
/// trying names.
const IDENTITY_DIGITS: usize = 16;
/// Hex digits of the session's digest, after the identity's (the identity already separates
/// owners; this separates one owner's sessions).
const SESSION_DIGITS: usize = 8;

/// Who gets an upstream process of their own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// One process serves every client (its state, roots and log lines are everyone's).
    #[default]
    Shared,
    /// One instance per caller identity (an API key's name, `oauth:<sub>`).
    PerIdentity,
    /// One instance per client session (a legacy session or an `/sse` session); a call outside
    /// any session (a 2026-07-28 request, REST) is served by its identity's instance.
    PerSession,
}

impl Isolation {
    pub fn as_str(self) -> &'static str {
        crate::wire_name::of(&self)
    }

    pub fn is_shared(&self) -> bool {
        *self == Isolation::Shared
    }

    /// The label of the instance serving `identity` in `session` (`None`: outside any session),
    /// or `None` for a shared server.
    pub fn label(self, identity: &str, session: Option<&str>) -> Option<String> {
        match (self, session) {
            (Isolation::Shared, _) => None,
            (Isolation::PerSession, Some(session)) => Some(format!(
                "{}.{}",
                digest("identity", identity, IDENTITY_DIGITS),
                digest("session", session, SESSION_DIGITS)
            )),
            (Isolation::PerIdentity | Isolation::PerSession, _) => Some(digest("identity", identity, IDENTITY_DIGITS)),
        }
    }
}

/// An instance's name: `<server>@<label>`.
pub fn instance_id(server: &str, label: &str) -> String {
    format!("{server}{SEPARATOR}{label}")
}

/// A name split into its server and, for an instance, its label.
pub fn split(id: &str) -> (&str, Option<&str>) {
    match id.split_once(SEPARATOR) {
        Some((server, label)) => (server, Some(label)),
        None => (id, None),
    }
}

/// Whether `identity` owns the instance labelled `label`.
pub fn owns(identity: &str, label: &str) -> bool {
    label.split('.').next() == Some(digest("identity", identity, IDENTITY_DIGITS).as_str())
}

/// Whether the instance labelled `label` serves `identity` in `session`: its owner's, and for
/// an instance of one session, that session's. Where an instance's notifications go.
pub fn serves(label: &str, identity: &str, session: Option<&str>) -> bool {
    let mut parts = label.split('.');
    let by_identity = parts.next() == Some(digest("identity", identity, IDENTITY_DIGITS).as_str());
    let by_session = match (parts.next(), session) {
        (None, _) => true,
        (Some(part), Some(session)) => part == digest("session", session, SESSION_DIGITS),
        (Some(_), None) => false,
    };
    by_identity && by_session
}

/// Whether `identity` may see what the server or instance named `id` does: any server (its
/// view decides), and of instances only its own.
pub fn sees(identity: &str, id: &str) -> bool {
    split(id).1.is_none_or(|label| owns(identity, label))
}

fn digest(kind: &str, text: &str, digits: usize) -> String {
    let hash = Sha256::new()
        .chain_update(b"hangar instance ")
        .chain_update(kind)
        .chain_update([0])
        .chain_update(text)
        .finalize();
    let hex: String = hash.iter().map(|byte| format!("{byte:02x}")).collect();
    hex[..digits].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_server_has_no_instances_and_the_others_one_per_owner() {
        assert_eq!(Isolation::Shared.label("alice", Some("s1")), None);
        let alice = Isolation::PerIdentity.label("alice", Some("s1")).unwrap();
        assert_eq!(Some(alice.clone()), Isolation::PerIdentity.label("alice", Some("s2")), "sessions share it");
        assert_ne!(Some(alice.clone()), Isolation::PerIdentity.label("bob", None));
        let one = Isolation::PerSession.label("alice", Some("s1")).unwrap();
        let two = Isolation::PerSession.label("alice", Some("s2")).unwrap();
        assert_ne!(one, two);
        assert_eq!(Isolation::PerSession.label("alice", None), Some(alice.clone()), "no session: the identity's");
        for label in [&alice, &one, &two] {
            assert!(owns("alice", label), "{label}");
            assert!(!owns("bob", label), "{label}");
        }
    }

    #[test]
    fn an_instance_name_splits_back_and_only_its_owner_sees_it() {
        let label = Isolation::PerIdentity.label("oauth:alice", None).unwrap();
        let id = instance_id("everything", &label);
        assert_eq!(split(&id), ("everything", Some(label.as_str())));
        assert_eq!(split("everything"), ("everything", None));
        assert!(sees("oauth:alice", &id));
        assert!(!sees("alice", &id), "a key named like the sub is someone else");
        assert!(sees("anyone", "everything"));
    }

    #[test]
    fn an_instance_of_one_session_serves_that_session_alone() {
        let one = Isolation::PerSession.label("alice", Some("s1")).unwrap();
        assert!(serves(&one, "alice", Some("s1")));
        assert!(!serves(&one, "alice", Some("s2")));
        assert!(!serves(&one, "alice", None));
        assert!(!serves(&one, "bob", Some("s1")));
        let hers = Isolation::PerIdentity.label("alice", None).unwrap();
        assert!(serves(&hers, "alice", Some("s9")) && serves(&hers, "alice", None));
        assert!(!serves(&hers, "bob", None));
    }
}
