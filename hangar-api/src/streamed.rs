//! Answers whose body is written as it comes: MCP's event streams and `/api/events`,
//! `/api/audit?format=jsonl`.

use std::sync::OnceLock;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::HeaderValue;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::Response;
use tokio::sync::mpsc;

/// How long an event stream may stay silent before a keep-alive comment goes out (proxies and
/// clients take a longer silence for a dead connection). Read through [`keep_alive`].
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Shortens [`KEEP_ALIVE`] to this many whole seconds (1 to 15; never lengthens it), and with it
/// every wait derived from it (a deferred head's newline, a forward's `cluster::idle_timeout`,
/// three of them): so a story shows a frozen owner's relayed stream cut without waiting 45 s.
/// For tests, as `HANGAR_TEST_LANDLOCK_ABI_MAX` is; unset in production. The API reads it once,
/// inherited from the supervisor.
pub const TEST_KEEP_ALIVE_ENV: &str = "HANGAR_TEST_KEEP_ALIVE_S";

/// The keep-alive period of event streams: [`KEEP_ALIVE`], unless [`TEST_KEEP_ALIVE_ENV`]
/// shortens it (a value out of its range is ignored).
pub fn keep_alive() -> Duration {
    static PERIOD: OnceLock<Duration> = OnceLock::new();
    *PERIOD.get_or_init(|| shortened(std::env::var(TEST_KEEP_ALIVE_ENV).ok().as_deref()))
}

/// [`KEEP_ALIVE`], shortened by `test`, the value of [`TEST_KEEP_ALIVE_ENV`].
fn shortened(test: Option<&str>) -> Duration {
    let seconds = test.and_then(|s| s.trim().parse::<u64>().ok()).filter(|s| (1..=KEEP_ALIVE.as_secs()).contains(s));
    seconds.map_or(KEEP_ALIVE, Duration::from_secs)
}
/// The keep-alive comment of an event stream.
pub const KEEP_ALIVE_COMMENT: &[u8] = b": keep-alive\n\n";

/// The content type of an event stream.
pub const EVENT_STREAM: &str = "text/event-stream";

/// A 200 whose body is what `chunks` delivers, as it comes; it ends when the sender does. An
/// event stream (each chunk one whole event) gets a keep-alive comment after every
/// [`keep_alive`] of silence, whoever produces it: a hangar forwarding it takes a longer
/// silence for a frozen owner (`cluster::idle_timeout`). When the client goes away the body is
/// dropped, and with it the receiver: the producer sees that and cancels what it was waiting
/// for.
pub fn streamed(chunks: mpsc::Receiver<Bytes>, content_type: &'static str) -> Response {
    let keeps_alive = content_type == EVENT_STREAM;
    let stream = futures_util::stream::unfold(chunks, move |mut chunks| async move {
        let chunk = if keeps_alive {
            tokio::time::timeout(keep_alive(), chunks.recv())
                .await
                .unwrap_or(Some(Bytes::from_static(KEEP_ALIVE_COMMENT)))
        } else {
            chunks.recv().await
        };
        chunk.map(|chunk| (Ok::<_, std::convert::Infallible>(chunk), chunks))
    });
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies such as nginx must pass each chunk on as it comes.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_quiet_event_stream_sends_keep_alive_comments_whoever_produces_it() {
        // A producer that sends one event and then nothing for a long while (a call that runs).
        let (events, chunks) = mpsc::channel(4);
        events.send(Bytes::from_static(b"event: message\ndata: {}\n\n")).await.unwrap();
        let mut body = streamed(chunks, EVENT_STREAM).into_body().into_data_stream();
        assert_eq!(body.next().await.unwrap().unwrap(), "event: message\ndata: {}\n\n");
        for _ in 0..3 {
            let started = tokio::time::Instant::now();
            let next = tokio::time::timeout(2 * KEEP_ALIVE, body.next()).await.expect("a keep-alive, not silence");
            assert_eq!(next.unwrap().unwrap(), KEEP_ALIVE_COMMENT);
            assert_eq!(started.elapsed(), KEEP_ALIVE, "after each quiet stretch (the test's clock)");
        }
        drop(events);
        assert!(body.next().await.is_none(), "the stream ends with its producer");
    }

    #[test]
    fn a_test_may_shorten_the_keep_alive_never_lengthen_it() {
        assert_eq!(shortened(None), KEEP_ALIVE, "unset in production");
        assert_eq!(shortened(Some("1")), Duration::from_secs(1));
        assert_eq!(shortened(Some(" 15 ")), KEEP_ALIVE);
        for ignored in ["0", "16", "3600", "-1", "1.5", "soon", ""] {
            assert_eq!(shortened(Some(ignored)), KEEP_ALIVE, "{ignored}");
        }
    }
}
