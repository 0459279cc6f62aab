//! What a config reload did: the answer to the socket's reload request and the journal's
//! record of it, kept apart from both so that neither depends on the other.

use serde::{Deserialize, Serialize};

/// What a reload did, by server id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reloaded {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Replaced by their new config (and started again if they were running).
    pub changed: Vec<String>,
    /// Kept running as they were.
    pub unchanged: Vec<String>,
}
