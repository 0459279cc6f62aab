//! Reading the journal over HTTP: `GET /api/audit` (a page, or every entry as JSON Lines),
//! `GET /api/audit/rates` (calls per minute) and `GET /api/events` (Server-Sent Events).
//!
//! The supervisor decides what the caller sees; this only parses parameters (a bad one is a 400
//! envelope) and shapes the answers. A stream ends when its client goes: the body is dropped,
//! the feeding task sees it, and its supervisor request is cancelled.

use std::collections::HashMap;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::sync::Arc;

use hangar_core::audit_page::RestAuditPage;
use hangar_core::cluster::{Owner, split_tag};
use hangar_core::echo::bounded;
use hangar_core::journal::{AuditQuery, MAX_PAGE};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::cluster::Member;
use crate::error::ApiError;
use crate::state::{AppState, Calling};
use crate::streamed::{EVENT_STREAM, streamed};
use crate::supervisor::AsCaller;

/// The chart's default span.
const DEFAULT_MINUTES: u32 = 60;
/// Lines or events buffered for a slow client before the feeder waits for it.
const STREAM_BUFFER: usize = 64;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/audit", get(audit))
        .route("/api/audit/rates", get(rates))
        .route("/api/events", get(events))
}

type Params = Result<Query<HashMap<String, String>>, QueryRejection>;

/// The query's parameters, refusing any not in `known`.
fn params(query: Params, known: &[&str]) -> Result<HashMap<String, String>, ApiError> {
    let Query(params) = query.map_err(|rejection| ApiError::invalid_argument(bounded(&rejection.body_text())))?;
    if let Some(unknown) = params.keys().find(|key| !known.contains(&key.as_str())) {
        return Err(ApiError::invalid_argument(format!(
            "unknown parameter {}; known: {}",
            bounded(unknown),
            known.join(", ")
        )));
    }
    Ok(params)
}

fn number<T: std::str::FromStr>(
    params: &HashMap<String, String>,
    key: &str,
    what: &str,
) -> Result<Option<T>, ApiError> {
    params
        .get(key)
        .map(|value| {
            value
                .parse::<T>()
                .map_err(|_| ApiError::invalid_argument(format!("{key} must be {what}, got {}", bounded(value))))
        })
        .transpose()
}

fn cursor(value: &str, from: &str) -> Result<u64, ApiError> {
    value.parse::<u64>().map_err(|_| {
        ApiError::invalid_argument(format!("{from} must be a cursor (a whole number), got {}", bounded(value)))
    })
}

/// `GET /api/audit?since=&limit=&identity=&mcp_server=&outcome=&from=&to=&format=json|jsonl`.
async fn audit(app: Calling, query: Params) -> Result<Response, ApiError> {
    let params = params(query, &["since", "limit", "identity", "mcp_server", "outcome", "from", "to", "format"])?;
    let since = params.get("since").map(|since| cursor(since, "since")).transpose()?;
    let limit = number::<usize>(&params, "limit", "a whole number")?;
    let text = |key: &str| params.get(key).cloned();
    let query = AuditQuery {
        since,
        limit,
        identity: text("identity"),
        mcp_server: text("mcp_server"),
        outcome: text("outcome"),
        from: text("from"),
        to: text("to"),
    };
    match params.get("format").map(String::as_str) {
        None | Some("json") => {
            let page = app.supervisor.audit(query).await?;
            Ok(Json(RestAuditPage::from(page)).into_response())
        }
        Some("jsonl") => jsonl(app.supervisor, query).await,
        Some(other) => Err(ApiError::invalid_argument(format!("format must be json or jsonl, got {}", bounded(other)))),
    }
}

/// Every matching entry from `since` (the beginning without it), one JSON object a line, paged
/// from the supervisor until caught up. The first page is read before answering, so a refusal is
/// still an error status.
async fn jsonl(supervisor: AsCaller, query: AuditQuery) -> Result<Response, ApiError> {
    let mut query = AuditQuery { since: Some(query.since.unwrap_or(0)), limit: Some(MAX_PAGE), ..query };
    let first = supervisor.audit(query.clone()).await?;
    let (lines, body) = mpsc::channel::<Bytes>(STREAM_BUFFER);
    tokio::spawn(async move {
        let mut page = first;
        loop {
            for entry in &page.entries {
                let mut line = serde_json::to_vec(entry).unwrap_or_default();
                line.push(b'\n');
                if lines.send(Bytes::from(line)).await.is_err() {
                    return;
                }
            }
            // Caught up: nothing new and the cursor did not move.
            if page.entries.is_empty() && Some(page.next) == query.since {
                return;
            }
            query.since = Some(page.next);
            page = match supervisor.audit(query.clone()).await {
                Ok(page) => page,
                Err(err) => {
                    tracing::warn!(%err, "the audit export stopped early");
                    return;
                }
            };
        }
    });
    Ok(streamed(body, "application/x-ndjson"))
}

/// `GET /api/audit/rates?minutes=60` -> `{"minutes": [{at, calls, errors}]}`, oldest first.
async fn rates(app: Calling, query: Params) -> Result<Response, ApiError> {
    let params = params(query, &["minutes"])?;
    let minutes = number::<u32>(&params, "minutes", "a whole number of minutes")?.unwrap_or(DEFAULT_MINUTES);
    let counts = app.supervisor.rates(minutes).await?;
    Ok(Json(json!({"minutes": counts})).into_response())
}

