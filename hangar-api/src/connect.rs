//! The per-user connect flow, the API's half (see `hangar_core::upstream_tokens` for the whole
//! flow), and the hangar's Client ID Metadata Document:
//! - `POST /oauth/connect/{server}` (authenticated like `/api`): mints a flow for the caller,
//!   answered `{url, expires_at}`;
//! - `GET /oauth/connect/{server}?flow=ID` (public): the browser that opens the URL draws a
//!   random binding, kept in the [`BINDING_COOKIE`] cookie (HttpOnly, SameSite=Lax, scoped to
//!   `/oauth`, Secure when the public URL is https), and is sent (302) to the authorization
//!   server;
//! - `GET /oauth/callback` (public): what the authorization server sent back (`state`, `code` or
//!   `error`, `iss`) goes to the supervisor with the cookie's binding; a small page says, in the
//!   hangar's words, whether the account is connected, or why not;
//! - `GET /oauth/client.json` (public): the Client ID Metadata Document.
//!
//! The public steps need no credential: a flow names its identity, and only the browser that
//! opened it (its cookie) can finish it. None of these pages or errors shows a code or a token;
//! each is sent with `Referrer-Policy: no-referrer` and `Cache-Control: no-store`, since the
//! URLs carry a flow id or a code.

use axum::Json;
use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, COOKIE, LOCATION, REFERRER_POLICY, SET_COOKIE,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use hangar_core::access::Caller;
use hangar_core::echo::bounded;
use hangar_core::ipc::{ConnectFinish, IpcError};
use serde_json::json;

use crate::error::ApiError;
use crate::state::{AppState, Calling};

/// The cookie that binds a browser to the flow it opened.
pub const BINDING_COOKIE: &str = "hangar_connect";
/// How long the cookie lives: as long as a flow does.
const COOKIE_MAX_AGE_S: u32 = 600;
/// The most of one query parameter taken.
const MAX_PARAM_BYTES: usize = 4096;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(crate::public::CONNECT_ROUTE, get(open).post(begin))
        .route(crate::public::CALLBACK, get(callback))
        .route(crate::public::CLIENT_DOCUMENT, get(client_document))
}

/// `POST /oauth/connect/{server}`: a connect flow for the caller.
async fn begin(app: Calling, path: Result<Path<String>, PathRejection>) -> Result<Response, ApiError> {
    let Path(server) = path.map_err(|rejection| ApiError::invalid_argument(bounded(&rejection.body_text())))?;
    let (url, expires_at) = app.supervisor.connect_begin(&server).await?;
    Ok(Json(json!({ "url": url, "expires_at": expires_at })).into_response())
}

