//! The status page at `GET /`: plain HTML, CSS and two scripts (`page.js`: the servers, the
//! event stream, approvals and the chart; `work.js`: latency, connected clients, a server's
//! config and process, its prompts and resources, the admins' playground and the audit rows
//! behind the chart's errors), compiled into the binary (no build step, nothing read from
//! disk). The files carry no data, so they are served without a credential (they are in
//! [`crate::public`]'s table); the scripts ask `/api` for everything, with the credential the
//! operator enters. Their other requests carry the same credential: a per-user server's Connect
//! button (`POST /oauth/connect/{server}`, after which the browser goes to the connect URL
//! answered), and the playground's `hangar_call` on `/mcp`.
//!
//! Every answer here carries a strict Content-Security-Policy: only this origin's script and
//! style (no inline code, no `eval`), requests only to this origin, no frames, no forms posted
//! anywhere. `nosniff` keeps a browser from reading the files as anything but their type.

use axum::Router;
use axum::http::HeaderValue;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::public::{PAGE_CSS, PAGE_HTML, PAGE_JS, PAGE_WORK_JS};
use crate::state::AppState;

/// The page's files: path, media type, content.
const FILES: [(&str, &str, &str); 4] = [
    (PAGE_HTML, "text/html; charset=utf-8", include_str!("index.html")),
    (PAGE_CSS, "text/css; charset=utf-8", include_str!("page.css")),
    (PAGE_JS, "text/javascript; charset=utf-8", include_str!("page.js")),
    (PAGE_WORK_JS, "text/javascript; charset=utf-8", include_str!("work.js")),
];

/// What the page may load and send: its own script, style and API, images of its own or inline
/// `data:` (the chart is inline SVG drawn by the script), nothing else.
pub const CONTENT_SECURITY_POLICY_VALUE: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub fn routes() -> Router<AppState> {
    FILES.iter().fold(Router::new(), |router, &(path, media_type, content)| {
        router.route(path, get(move || async move { serve(media_type, content) }))
    })
}

fn serve(media_type: &'static str, content: &'static str) -> Response {
    (
        [
            (CONTENT_TYPE, HeaderValue::from_static(media_type)),
            (CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY_VALUE)),
            (X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
            (REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
            // A new binary serves new files: a browser asks again each time (cheap: they are small).
            (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        content,
    )
        .into_response()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_page_has_no_inline_script_or_style() {
        let html = include_str!("index.html");
        assert!(!html.contains("<style"), "inline style");
        assert!(!html.contains(" style="), "inline style attribute");
        assert!(!has_event_handler_attribute(html), "an inline event handler (onclick=...)");
        for script in html.split("<script").skip(1) {
            let own =
                [PAGE_JS, PAGE_WORK_JS].iter().any(|js| script.trim_start().starts_with(&format!("src=\"{js}\"")));
            assert!(own, "only the page's own scripts: {script}");
        }
    }

    #[test]
    fn every_file_is_served_under_the_policy() {
        for (_, media_type, content) in FILES {
            let response = serve(media_type, content);
            let header = |name| response.headers().get(name).unwrap().to_str().unwrap().to_owned();
            assert_eq!(header(CONTENT_SECURITY_POLICY), CONTENT_SECURITY_POLICY_VALUE);
            assert_eq!(header(X_CONTENT_TYPE_OPTIONS), "nosniff");
            assert_eq!(header(CONTENT_TYPE), media_type);
        }
        let public: Vec<&str> = crate::public::PATHS
            .iter()
            .filter(|(_, why)| *why == crate::public::Public::PageFile)
            .map(|(path, _)| *path)
            .collect();
        assert_eq!(FILES.map(|(path, _, _)| path).to_vec(), public, "the page's files are public, and only they");
    }

    /// ` on<letters>=` inside the markup: an attribute like `onclick=`.
    fn has_event_handler_attribute(html: &str) -> bool {
        html.match_indices(" on").any(|(at, _)| {
            let rest = &html[at + 3..];
            let name_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
            name_len > 0 && rest[name_len..].starts_with('=')
        })
    }
}