/// `GET /api/events`: the journal's events as they happen, replayed first from `Last-Event-ID`
/// (or `?since=`), else live from now.
async fn events(
    app: Calling,
    State(state): State<AppState>,
    headers: HeaderMap,
    query: Params,
) -> Result<Response, ApiError> {
    let params = params(query, &["since"])?;
    // In a fleet the ids carry this hangar's tag (`cluster`): a resume through another hangar
    // is forwarded here, and only this hangar's own tag is taken off.
    let member = state.fleet.current();
    let since = match headers.get("last-event-id") {
        Some(value) => {
            let value = value.to_str().map_err(|_| ApiError::invalid_argument("Last-Event-ID must be a cursor"))?;
            let value = value.trim();
            let ours = member.as_ref().filter(|m| m.cluster.owner_of(value) == Owner::Here);
            let bare = ours.and_then(|_| split_tag(value)).map_or(value, |(bare, _)| bare);
            Some(cursor(bare, "Last-Event-ID")?)
        }
        None => params.get("since").map(|since| cursor(since, "since")).transpose()?,
    };
    let (frames, body) = mpsc::channel::<Bytes>(STREAM_BUFFER);
    tokio::spawn(feed_events(app.supervisor, since, frames, member));
    Ok(streamed(body, EVENT_STREAM))
}

/// Relays the supervisor's events to `frames` as SSE (`streamed` keeps quiet stretches alive),
/// until the client goes (the request is then dropped, which cancels it) or the
/// supervisor ends it (the client reconnects with `Last-Event-ID`).
async fn feed_events(
    supervisor: AsCaller,
    since: Option<u64>,
    frames: mpsc::Sender<Bytes>,
    member: Option<Arc<Member>>,
) {
    let sse_frame = |event: &Value| match &member {
        Some(member) => tagged_frame(event, &member.cluster),
        None => sse_frame(event),
    };
    let (mut notices, reply) = supervisor.follow_events(since);
    tokio::pin!(reply);
    // Sent at once, so the client sees the stream open before the first event.
    if frames.send(Bytes::from_static(b": open\n\n")).await.is_err() {
        return;
    }
    loop {
        let frame = tokio::select! {
            () = frames.closed() => return,
            notice = notices.recv() => match notice {
                Some(event) => sse_frame(&event),
                None => return,
            },
            ended = &mut reply => {
                // What came before the end is still sent.
                while let Ok(event) = notices.try_recv() {
                    if frames.send(sse_frame(&event)).await.is_err() {
                        return;
                    }
                }
                if let Err(err) = ended {
                    tracing::debug!(%err, "an event stream ended");
                }
                return;
            }
        };
        if frames.send(frame).await.is_err() {
            return;
        }
    }
}

/// As [`sse_frame`], the `id` with this hangar's owner tag.
fn tagged_frame(event: &Value, cluster: &hangar_core::cluster::Cluster) -> Bytes {
    let id = event.get("id").and_then(Value::as_u64).unwrap_or(0);
    let plain = sse_frame(event);
    let rest = plain.strip_prefix(format!("id: {id}").as_bytes()).unwrap_or(&plain);
    let mut frame = format!("id: {}", cluster.tagged(&id.to_string())).into_bytes();
    frame.extend_from_slice(rest);
    Bytes::from(frame)
}

/// One journal event as an SSE event: `id`, `event` (its kind) and the JSON as `data` (serde_json
/// writes no raw newline, so it is one line).
fn sse_frame(event: &Value) -> Bytes {
    let id = event.get("id").and_then(Value::as_u64).unwrap_or(0);
    let kind =
        event.get("kind").and_then(Value::as_str).filter(|k| k.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
    Bytes::from(format!("id: {id}\nevent: {}\ndata: {event}\n\n", kind.unwrap_or("message")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use axum::body::Body;
    use axum::http::{Request as HttpRequest, StatusCode};

    use super::*;
    use crate::testing::{FakeSupervisor, app_with, json_of, send};

    #[tokio::test]
    async fn bad_parameters_are_400_envelopes() {
        let app = app_with(FakeSupervisor::new());
        for uri in [
            "/api/audit?since=abc",
            "/api/audit?since=-1",
            "/api/audit?limit=x",
            "/api/audit?format=xml",
            "/api/audit?who=me",
            "/api/audit/rates?minutes=many",
            "/api/events?since=1.5",
        ] {
            let (status, _, body) = send(&app, HttpRequest::get(uri).body(Body::empty()).unwrap()).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}: {body}");
            assert_eq!(json_of(&body)["error"]["code"], "InvalidArgument", "{uri}");
        }
        let request = HttpRequest::get("/api/events").header("last-event-id", "x").body(Body::empty()).unwrap();
        assert_eq!(send(&app, request).await.0, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn an_event_is_one_sse_frame_named_by_its_kind() {
        let event = json!({"id": 7, "at": "t", "kind": "state", "mcp_server_id": "m"});
        let frame = sse_frame(&event);
        assert_eq!(frame, format!("id: 7\nevent: state\ndata: {event}\n\n"));
        let odd = sse_frame(&json!({"id": 8, "kind": "x\ny"}));
        assert!(String::from_utf8_lossy(&odd).starts_with("id: 8\nevent: message\ndata: "));
    }
}
