//! The HTTP application: the router that joins REST, MCP, `/metrics`, the status page and the
//! fallbacks, behind the body limit, the key check and the cross-site guard.

use std::time::Instant;

use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use hangar_core::echo::bounded;

use crate::state::AppState;
use crate::{body, error, journal, mcp, metrics, oauth, page, rest};

pub fn router(state: AppState) -> Router {
    let auth = state.auth.clone();
    let guard = state.guard.clone();
    let drain = state.drain.clone();
    let fleet = state.fleet.clone();
    Router::new()
        .merge(rest::routes())
        .merge(journal::routes())
        .merge(crate::credentials::routes())
        .merge(crate::approvals::routes())
        .merge(crate::connect::routes())
        .merge(metrics::routes())
        .merge(mcp::routes())
        .merge(oauth::routes())
        .merge(page::routes())
        .fallback(error::not_found)
        // Must follow the routes: it applies to those registered so far.
        .method_not_allowed_fallback(error::method_not_allowed)
        // Inside the body limit (it reads the body for a task id) and the key check (nobody
        // unauthenticated makes this hangar call another).
        .layer(middleware::from_fn_with_state(fleet, crate::cluster::route))
        // Every body read whole, at most BODY_LIMIT, before any handler or extractor sees it.
        .layer(middleware::from_fn(body::bounded_body))
        .layer(middleware::from_fn_with_state(auth, crate::auth::authenticate))
        // Outside the key check: a valid key exempts nothing from it.
        .layer(middleware::from_fn_with_state(guard, crate::guard::refuse_cross_site))
        // Outermost but the log: a draining instance refuses before any other work.
        .layer(middleware::from_fn_with_state(drain, crate::drain::admit))
        .layer(middleware::from_fn(log_request))
        // Outermost: a forwarded request's answer head goes back at once, however long the
        // answer and every layer's work take (`cluster/deferred.rs`).
        .layer(middleware::from_fn(crate::cluster::defer))
        .with_state(state)
}

/// Logs each request; the method and path a client chose are quoted bounded, like every echo
/// of client input (a path may be hundreds of kilobytes).
async fn log_request(request: Request, next: Next) -> Response {
    let method = bounded(request.method().as_str()).into_owned();
    let path = bounded(request.uri().path()).into_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    tracing::debug!(%method, %path, status = response.status().as_u16(), elapsed_ms = started.elapsed().as_millis() as u64, "request");
    response
}
