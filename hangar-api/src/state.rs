//! What every handler may use: the state the API's handlers share.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use hangar_core::ipc::{ErrorKind, IpcError};
use tokio::sync::broadcast;

use hangar_core::access::Caller;
use hangar_core::trace::TraceContext;
use hangar_runtime::telemetry::Telemetry;
use serde_json::Value;

use crate::auth::Auth;
use crate::error::ApiError;
use crate::guard::Guard;
use crate::supervisor::{AsCaller, Supervisor};

/// Everything a handler may use. Holds no state a second API instance would lack.
///
/// Axum clones the state for every layer and extractor a request passes through; behind one
/// `Arc` that is one count, not one per field (it was 3 % of the API's CPU per proxied call).
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

/// What `AppState` shares.
pub struct Shared {
    pub supervisor: Arc<dyn Supervisor>,
    /// Which hosts and origins are served: a web page cannot drive the hangar (see `guard`).
    pub guard: Guard,
    /// "Some list changed" news from the supervisor, for event streams that asked for it.
    pub changes: broadcast::Sender<ListChanged>,
    /// Who may call: the keys of `--api-keys` and of the config (as the supervisor says).
    pub auth: Auth,
    /// Span export (`--otlp-endpoint`); `None`, the usual case, costs a branch per call.
    pub telemetry: Option<Arc<Telemetry>>,
    /// Whether a stop signal came: `/health/ready` then says not ready (see `drain`).
    pub drain: crate::drain::Drain,
    /// The other hangars of the fleet (`cluster:`), to forward requests for their ids to.
    pub fleet: crate::cluster::Fleet,
}

/// A list an MCP client may follow changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListChanged {
    /// This server's tools.
    Tools(String),
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl From<Shared> for AppState {
    fn from(shared: Shared) -> AppState {
        AppState(Arc::new(shared))
    }
}

impl AppState {
    /// State around `supervisor` with no change news (tests).
    #[cfg(test)]
    pub fn new(supervisor: Arc<dyn Supervisor>) -> AppState {
        AppState::from(Shared {
            supervisor,
            guard: Guard { loopback_only: true, allowed_origins: Arc::from([]) },
            changes: broadcast::channel(16).0,
            auth: Auth::none_learned(),
            telemetry: None,
            drain: crate::drain::Drain::default(),
            fleet: crate::cluster::Fleet::default(),
        })
    }

    /// The same state with `auth` for its callers (tests).
    #[cfg(test)]
    pub fn with_auth(self, auth: Auth) -> AppState {
        let Shared { supervisor, guard, changes, telemetry, drain, fleet, .. } = match Arc::try_unwrap(self.0) {
            Ok(shared) => shared,
            Err(_) => panic!("with_auth on a shared state"),
        };
        AppState::from(Shared { supervisor, guard, changes, auth, telemetry, drain, fleet })
    }

    /// The supervisor as the request's caller (the `Caller` the auth middleware set).
    pub fn as_caller(&self, caller: Caller) -> AsCaller {
        AsCaller::new(self.supervisor.clone(), caller)
    }
}

/// What a handler of an authenticated route uses: the supervisor as the request's caller (the
/// `Caller` the auth middleware set), and the change news. Extracted per request.
#[derive(Clone)]
pub struct Calling {
    pub supervisor: AsCaller,
    pub changes: broadcast::Sender<ListChanged>,
    pub telemetry: Option<Arc<Telemetry>>,
}

impl FromRequestParts<AppState> for Calling {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &AppState) -> Result<Calling, ApiError> {
        // Every route but the health probes is behind the auth middleware, which sets it.
        let caller = parts.extensions.get::<Caller>().cloned().ok_or_else(|| {
            ApiError::from(IpcError::new(ErrorKind::Internal, "this route was reached without authentication"))
        })?;
        // An OAuth caller's token, for the servers that exchange it; a key caller has none.
        let token = parts.extensions.get::<crate::auth::InboundToken>().map(|token| token.0.clone());
        Ok(Calling {
            supervisor: app.as_caller(caller).with_subject_token(token),
            changes: app.changes.clone(),
            telemetry: app.telemetry.clone(),
        })
    }
}

impl Calling {
    /// As the anonymous caller (tests).
    #[cfg(test)]
    pub fn anonymous(app: &AppState) -> Calling {
        Calling { supervisor: app.as_caller(Caller::anonymous()), changes: app.changes.clone(), telemetry: None }
    }

    /// The same caller, its calls placed in `trace` (see `supervisor::AsCaller::traced`).
    pub fn traced(&self, trace: TraceContext) -> Calling {
        Calling { supervisor: self.supervisor.traced(trace), ..self.clone() }
    }

    /// The same caller, its tool calls cancellable by its client (see
    /// `supervisor::AsCaller::cancellable_by`).
    pub fn cancellable_by(&self, session: &str, request_id: Value) -> Calling {
        Calling { supervisor: self.supervisor.cancellable_by(session, request_id), ..self.clone() }
    }
}
