//! `GET /api/approvals` and `POST /api/approvals/{id}/approve|deny`: the calls waiting for a
//! person's approval, and the decisions on them. The supervisor owns the pending set, so a
//! decision through any API instance releases the call wherever it waits, and it judges who may
//! decide (an admin or an approver, never on their own call unless `approvals.self_approve`).

use axum::Json;
use axum::Router;
use axum::extract::Path;
use axum::extract::rejection::PathRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hangar_core::echo::bounded;
use hangar_core::ipc::ErrorKind;
use serde_json::json;

use crate::error::ApiError;
use crate::state::{AppState, Calling};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/approvals", get(list))
        .route("/api/approvals/{id}/approve", post(approve))
        .route("/api/approvals/{id}/deny", post(deny))
}

async fn list(app: Calling) -> Result<Response, ApiError> {
    let approvals = app.supervisor.approvals().await?;
    Ok(Json(json!({ "approvals": approvals })).into_response())
}

async fn approve(app: Calling, path: Result<Path<String>, PathRejection>) -> Result<Response, ApiError> {
    decide(app, path, true).await
}

async fn deny(app: Calling, path: Result<Path<String>, PathRejection>) -> Result<Response, ApiError> {
    decide(app, path, false).await
}

/// 200 with the approval as decided; 403 for a caller who may not decide it, 404 for none
/// pending by that id, 400 for one decided already.
async fn decide(app: Calling, path: Result<Path<String>, PathRejection>, approve: bool) -> Result<Response, ApiError> {
    let Path(id) = path.map_err(|rejection| ApiError::invalid_argument(bounded(&rejection.body_text())))?;
    let decided = app.supervisor.decide(&id, approve).await.map_err(|err| match err.kind {
        // Not a server that is missing: the envelope says what is.
        ErrorKind::NotFound => ApiError::new(StatusCode::NOT_FOUND, "ApprovalNotFound", err.message),
        _ => ApiError::from(err),
    })?;
    Ok(Json(decided).into_response())
}
