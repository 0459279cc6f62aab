//! The REST error envelope: `{"error": {"code", "message", "details"}}`, for every failure the
//! REST side answers, including the ones axum would otherwise answer in plain text.

use axum::Json;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use hangar_core::echo::bounded;
use hangar_core::ipc::{ErrorKind, IpcError};
use serde_json::{Value, json};

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into(), details: None }
    }

    pub fn invalid_argument(message: impl Into<String>) -> Self {
        ApiError::from(IpcError::new(ErrorKind::InvalidArgument, message))
    }

    pub fn payload_too_large(limit: usize) -> Self {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "PayloadTooLarge",
            format!("the request body is larger than {limit} bytes"),
        )
    }

    pub fn body(&self) -> Value {
        json!({"error": {"code": self.code, "message": self.message, "details": self.details}})
    }
}

impl From<IpcError> for ApiError {
    fn from(err: IpcError) -> Self {
        let status = StatusCode::from_u16(err.kind.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        ApiError { status, code: err.kind.rest_code(), message: err.message, details: err.details }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let retry_after = self.retry_after_s();
        let mut response = (self.status, Json(self.body())).into_response();
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

impl ApiError {
    /// Whole seconds (rounded up) for `Retry-After`, when the refusal says when to come back.
    fn retry_after_s(&self) -> Option<u64> {
        let ms = self.details.as_ref()?.get("retry_after_ms")?.as_u64()?;
        Some(ms.div_ceil(1000).max(1))
    }
}

/// Router fallback: no route matches the path.
pub async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("no route for {} {}", bounded(method.as_str()), bounded(uri.path())),
    )
}

/// The path exists but not with this method; axum adds the `Allow` header.
pub async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        format!("{} does not accept {}", bounded(uri.path()), bounded(method.as_str())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipc_errors_keep_their_kind_code_and_status() {
        let err = ApiError::from(IpcError::not_found("math"));
        assert_eq!(err.status, StatusCode::NOT_FOUND);
        assert_eq!(
            err.body(),
            json!({"error": {"code": "McpServerNotFound", "message": "no MCP server with id `math` is configured", "details": null}})
        );
        let err = ApiError::from(IpcError::new(ErrorKind::RetryLater, "wait").with_details(json!({"after": 3})));
        assert_eq!((err.status, err.code), (StatusCode::CONFLICT, "RetryLater"));
        assert_eq!(err.body()["error"]["details"], json!({"after": 3}));
    }

    #[test]
    fn a_rate_limit_refusal_is_429_with_retry_after_rounded_up() {
        let refusal = IpcError::new(ErrorKind::RateLimited, "slow down").with_details(json!({"retry_after_ms": 1200}));
        let response = ApiError::from(refusal).into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "2");
        let busy = ApiError::from(IpcError::new(ErrorKind::ConcurrencyLimited, "busy")).into_response();
        assert_eq!(busy.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(busy.headers().get(header::RETRY_AFTER).is_none());
    }
}
