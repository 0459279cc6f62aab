//! Legacy sessions told to connect an account by URL (-32042), waiting to hear that it is
//! done: by (identity, server), each session and the elicitation it was sent. When that
//! identity connects that server, each of its waiting sessions gets
//! `notifications/elicitation/complete` for its elicitation, and no one else does.

use std::collections::HashMap;
use std::sync::Mutex;

use hangar_core::sync::Unpoisoned;

/// The most waits one (identity, server) keeps; the oldest goes first.
const MAX_WAITS: usize = 16;

/// Sessions waiting for a connection, by (identity, server).
#[derive(Default)]
pub(crate) struct ConnectWaits {
    waiting: Mutex<HashMap<(String, String), Vec<Wait>>>,
}

/// One legacy session's wait: its id and the elicitation it was sent.
pub(crate) struct Wait {
    pub(crate) session: String,
    pub(crate) elicitation_id: String,
}

impl ConnectWaits {
    /// `session` of `identity` waits for `server` to be connected, as `elicitation_id`.
    pub(crate) fn wait(&self, identity: &str, server: &str, wait: Wait) {
        let mut waiting = self.waiting.locked();
        let waits = waiting.entry((identity.to_owned(), server.to_owned())).or_default();
        if waits.len() >= MAX_WAITS {
            waits.remove(0);
        }
        waits.push(wait);
    }

    /// The waits `identity`'s connection to `server` ends.
    pub(crate) fn done(&self, identity: &str, server: &str) -> Vec<Wait> {
        self.waiting.locked().remove(&(identity.to_owned(), server.to_owned())).unwrap_or_default()
    }
}
