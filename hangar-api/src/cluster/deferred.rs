//! A forwarded request's answer head, sent at once however long the answer takes, so the
//! forwarding hangar can tell a slow answer from a frozen owner.
//!
//! A forward says it reads deferred heads ([`ACCEPTS`]). The owner ([`defer`], the outermost
//! layer) answers it as usual when the answer's head is ready within [`DEFER_AFTER`]; otherwise
//! at once with a `200` marked [`DEFERRED`] whose body is a newline every [`keep_alive`] while
//! the answer is pending, then the answer's head as one JSON line (`{"status", "headers"}`), then
//! the answer's body. The status and content type of an answer are not known before its end (a
//! legacy call's plain JSON answer turns into an event stream when the upstream sends a
//! notification or asks a question; a 2026-07-28 error picks its status), so nothing of the
//! answer itself can be sent early. The forwarder ([`unwrap`]) rebuilds the answer from it: its
//! client sees the owner's head when the owner has one, as without a hop.

use std::pin::Pin;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use crate::streamed::keep_alive;

/// The request header of a forward: it reads deferred heads (a hangar that does not send it, an
/// older one, gets its answers as they are).
pub const ACCEPTS: &str = "hangar-accepts-deferred-head";
/// The response header of a deferred head.
pub const DEFERRED: &str = "hangar-deferred-head";
/// How long an answer may take before its head is deferred: well within the forwarder's
/// `cluster::HEAD_TIMEOUT`.
pub const DEFER_AFTER: Duration = Duration::from_secs(1);
/// The longest deferred head read (its headers are the hangar's own few).
const MAX_HEAD: usize = 64 * 1024;

type Answer = Pin<Box<dyn Future<Output = Response> + Send>>;

/// The owner's side: a forwarded request whose answer is not ready within [`DEFER_AFTER`] is
/// answered with a deferred head.
pub async fn defer(request: Request, next: Next) -> Response {
    if !request.headers().contains_key(ACCEPTS) {
        return next.run(request).await;
    }
    let mut answer: Answer = Box::pin(next.run(request));
    if let Ok(response) = tokio::time::timeout(DEFER_AFTER, &mut answer).await {
        return response;
    }
    enum Part {
        Pending(Answer),
        Body(axum::body::BodyDataStream),
    }
    // Dropped with the forwarder's connection: the answer's future goes too, which cancels it.
    let parts = futures_util::stream::unfold(Some(Part::Pending(answer)), |part| async move {
        match part? {
            Part::Pending(mut answer) => match tokio::time::timeout(keep_alive(), &mut answer).await {
                Err(_) => Some((Ok(Bytes::from_static(b"\n")), Some(Part::Pending(answer)))),
                Ok(response) => {
                    let (head, body) = response.into_parts();
                    Some((Ok(Head::of(head.status, &head.headers).line()), Some(Part::Body(body.into_data_stream()))))
                }
            },
            Part::Body(mut body) => match body.next().await {
                Some(Ok(chunk)) => Some((Ok(chunk), Some(Part::Body(body)))),
                Some(Err(err)) => Some((Err(err), None)),
                None => None,
            },
        }
    });
    let mut response = Response::new(Body::from_stream(parts));
    let headers = response.headers_mut();
    headers.insert(DEFERRED, HeaderValue::from_static("1"));
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// An answer's head as the deferred body carries it.
#[derive(Serialize, Deserialize)]
struct Head {
    status: u16,
    /// Name and value; a value that is not text is left out (the hangar writes none).
    headers: Vec<(String, String)>,
}

impl Head {
    fn of(status: StatusCode, headers: &HeaderMap) -> Head {
        let headers = headers
            .iter()
            .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
            .collect();
        Head { status: status.as_u16(), headers }
    }

    fn line(&self) -> Bytes {
        // Cannot fail: a number and strings.
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        line.push(b'\n');
        Bytes::from(line)
    }

    fn parts(self) -> Option<(StatusCode, HeaderMap)> {
        let status = StatusCode::from_u16(self.status).ok()?;
        let mut headers = HeaderMap::new();
        for (name, value) in self.headers {
            headers.append(HeaderName::from_bytes(name.as_bytes()).ok()?, HeaderValue::from_str(&value).ok()?);
        }
        Some((status, headers))
    }
}

/// Why an owner's answer ended before it was whole.
#[derive(Debug)]
pub enum Cut {
    /// Nothing came for the time given: the owner is frozen, or its host gone.
    Silent,
    /// The connection failed.
    Failed(reqwest::Error),
    /// It ended, or sent what is not a deferred head.
    Garbled,
}

impl std::fmt::Display for Cut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cut::Silent => f.write_str("the owner went silent"),
            Cut::Failed(err) => write!(f, "{err}"),
            Cut::Garbled => f.write_str("the owner's deferred head was cut or garbled"),
        }
    }
}

/// The next chunk of `answer`, if one comes within `idle`; `Ok(None)` at its end.
pub async fn chunk(answer: &mut reqwest::Response, idle: Duration) -> Result<Option<Bytes>, Cut> {
    match tokio::time::timeout(idle, answer.chunk()).await {
        Ok(chunk) => chunk.map_err(Cut::Failed),
        Err(_) => Err(Cut::Silent),
    }
}

/// The forwarder's side: the owner's answer head, read from a deferred one (each chunk within
/// `idle`), and the start of its body; a head that is not deferred as it is.
pub async fn unwrap(
    mut answer: reqwest::Response,
    idle: Duration,
) -> Result<(StatusCode, HeaderMap, Bytes, reqwest::Response), Cut> {
    if !answer.headers().contains_key(DEFERRED) {
        return Ok((answer.status(), answer.headers().clone(), Bytes::new(), answer));
    }
    let mut read = Vec::new();
    loop {
        let Some(chunk) = chunk(&mut answer, idle).await? else { return Err(Cut::Garbled) };
        read.extend_from_slice(&chunk);
        let start = read.iter().position(|b| *b != b'\n').unwrap_or(read.len());
        if let Some(end) = read[start..].iter().position(|b| *b == b'\n').map(|at| start + at) {
            let head: Head = serde_json::from_slice(&read[start..end]).map_err(|_| Cut::Garbled)?;
            let (status, headers) = head.parts().ok_or(Cut::Garbled)?;
            return Ok((status, headers, Bytes::copy_from_slice(&read[end + 1..]), answer));
        }
        if read.len() - start > MAX_HEAD {
            return Err(Cut::Garbled);
        }
    }
}
