//! REST under `/api`, and the health probes under `/health`.

use std::collections::HashMap;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use hangar_core::echo::bounded;
use hangar_core::ipc::MAX_LOG_LINES;
use serde_json::json;

use crate::error::ApiError;
use crate::shapes::{LogList, ServerList, ToolList};
use crate::state::{AppState, Calling};
use crate::supervisor::Readiness;

const DEFAULT_LOG_LINES: usize = 100;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/mcp_servers", get(list))
        .route("/api/mcp_servers/", get(list))
        .route("/api/mcp_servers/{id}", get(details))
        .route("/api/mcp_servers/{id}/start", post(start))
        .route("/api/mcp_servers/{id}/stop", post(stop))
        .route("/api/mcp_servers/{id}/tools", get(tools))
        .route("/api/mcp_servers/{id}/prompts", get(prompts))
        .route("/api/mcp_servers/{id}/resources", get(resources))
        .route("/api/mcp_servers/{id}/logs", get(logs))
        .route("/api/config/reload", post(reload))
        .route("/api/whoami", get(whoami))
        .route("/api/calls", get(in_flight))
        .route("/api/calls/stats", get(call_stats))
        .route("/api/clients", get(clients))
        .route(crate::public::HEALTH_LIVE, get(live))
        .route(crate::public::HEALTH_READY, get(ready))
}

type ApiResult = Result<Response, ApiError>;

/// The `{id}` segment; a rejection (bad percent-encoding) becomes an envelope, not plain text.
fn server_id(path: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    path.map(|Path(id)| id).map_err(|rejection| ApiError::invalid_argument(bounded(&rejection.body_text())))
}

async fn list(app: Calling) -> ApiResult {
    let mcp_servers = app.supervisor.list().await?;
    Ok(Json(ServerList { mcp_servers }).into_response())
}

async fn details(app: Calling, path: Result<Path<String>, PathRejection>) -> ApiResult {
    let id = server_id(path)?;
    Ok(Json(app.supervisor.get(&id).await?).into_response())
}

async fn start(app: Calling, path: Result<Path<String>, PathRejection>) -> ApiResult {
    let id = server_id(path)?;
    Ok(Json(app.supervisor.start(&id).await?).into_response())
}

/// Re-reads the supervisor's config file, as SIGHUP does; a bad one is refused (400).
async fn reload(app: Calling) -> ApiResult {
    Ok(Json(app.supervisor.reload().await?).into_response())
}

async fn stop(app: Calling, path: Result<Path<String>, PathRejection>) -> ApiResult {
    let id = server_id(path)?;
    Ok(Json(app.supervisor.stop(&id).await?).into_response())
}

/// Who the request's credential names, and whether the supervisor lets it act (the status page
/// shows start and stop only then) and decide approvals (the approve and deny buttons). The MCP tools it lists are `/mcp`'s business, not shown here.
async fn whoami(app: Calling) -> ApiResult {
    let me = app.supervisor.whoami().await?;
    let me = json!({"identity": me.identity, "profile": me.profile, "admin": me.admin, "approver": me.approver});
    Ok(Json(me).into_response())
}

/// The tool calls running upstream now (the caller's own; an admin's: all), the longest
/// running first.
async fn in_flight(app: Calling) -> ApiResult {
    let calls = app.supervisor.in_flight().await?;
    Ok(Json(json!({"count": calls.len(), "calls": calls})).into_response())
}

/// Calls, errors, p50 and p95 of the last hour per server the caller sees, and per tool.
async fn call_stats(app: Calling) -> ApiResult {
    Ok(Json(app.supervisor.call_stats().await?).into_response())
}

/// Who is connected: open sessions and identities with their traffic (the caller's own; an
/// admin's: all).
async fn clients(app: Calling) -> ApiResult {
    Ok(Json(app.supervisor.clients().await?).into_response())
}

/// The server's prompts, as it lists them (the first page), for its details on the page.
async fn prompts(app: Calling, path: Result<Path<String>, PathRejection>) -> ApiResult {
    listed(app, path, "prompts/list", "prompts").await
}

/// The server's resources, as it lists them (the first page).
async fn resources(app: Calling, path: Result<Path<String>, PathRejection>) -> ApiResult {
    listed(app, path, "resources/list", "resources").await
}

/// `{key: [...]}` from the server's answer to `method`, asked as the front door asks it (a
/// server that declares no such capability answers an empty list).
async fn listed(app: Calling, path: Result<Path<String>, PathRejection>, method: &str, key: &str) -> ApiResult {
    let id = server_id(path)?;
    let answer = app.supervisor.forward(&id, method, json!({})).await?;
    let items = answer.get(key).filter(|items| items.is_array()).cloned().unwrap_or_else(|| json!([]));
    Ok(Json(json!({ key: items })).into_response())
}

async fn tools(app: Calling, path: Result<Path<String>, PathRejection>) -> ApiResult {
    let id = server_id(path)?;
    let tools = app.supervisor.tools(&id).await?;
    let server = app.supervisor.get(&id).await?;
    Ok(Json(ToolList::of(tools, &server)).into_response())
}

async fn logs(
    app: Calling,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> ApiResult {
    let id = server_id(path)?;
    let Query(query) = query.map_err(|rejection| ApiError::invalid_argument(bounded(&rejection.body_text())))?;
    let lines = parse_lines(query.get("lines").map(String::as_str))?;
    let logs = app.supervisor.logs(&id, lines).await?;
    Ok(Json(LogList { count: logs.len(), logs, mcp_server_id: id }).into_response())
}

/// `lines` defaults to 100 and must be an integer in 1..=1000.
pub fn parse_lines(raw: Option<&str>) -> Result<usize, ApiError> {
    let Some(raw) = raw else {
        return Ok(DEFAULT_LOG_LINES);
    };
    raw.trim().parse::<usize>().ok().filter(|n| (1..=MAX_LOG_LINES).contains(n)).ok_or_else(|| {
        ApiError::invalid_argument(format!(
            "`lines` must be an integer from 1 to {MAX_LOG_LINES}, not `{}`",
            bounded(raw)
        ))
    })
}

async fn live() -> Response {
    Json(json!({"status": "alive"})).into_response()
}

/// Ready while the supervisor answers: connected, heard from recently (a stopped or stuck
/// supervisor keeps its socket open but answers nothing), and it told us its auth settings.
async fn ready(State(app): State<AppState>) -> Response {
    let reason = match app.supervisor.readiness() {
        // Stopping: the load balancer should send nothing new here (see `drain`).
        _ if app.drain.draining() => "draining: shutting down".to_owned(),
        // Until the supervisor has said who may call, a request with a config key would be refused.
        Readiness::Answering if !app.auth.learned() => "waiting for the supervisor's auth settings".to_owned(),
        Readiness::Answering => return Json(json!({"status": "ready"})).into_response(),
        Readiness::Unreachable => "supervisor unreachable".to_owned(),
        Readiness::Silent(silent) => format!("supervisor has not answered for {} s", silent.as_secs()),
    };
    (StatusCode::SERVICE_UNAVAILABLE, Json(json!({"status": "not_ready", "reason": reason}))).into_response()
}

#[cfg(test)]
#[path = "rest_tests.rs"]
mod tests;
