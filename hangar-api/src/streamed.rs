//! Answers whose body is written as it comes: MCP's event streams and `/api/events`,
//! `/api/audit?format=jsonl`.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::HeaderValue;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::Response;
use tokio::sync::mpsc;

/// How long an event stream may stay silent before a keep-alive comment goes out (proxies and
/// clients take a longer silence for a dead connection).
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The keep-alive comment of an event stream.
pub const KEEP_ALIVE_COMMENT: &[u8] = b": keep-alive\n\n";

/// A 200 whose body is what `chunks` delivers, as it comes; it ends when the sender does. When
/// the client goes away the body is dropped, and with it the receiver: the producer sees that
/// and cancels what it was waiting for.
pub fn streamed(chunks: mpsc::Receiver<Bytes>, content_type: &'static str) -> Response {
    let stream = futures_util::stream::unfold(chunks, |mut chunks| async move {
        chunks.recv().await.map(|chunk| (Ok::<_, std::convert::Infallible>(chunk), chunks))
    });
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies such as nginx must pass each chunk on as it comes.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}
