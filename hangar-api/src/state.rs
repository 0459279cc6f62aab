//! What every handler may use: the state the API's handlers share.

use std::sync::Arc;

use tokio::sync::broadcast;

use crate::auth::ApiKeys;
use crate::guard::Guard;
use crate::supervisor::Supervisor;

/// Everything a handler may use. Holds no state a second API instance would lack.
#[derive(Clone)]
pub struct AppState {
    pub supervisor: Arc<dyn Supervisor>,
    /// Which hosts and origins are served: a web page cannot drive the hangar (see `guard`).
    pub guard: Guard,
    /// "Some list changed" news from the supervisor, for event streams that asked for it.
    pub changes: broadcast::Sender<ListChanged>,
    /// Empty: no key needed (allowed on loopback only, unless `--unsafe-no-auth`).
    pub keys: ApiKeys,
    /// `auth.oauth`, as the supervisor's config says (asked on first use).
    pub oauth: crate::oauth::Settings,
}

/// A list an MCP client may follow changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListChanged {
    Tools,
}

impl AppState {
    /// State around `supervisor` with no change news (tests).
    #[cfg(test)]
    pub fn new(supervisor: Arc<dyn Supervisor>) -> AppState {
        AppState {
            supervisor: supervisor.clone(),
            guard: Guard { loopback_only: true, allowed_origins: Arc::from([]) },
            changes: broadcast::channel(16).0,
            keys: Default::default(),
            oauth: crate::oauth::Settings::new(supervisor.clone(), "http://127.0.0.1:8000/mcp".into()),
        }
    }
}
