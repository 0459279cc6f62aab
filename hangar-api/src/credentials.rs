//! `GET /api/credentials` and `DELETE /api/credentials/{server}`: the caller's own upstream
//! connections (the tokens the hangar stores for it), listed without a token, and forgotten.
//! The supervisor answers by the caller's identity only: no caller sees or forgets another's.

use axum::Json;
use axum::Router;
use axum::extract::Path;
use axum::extract::rejection::PathRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hangar_core::echo::bounded;
use serde_json::json;

use crate::error::ApiError;
use crate::state::{AppState, Calling};

pub fn routes() -> Router<AppState> {
    Router::new().route("/api/credentials", get(list)).route("/api/credentials/{server}", axum::routing::delete(forget))
}

async fn list(app: Calling) -> Result<Response, ApiError> {
    let credentials = app.supervisor.credentials().await?;
    Ok(Json(json!({ "credentials": credentials })).into_response())
}

/// 204 once forgotten; 404 when the caller holds none for that server.
async fn forget(app: Calling, path: Result<Path<String>, PathRejection>) -> Result<Response, ApiError> {
    let Path(server) = path.map_err(|rejection| ApiError::invalid_argument(bounded(&rejection.body_text())))?;
    app.supervisor.forget_credentials(&server).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
