//! The middleware that sends a request to the hangar holding its state.
//!
//! A request whose session or task id carries another hangar's owner tag goes to that hangar's
//! `advertise` URL as it came: method, path and query, body, and the client's headers
//! (`Authorization` too: the owner authenticates, and its supervisor authorizes and records),
//! with `Host` set to the owner and the hop marker added. A request that already carries the
//! marker is served here whatever its ids say (one hop at most). The answer, an event stream
//! included, is relayed as it arrives. An owner that cannot be reached is a 503 with
//! `Retry-After`, within the connect timeout; so is one that sends no head within
//! [`HEAD_TIMEOUT`] (it sends one at once, deferred when the answer takes longer:
//! `deferred.rs`), or goes silent for [`idle_timeout`] before its deferred head is read. Once
//! the answer is relayed, a silence of [`idle_timeout`] (its owner keeps even a quiet event
//! stream alive more often) cuts it: the client reconnects, through the balancer, and resumes.
//!
//! Ids minted here: a new legacy session's id leaves with this hangar's tag (the supervisor
//! keeps the bare id, and a tagged one coming back is stripped); task ids are tagged by the
//! supervisor itself.

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hangar_core::cluster::{HOP_HEADER, Owner, split_tag};
use hangar_core::jsonrpc::RpcError;
use hangar_core::mcp::HEADER_SESSION_ID;
use http_body_util::BodyExt;
use serde_json::{Value, json};

use super::deferred::{self, Cut};
use super::ids::{self, Held};
use super::{Fleet, HEAD_TIMEOUT, Member, idle_timeout};

/// What a client is told to wait before it retries an unavailable owner.
const RETRY_AFTER_S: u64 = 1;

/// Headers of one connection, not of the request: never passed on.
const HOP_BY_HOP: [HeaderName; 6] = [
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
    header::PROXY_AUTHORIZATION,
];

pub async fn route(State(fleet): State<Fleet>, request: Request, next: Next) -> Response {
    let Some(member) = fleet.current() else { return next.run(request).await };
    let (mut parts, body) = request.into_parts();
    // Read whole already (`body::bounded_body`, outside this layer): this only takes it.
    let Ok(body) = body.collect().await.map(|collected| collected.to_bytes()) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let forwarded = parts.headers.contains_key(HOP_HEADER);
    match ids::owner(&member.cluster, parts.uri.path(), &parts.headers, &body) {
        Some((Owner::Elsewhere(owner), held)) if !forwarded => {
            return forward(&member, &owner, parts, body, held).await;
        }
        Some((Owner::Here, Held::Session)) => strip_session_tag(&mut parts.headers),
        _ => {}
    }
    let mut response = next.run(Request::from_parts(parts, Body::from(body))).await;
    tag_new_session(&member, response.headers_mut());
    response
}

