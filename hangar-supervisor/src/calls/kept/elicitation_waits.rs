//! Legacy sessions told to open a URL (JSON-RPC -32042, URL elicitation required), waiting to
//! hear that it is done (`notifications/elicitation/complete`), and only they:
//! - told by the hangar to connect an account: by (identity, server); when that identity
//!   connects that server, each of its waiting sessions hears of its own elicitation;
//! - told by an upstream: by (server, elicitation id); when that server says the elicitation is
//!   complete, the one session its call came from hears it. Another server naming the same id,
//!   or the same server an id it never sent, reaches no one.

use std::collections::HashMap;
use std::sync::Mutex;

use hangar_core::sync::Unpoisoned;

/// The most waits one (identity, server) keeps; the oldest goes first.
const MAX_WAITS: usize = 16;
/// The most upstream elicitations waited on at once; past it, the book starts afresh.
const MAX_UPSTREAM_WAITS: usize = 10_000;

/// Sessions waiting for an elicitation to be complete.
#[derive(Default)]
pub(crate) struct ElicitationWaits {
    connects: Mutex<HashMap<(String, String), Vec<Wait>>>,
    upstreams: Mutex<HashMap<(String, String), Waiter>>,
}

/// One legacy session's wait: its id and the elicitation it was sent.
pub(crate) struct Wait {
    pub(crate) session: String,
    pub(crate) elicitation_id: String,
}

/// The session an upstream's elicitation was passed to, and whose it is.
pub(crate) struct Waiter {
    pub(crate) identity: String,
    pub(crate) session: String,
}

impl ElicitationWaits {
    /// `session` of `identity` waits for `server` to be connected, as `elicitation_id`.
    pub(crate) fn wait_for_connect(&self, identity: &str, server: &str, wait: Wait) {
        let mut waiting = self.connects.locked();
        let waits = waiting.entry((identity.to_owned(), server.to_owned())).or_default();
        if waits.len() >= MAX_WAITS {
            waits.remove(0);
        }
        waits.push(wait);
    }

    /// The waits `identity`'s connection to `server` ends.
    pub(crate) fn connected(&self, identity: &str, server: &str) -> Vec<Wait> {
        self.connects.locked().remove(&(identity.to_owned(), server.to_owned())).unwrap_or_default()
    }

    /// `waiter` was passed `server`'s elicitation `elicitation_id`.
    pub(crate) fn wait_for_upstream(&self, server: &str, elicitation_id: &str, waiter: Waiter) {
        let mut waiting = self.upstreams.locked();
        if waiting.len() >= MAX_UPSTREAM_WAITS {
            waiting.clear();
        }
        waiting.insert((server.to_owned(), elicitation_id.to_owned()), waiter);
    }

    /// The session `server`'s elicitation `elicitation_id` was passed to, if any (once).
    pub(crate) fn upstream_complete(&self, server: &str, elicitation_id: &str) -> Option<Waiter> {
        self.upstreams.locked().remove(&(server.to_owned(), elicitation_id.to_owned()))
    }
}