/// `GET /oauth/connect/{server}?flow=ID`: binds this browser to the flow and sends it to sign in.
async fn open(
    State(app): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> Response {
    let Ok(Path(server)) = path else {
        return page(StatusCode::BAD_REQUEST, "Not connected", "This connect link is not one the hangar made.");
    };
    let Some(flow) = param(query.as_deref(), "flow") else {
        return page(StatusCode::BAD_REQUEST, "Not connected", "This connect link has no flow: ask for a new one.");
    };
    let binding = draw_binding();
    let supervisor = app.as_caller(Caller::hangar());
    let authorize_url = match supervisor.connect_open(&server, &flow, &binding).await {
        Ok(url) => url,
        Err(err) => return refused(&err),
    };
    // Secure when the browser reaches the hangar over https (the document names its URL).
    let secure = supervisor
        .client_metadata()
        .await
        .ok()
        .and_then(|document| document["client_id"].as_str().map(|id| id.starts_with("https://")))
        .unwrap_or(false);
    let cookie = format!(
        "{BINDING_COOKIE}={binding}; Path=/oauth; Max-Age={COOKIE_MAX_AGE_S}; HttpOnly; SameSite=Lax{}",
        if secure { "; Secure" } else { "" }
    );
    let (Ok(location), Ok(cookie)) = (HeaderValue::from_str(&authorize_url), HeaderValue::from_str(&cookie)) else {
        return page(StatusCode::BAD_GATEWAY, "Not connected", "The authorization server's address is not usable.");
    };
    let mut response = StatusCode::FOUND.into_response();
    let headers = response.headers_mut();
    headers.insert(LOCATION, location);
    headers.insert(SET_COOKIE, cookie);
    private(headers);
    response
}

/// `GET /oauth/callback`: the authorization server's answer, finished with the browser's binding.
async fn callback(State(app): State<AppState>, headers: HeaderMap, RawQuery(query): RawQuery) -> Response {
    let query = query.as_deref();
    let Some(state) = param(query, "state") else {
        return page(StatusCode::BAD_REQUEST, "Not connected", "This answer names no sign-in (no state).");
    };
    let finish = ConnectFinish {
        state,
        code: param(query, "code"),
        error: param(query, "error"),
        iss: param(query, "iss"),
        binding: cookie(&headers, BINDING_COOKIE).unwrap_or_default(),
    };
    let mut response = match app.as_caller(Caller::hangar()).connect_finish(finish).await {
        Ok(server) => page(
            StatusCode::OK,
            "Connected",
            &format!("Your account is connected to {server}. You may close this page and retry your call."),
        ),
        Err(err) => refused(&err),
    };
    // The binding is spent with its flow.
    let spent = format!("{BINDING_COOKIE}=; Path=/oauth; Max-Age=0; HttpOnly; SameSite=Lax");
    if let Ok(spent) = HeaderValue::from_str(&spent) {
        response.headers_mut().insert(SET_COOKIE, spent);
    }
    response
}

/// `GET /oauth/client.json`: the Client ID Metadata Document (404 without a public URL).
async fn client_document(State(app): State<AppState>) -> Result<Response, ApiError> {
    let document = app.as_caller(Caller::hangar()).client_metadata().await?;
    Ok(Json(document).into_response())
}

/// The page of a refused step: the supervisor's words (the hangar's own), escaped.
fn refused(err: &IpcError) -> Response {
    let status = StatusCode::from_u16(err.kind.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    page(status, "Not connected", &err.message)
}

/// A small page of the hangar's own: a title and one sentence.
fn page(status: StatusCode, title: &str, message: &str) -> Response {
    let body = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Hangar: {title}</title></head>\
         <body><h1 id=\"outcome\">{title}</h1><p id=\"message\">{}</p></body></html>\n",
        escape(message)
    );
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static("default-src 'none'"));
    private(headers);
    response
}

/// Nothing of these URLs goes on in a `Referer`, nor is kept in a cache.
fn private(headers: &mut HeaderMap) {
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

fn escape(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '<' => "&lt;".into(),
            '>' => "&gt;".into(),
            '&' => "&amp;".into(),
            '"' => "&quot;".into(),
            '\'' => "&#39;".into(),
            c => c.to_string(),
        })
        .collect()
}

/// 256 random bits, URL-safe: a browser's binding to its flow.
fn draw_binding() -> String {
    let mut bytes = [0u8; 32];
    if getrandom::fill(&mut bytes).is_err() {
        // Without randomness no binding can be trusted: an empty one finishes nothing.
        return String::new();
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The first value of query parameter `name`, decoded, if present and not too long.
fn param(query: Option<&str>, name: &str) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes())
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
        .filter(|value| value.len() <= MAX_PARAM_BYTES)
}

/// The value of cookie `name` in the request's `Cookie` headers, if present.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(name)?.strip_prefix('=').map(str::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binding_cookie_and_the_params_are_read_and_pages_escape() {
        let mut headers = HeaderMap::new();
        headers.insert(COOKIE, HeaderValue::from_static("a=1; hangar_connect=xyz; hangar_connect_other=2"));
        assert_eq!(cookie(&headers, BINDING_COOKIE).as_deref(), Some("xyz"));
        assert_eq!(cookie(&HeaderMap::new(), BINDING_COOKIE), None);
        assert_eq!(param(Some("state=a%20b&code=c"), "state").as_deref(), Some("a b"));
        assert_eq!(param(Some("code=c"), "state"), None);
        assert_eq!(escape("<b>&\"'"), "&lt;b&gt;&amp;&quot;&#39;");
        let (one, two) = (draw_binding(), draw_binding());
        assert!(one.len() >= 43 && one != two);
    }
}