/// The session id as the supervisor knows it: without this hangar's tag.
fn strip_session_tag(headers: &mut HeaderMap) {
    let bare = headers
        .get(HEADER_SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .and_then(split_tag)
        .and_then(|(bare, _)| HeaderValue::from_str(bare).ok());
    if let Some(bare) = bare {
        headers.insert(HEADER_SESSION_ID, bare);
    }
}

/// A session id minted here leaves with this hangar's tag.
fn tag_new_session(member: &Member, headers: &mut HeaderMap) {
    let tagged = headers
        .get(HEADER_SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|id| split_tag(id).is_none())
        .and_then(|id| HeaderValue::from_str(&member.cluster.tagged(id)).ok());
    if let Some(tagged) = tagged {
        headers.insert(HEADER_SESSION_ID, tagged);
    }
}

async fn forward(member: &Member, owner: &str, parts: Parts, body: Bytes, held: Held) -> Response {
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut headers = parts.headers;
    for name in HOP_BY_HOP.iter().chain([&header::HOST, &header::CONTENT_LENGTH]) {
        headers.remove(name);
    }
    if let Ok(marker) = HeaderValue::from_str(member.cluster.advertise()) {
        headers.insert(HOP_HEADER, marker);
    }
    headers.insert(deferred::ACCEPTS, HeaderValue::from_static("1"));
    let request = member.client.request(parts.method, format!("{owner}{path}")).headers(headers).body(body.clone());
    let answer = match tokio::time::timeout(HEAD_TIMEOUT, request.send()).await {
        Ok(Ok(answer)) => deferred::unwrap(answer, idle_timeout()).await,
        Ok(Err(err)) => Err(Cut::Failed(err)),
        Err(_) => Err(Cut::Silent),
    };
    match answer {
        Ok((status, headers, start, answer)) => {
            tracing::debug!(%owner, held = held.as_str(), status = status.as_u16(), "forwarded to the hangar holding this id");
            relay(status, headers, start, answer, owner.to_owned(), held)
        }
        Err(err) => {
            tracing::warn!(%owner, held = held.as_str(), error = %err, "the hangar holding this id is unavailable");
            unavailable(held, &body)
        }
    }
}

/// The owner's answer as it arrives (`start`, then the rest of `answer`), its stream until
/// either side ends it or the owner goes silent for [`idle_timeout`]: then it is cut (an error,
/// not an end, so the client cannot take a part for the whole).
fn relay(
    status: StatusCode,
    mut headers: HeaderMap,
    start: Bytes,
    answer: reqwest::Response,
    owner: String,
    held: Held,
) -> Response {
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
    let start = futures_util::stream::iter((!start.is_empty()).then_some(Ok(start)));
    let rest = futures_util::stream::unfold(Some((answer, owner)), move |relaying| async move {
        let (mut answer, owner) = relaying?;
        match deferred::chunk(&mut answer, idle_timeout()).await {
            Ok(Some(chunk)) => Some((Ok(chunk), Some((answer, owner)))),
            Ok(None) => None,
            Err(cut) => {
                tracing::warn!(%owner, held = held.as_str(), error = %cut, "the answer of the hangar holding this id was cut");
                Some((Err(std::io::Error::other(cut.to_string())), None))
            }
        }
    });
    let chunks = futures_util::StreamExt::chain(start, rest);
    let mut response = Response::new(Body::from_stream(chunks));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// 503, retry later: the hangar that holds this session or task did not answer.
fn unavailable(held: Held, body: &Bytes) -> Response {
    // The request's id when it is a plain one (a JSON-RPC id is a number or a short string).
    let id = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|m| m.get("id").cloned())
        .filter(|id| id.is_number() || id.as_str().is_some_and(|s| s.len() <= 128))
        .unwrap_or(Value::Null);
    let error =
        RpcError::internal(format!("the hangar holding this {} is unavailable; retry in a moment", held.as_str()))
            .with_data(json!({"retry_after_ms": RETRY_AFTER_S * 1000}));
    let answer = json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()});
    let mut response = (StatusCode::SERVICE_UNAVAILABLE, axum::Json(answer)).into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S));
    response
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use axum::Router;
    use axum::routing::post;
    use hangar_core::cluster::Cluster;
    use tower::ServiceExt;

    use super::*;

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn member(url: &str) -> Cluster {
        Cluster::with_secret(url.into(), SECRET).unwrap()
    }

    /// A hangar at `here` whose handler answers the session id it was given, and mints one.
    fn app(here: &str) -> Router {
        let handler = |headers: HeaderMap| async move {
            let seen = headers.get(HEADER_SESSION_ID).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
            ([(HEADER_SESSION_ID, "hgr1-2025-11-25-minted")], format!("served here: {seen}"))
        };
        Router::new()
            .route("/mcp", post(handler))
            .layer(axum::middleware::from_fn_with_state(Fleet::joined(member(here)), route))
    }

    fn ping(session: &str, hop: bool) -> Request {
        let mut request = Request::post("/mcp").header(HEADER_SESSION_ID, session);
        if hop {
            request = request.header(HOP_HEADER, "http://127.0.0.1:2");
        }
        request.body(Body::from(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#)).unwrap()
    }

    async fn text(response: Response) -> String {
        String::from_utf8_lossy(&response.into_body().collect().await.unwrap().to_bytes()).into_owned()
    }

    #[tokio::test]
    async fn an_unreachable_owner_is_a_503_to_retry_and_a_forwarded_request_never_hops_again() {
        // A loopback port bound and let go: nothing listens, the connection is refused at once.
        let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let theirs = member(&format!("http://{gone}")).tagged("hgr1-2025-11-25-0f");
        let refused = app("http://127.0.0.1:2").oneshot(ping(&theirs, false)).await.unwrap();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
        let body: Value = serde_json::from_str(&text(refused).await).unwrap();
        assert_eq!(body["id"], 3, "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("session is unavailable"), "{body}");

        let served = app("http://127.0.0.1:2").oneshot(ping(&theirs, true)).await.unwrap();
        assert_eq!(served.status(), StatusCode::OK);
        assert!(text(served).await.starts_with("served here: hgr1-2025-11-25-0f."), "the id as it came");
    }

    /// The answer to a ping in a session of the hangar at `owner`, sent to another, which
    /// forwards it; a test that waits far longer than any timeout of the forward fails.
    async fn forwarded_to(owner: std::net::SocketAddr) -> Response {
        let theirs = member(&format!("http://{owner}")).tagged("hgr1-2025-11-25-0f");
        let bound = HEAD_TIMEOUT + Duration::from_secs(20);
        let answer = tokio::time::timeout(bound, app("http://127.0.0.1:2").oneshot(ping(&theirs, false)));
        answer.await.expect("an answer, not a hang").unwrap()
    }

    #[tokio::test]
    async fn a_frozen_owner_is_a_503_to_retry_after_the_head_timeout() {
        // An owner whose host accepts connections (the kernel does, for a stopped process) and
        // never answers.
        let frozen = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let owner = frozen.local_addr().unwrap();
        let held = tokio::spawn(async move {
            let mut accepted = Vec::new();
            while let Ok((socket, _)) = frozen.accept().await {
                accepted.push(socket);
            }
        });
        let answer = forwarded_to(owner).await;
        assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(answer.headers()[header::RETRY_AFTER], "1");
        let body: Value = serde_json::from_str(&text(answer).await).unwrap();
        assert!(body["error"]["message"].as_str().unwrap().contains("session is unavailable"), "{body}");
        held.abort();
    }

    #[tokio::test]
    async fn an_answer_slower_than_the_head_timeout_comes_whole_with_its_own_head() {
        // An owner (its `defer` layer outermost, as in `app::router`) whose answer takes longer
        // than a forward waits for a head.
        let slow = || async {
            tokio::time::sleep(HEAD_TIMEOUT + Duration::from_secs(1)).await;
            (StatusCode::ACCEPTED, [("x-answered-by", "the owner")], "the slow answer")
        };
        let owner = Router::new().route("/mcp", post(slow)).layer(axum::middleware::from_fn(deferred::defer));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let served = tokio::spawn(async move { axum::serve(listener, owner).await });
        let answer = forwarded_to(address).await;
        assert_eq!(answer.status(), StatusCode::ACCEPTED);
        assert_eq!(answer.headers()["x-answered-by"], "the owner");
        assert!(!answer.headers().contains_key(deferred::DEFERRED), "the owner's own head");
        assert_eq!(text(answer).await, "the slow answer");
        served.abort();
    }

    #[tokio::test]
    async fn our_own_ids_are_served_here_bare_and_leave_tagged() {
        let here = member("http://127.0.0.1:2");
        let ours = here.tagged("hgr1-2025-11-25-0f");
        let served = app("http://127.0.0.1:2").oneshot(ping(&ours, false)).await.unwrap();
        let minted = served.headers()[HEADER_SESSION_ID].to_str().unwrap().to_owned();
        assert_eq!(here.owner_of(&minted), hangar_core::cluster::Owner::Here, "{minted}");
        assert!(minted.starts_with("hgr1-2025-11-25-minted."), "{minted}");
        assert_eq!(text(served).await, "served here: hgr1-2025-11-25-0f");
    }
}
