//! Request bodies: read whole, up to [`BODY_LIMIT`], before any handler runs, so every route
//! refuses an oversized body (413) whether it declares its length or is chunked, including
//! routes that never read their body.
//!
//! A refused body is read and discarded before the 413 is sent (a lingering close, bounded by
//! [`DRAIN_LIMIT`] and [`DRAIN_TIME`]), and the answer says `Connection: close`. Answering and
//! closing while the client is still sending would reset the connection, and a client that
//! sends its whole body before reading (Python's `http.client`) would see the reset, not the 413.
//! Past the bounds, or when the client waits for `100 Continue`, nothing more is read.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::header::{CONNECTION, CONTENT_LENGTH, EXPECT};
use axum::http::{HeaderMap, HeaderValue, request::Parts};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;
use tokio::time::Instant;

use crate::error::ApiError;
use crate::mcp::refusal;

/// The largest request body any route accepts.
pub const BODY_LIMIT: usize = 1 << 20;

/// The most a refused body is read for, in bytes: a client sending more gets its 413 and a reset.
const DRAIN_LIMIT: u64 = 32 << 20;
/// The longest a refused body is read for.
const DRAIN_TIME: Duration = Duration::from_secs(5);

/// Hands the handler the body read whole, or answers 413 (or 400 for a body that cannot be read).
pub async fn bounded_body(request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    if declared_length(&parts.headers).is_some_and(|len| len > BODY_LIMIT as u64) {
        linger(&parts.headers, body).await;
        return too_large(&parts);
    }
    match read_bounded(body).await {
        Ok(bytes) => next.run(Request::from_parts(parts, Body::from(bytes))).await,
        Err(Unread::TooLarge { rest, read }) => {
            drain(rest, DRAIN_LIMIT.saturating_sub(read as u64)).await;
            too_large(&parts)
        }
        Err(Unread::Broken(err)) => unreadable(&parts, &err),
    }
}

enum Unread {
    /// Over the limit after `read` bytes; `rest` is the body still unread.
    TooLarge {
        rest: Body,
        read: usize,
    },
    Broken(axum::Error),
}

/// The whole body, if it fits in [`BODY_LIMIT`].
async fn read_bounded(mut body: Body) -> Result<Bytes, Unread> {
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut read = 0;
    while let Some(frame) = body.frame().await {
        let Ok(chunk) = frame.map_err(Unread::Broken)?.into_data() else {
            continue; // trailers
        };
        read += chunk.len();
        if read > BODY_LIMIT {
            return Err(Unread::TooLarge { rest: body, read });
        }
        chunks.push(chunk);
    }
    Ok(match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.swap_remove(0),
        _ => Bytes::from(chunks.concat()),
    })
}

/// Answers `response` to a request refused before its body was read (a guard or key refusal):
/// the body is read and discarded first, as for a 413, and the connection closed after it, so
/// a client still sending sees the answer and not a reset.
pub async fn refuse_unread(request: Request, mut response: Response) -> Response {
    let (parts, body) = request.into_parts();
    linger(&parts.headers, body).await;
    response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

/// The lingering close of a body that will not be used: read and dropped within the bounds,
/// unless it declares more than [`DRAIN_LIMIT`] or its client waits for `100 Continue` (it has
/// sent nothing yet and never will).
async fn linger(headers: &HeaderMap, body: Body) {
    if declared_length(headers).is_some_and(|len| len > DRAIN_LIMIT) || expects_continue(headers) {
        return;
    }
    drain(body, DRAIN_LIMIT).await;
}

/// Reads and drops up to `budget` more bytes of `body`, for at most [`DRAIN_TIME`].
async fn drain(mut body: Body, budget: u64) {
    let deadline = Instant::now() + DRAIN_TIME;
    let mut left = budget;
    while let Ok(Some(Ok(frame))) = tokio::time::timeout_at(deadline, body.frame()).await {
        let len = frame.data_ref().map_or(0, |data| data.len() as u64);
        match left.checked_sub(len) {
            Some(rest) => left = rest,
            None => return,
        }
    }
}

fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
}

fn expects_continue(headers: &HeaderMap) -> bool {
    headers.get(EXPECT).and_then(|v| v.to_str().ok()).is_some_and(|v| v.trim().eq_ignore_ascii_case("100-continue"))
}

/// 413 in the shape of the route (JSON-RPC on `/mcp`, the envelope elsewhere), and the
/// connection closed after it: what is left of the body is not read.
fn too_large(parts: &Parts) -> Response {
    let mut response = if refusal::is_mcp_path(parts.uri.path()) {
        refusal::payload_too_large(BODY_LIMIT)
    } else {
        ApiError::payload_too_large(BODY_LIMIT).into_response()
    };
    response.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

fn unreadable(parts: &Parts, err: &axum::Error) -> Response {
    let detail = format!("cannot read the request body: {err}");
    if refusal::is_mcp_path(parts.uri.path()) {
        refusal::unreadable_body(&detail)
    } else {
        ApiError::invalid_argument(detail).into_response()
    }
}
