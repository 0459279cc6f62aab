//! The OAuth tokens callers came with, as the API validated them, by identity: the subject
//! tokens a `token_exchange` server's calls exchange (RFC 8693). Only the latest of each
//! identity is kept, in memory only, and only that identity's calls read it. The API sends one
//! with each call of a caller that came with one ([`hangar_core::ipc::CallSpec::subject_token`]),
//! so a task's later run uses the token its caller called with last.

use std::collections::HashMap;
use std::sync::Mutex;

use hangar_core::credential::Secret;
use hangar_core::sync::Unpoisoned;

/// The most identities whose subject token is kept; past it, the whole store is dropped (a
/// caller's next call brings its token again).
const MAX_IDENTITIES: usize = 10_000;

/// The latest subject token of each identity.
#[derive(Default)]
pub struct Subjects {
    latest: Mutex<HashMap<String, Secret>>,
}

impl Subjects {
    /// `identity` called with `token`.
    pub fn offer(&self, identity: &str, token: Secret) {
        let mut latest = self.latest.locked();
        if latest.len() >= MAX_IDENTITIES && !latest.contains_key(identity) {
            latest.clear();
        }
        latest.insert(identity.to_owned(), token);
    }

    /// The token `identity` called with last, if any.
    #[allow(dead_code)] // skeleton, being built
    pub fn of(&self, identity: &str) -> Option<Secret> {
        self.latest.locked().get(identity).cloned()
    }
}
