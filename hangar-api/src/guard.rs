//! The one cross-site guard in front of every route but the health probes: no web page may drive
//! or read the hangar, whether by a cross-site request (CSRF) or through a rebound hostname
//! (DNS rebinding).
//!
//! Three rules, all judged on headers a page cannot forge for another site:
//! - `Host`: on a loopback listener only a loopback name is served (`localhost`, a `127.0.0.0/8`
//!   literal, `[::1]`), so a hostname rebound to 127.0.0.1 is refused. A missing `Host` is
//!   refused there too (HTTP/1.1 requires one; nothing then says the request was meant for us).
//!   An absolute-form target (`GET http://name/path`) must name the same authority as `Host`.
//! - `Origin`, when present: the hangar's own origin (same authority as `Host`), a loopback
//!   origin on a loopback listener (local tools such as MCP Inspector), or one given with
//!   `--allow-origin`. `null` and everything else is refused. A request a browser marks
//!   `Sec-Fetch-Site: cross-site` without an `Origin` (a "no-cors" GET) is refused too.
//! - A state-changing request (any method but GET, HEAD, OPTIONS and DELETE) must say
//!   `Content-Type: application/json`, which a "simple" cross-site request (a form, or a fetch
//!   without preflight) cannot carry. DELETE is exempt: browsers always preflight it and always
//!   send its `Origin`, and MCP clients end a session with a bare DELETE.
//!
//! An API key exempts nothing: a browser may hold one too. A browser's GET of a step of the
//! connect flow (`crate::public::Public::Browser`) keeps the `Host` rule only: it comes from
//! another site by design, and changes nothing but a flow that only that browser can finish.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{CONTENT_TYPE, HOST, ORIGIN};
use axum::http::uri::{Authority, Scheme, Uri};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use hangar_core::echo::bounded;

use crate::error::ApiError;
use crate::mcp::refusal;

/// Where a browser says a request comes from: `same-origin`, `same-site`, `cross-site` or `none`.
const SEC_FETCH_SITE: &str = "sec-fetch-site";

/// Why a request was refused. Its text never repeats the offending header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Host,
    Origin,
    ContentType,
}

impl Refusal {
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::Host => {
                "host not allowed: this hangar listens on loopback and serves only localhost, 127.0.0.0/8 and [::1] as Host"
            }
            Refusal::Origin => {
                "origin not allowed: only the hangar's own origin, loopback origins (on a loopback listener) and --allow-origin ones may call it"
            }
            Refusal::ContentType => "a state-changing request needs Content-Type: application/json",
        }
    }
}

/// An origin the operator allows (`--allow-origin`): scheme, host and port, normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedOrigin {
    https: bool,
    host: String,
    port: u16,
}

/// clap's check of `--allow-origin`: `http[s]://host[:port]`, nothing after the authority.
pub fn parse_allowed_origin(text: &str) -> Result<AllowedOrigin, String> {
    parse_origin(text.trim().trim_end_matches('/'))
        .ok_or_else(|| format!("`{text}` is not an origin like https://tools.example.com or http://localhost:6274"))
}

/// What the guard allows, fixed at start.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    /// Bound to a loopback address: only loopback `Host` names are served.
    pub loopback_only: bool,
    pub allowed_origins: Arc<[AllowedOrigin]>,
}

impl Guard {
    /// The first rule `method`, `target` and `headers` break, if any.
    pub fn check(&self, method: &Method, target: &Uri, headers: &HeaderMap) -> Result<(), Refusal> {
        let host = self.check_host(target, headers)?;
        match single(headers, ORIGIN.as_str()) {
            Ok(None) => {}
            Ok(Some(origin)) => {
                let origin = parse_origin(origin).ok_or(Refusal::Origin)?;
                let own = matches!(&host, Ok(Some(host)) if host.serves(&origin));
                let loopback = self.loopback_only && is_loopback_host(&origin.host);
                if !(own || loopback || self.allowed_origins.contains(&origin)) {
                    return Err(Refusal::Origin);
                }
            }
            Err(()) => return Err(Refusal::Origin),
        }
        // A browser leaves `Origin` out of a cross-site GET or HEAD ("no-cors" fetches, images,
        // links) but says where it comes from in `Sec-Fetch-Site`, which no page can set.
        if headers.get_all(SEC_FETCH_SITE).iter().any(|site| site.as_bytes().eq_ignore_ascii_case(b"cross-site"))
            && !headers.contains_key(ORIGIN)
        {
            return Err(Refusal::Origin);
        }
        if changes_state(method) && !is_json(headers) {
            return Err(Refusal::ContentType);
        }
        Ok(())
    }
}

impl Guard {
    /// The `Host` rule alone: what a browser's navigation to a step of the connect flow must
    /// keep (it comes from another site by design: a link, an authorization server's
    /// redirect). The `Host` header, parsed, when the rule holds.
    pub fn check_host(&self, target: &Uri, headers: &HeaderMap) -> Result<Result<Option<Host>, ()>, Refusal> {
        let host = single(headers, HOST.as_str()).map(|value| value.and_then(parse_host));
        // An absolute-form target (`POST http://name/... HTTP/1.1`) names the host the request is
        // for, and the server must go by it, not by `Host`: it must say the same as `Host`.
        if let Some(authority) = target.authority()
            && !matches!(single(headers, HOST.as_str()), Ok(Some(value)) if value.eq_ignore_ascii_case(authority.as_str()))
        {
            return Err(Refusal::Host);
        }
        if self.loopback_only && !matches!(&host, Ok(Some(host)) if is_loopback_host(&host.name)) {
            return Err(Refusal::Host);
        }
        Ok(host)
    }
}

/// Refuses (403) what [`Guard::check`] refuses: a JSON-RPC error on `/mcp`, the REST envelope
/// elsewhere.
pub async fn refuse_cross_site(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if crate::public::is_probe(path) {
        return next.run(request).await;
    }
    let public = crate::public::public(path);
    let navigation = public == Some(crate::public::Public::Browser) && crate::public::open_to(public, request.method());
    let checked = if navigation {
        guard.check_host(request.uri(), request.headers()).map(drop)
    } else {
        guard.check(request.method(), request.uri(), request.headers())
    };
    match checked {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            tracing::debug!(method = %bounded(request.method().as_str()), ?refusal, "cross-site guard refused a request");
            let response = if refusal::is_mcp_path(path) {
                refusal::forbidden(refusal.reason())
            } else {
                ApiError::new(StatusCode::FORBIDDEN, "Forbidden", refusal.reason()).into_response()
            };
            crate::body::refuse_unread(request, response).await
        }
    }
}

/// Whether a browser may send `method` cross-site without asking first, or the method writes.
fn changes_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS | Method::DELETE)
}

/// The media type is `application/json`, parameters (`charset`) allowed.
pub fn is_json(headers: &HeaderMap) -> bool {
    let Ok(Some(value)) = single(headers, CONTENT_TYPE.as_str()) else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// The one value of header `name` as text; `Err` when it is repeated or not visible ASCII.
fn single<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ()> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(());
    }
    first.to_str().map(Some).map_err(|_| ())
}

/// A `Host` header: the name (lowercase, an IPv6 literal keeps its brackets) and the port if given.
#[derive(Debug, PartialEq, Eq)]
pub struct Host {
    name: String,
    port: Option<u16>,
}

impl Host {
    /// Whether `origin` is this host's own: same name, and the same port (a `Host` without a port
    /// means the scheme's default).
    fn serves(&self, origin: &AllowedOrigin) -> bool {
        let default = if origin.https { 443 } else { 80 };
        self.name == origin.host && self.port.unwrap_or(default) == origin.port
    }
}

fn parse_host(value: &str) -> Option<Host> {
    // A Host is `host[:port]`: no user info, no path.
    if value.contains(['@', '/', '?', '#']) || value.is_empty() {
        return None;
    }
    let authority: Authority = value.parse().ok()?;
    let port = match value[authority.host().len()..].strip_prefix(':') {
        Some(port) => Some(port.parse::<u16>().ok()?),
        None => None,
    };
    Some(Host { name: authority.host().to_ascii_lowercase(), port })
}

/// An `Origin` (`scheme://host[:port]`) as scheme, host and port; `null`, other schemes and
/// anything with a path have none.
fn parse_origin(value: &str) -> Option<AllowedOrigin> {
    let uri: Uri = value.parse().ok()?;
    let https = match uri.scheme()? {
        scheme if *scheme == Scheme::HTTPS => true,
        scheme if *scheme == Scheme::HTTP => false,
        _ => return None,
    };
    let authority = uri.authority()?;
    let rest = value.split_once("://").map(|(_, rest)| rest)?;
    if rest != authority.as_str() {
        return None; // a path, query or fragment
    }
    let host = parse_host(authority.as_str())?;
    Some(AllowedOrigin { https, port: host.port.unwrap_or(if https { 443 } else { 80 }), host: host.name })
}

/// `localhost`, an IPv4 loopback literal (`127.0.0.0/8`) or an IPv6 one (`[::1]`, also written
/// out or IPv4-mapped). Only literals and `localhost`: any other name may be rebound.
fn is_loopback_host(name: &str) -> bool {
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    if let Some(inner) = name.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')) {
        return inner
            .parse::<Ipv6Addr>()
            .is_ok_and(|ip| ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()));
    }
    name.parse::<Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    fn loopback() -> Guard {
        Guard { loopback_only: true, allowed_origins: Arc::from([]) }
    }

    fn get(guard: &Guard, pairs: &[(&'static str, &'static str)]) -> Result<(), Refusal> {
        guard.check(&Method::GET, &Uri::from_static("/api"), &headers(pairs))
    }

    #[test]
    fn a_loopback_listener_serves_only_loopback_host_names() {
        for host in [
            "localhost:8000",
            "LOCALHOST",
            "127.0.0.1",
            "127.0.0.1:9",
            "127.0.0.2:80",
            "[::1]:80",
            "[::1]",
            "[0:0:0:0:0:0:0:1]:8000",
            "[::ffff:127.0.0.1]:1",
        ] {
            assert_eq!(get(&loopback(), &[("host", host)]), Ok(()), "{host}");
        }
        for host in [
            "evil.example:8000",
            "evil.example",
            "localhost.evil.example",
            "localhost.",
            "127.1",
            "127.0.0.1.nip.io:8000",
            "128.0.0.1",
            "2130706433",
            "[::2]",
            "user@localhost",
            "localhost:",
            "localhost:99999",
            "localhost/x",
            "",
        ] {
            assert_eq!(get(&loopback(), &[("host", host)]), Err(Refusal::Host), "{host}");
        }
        assert_eq!(get(&loopback(), &[]), Err(Refusal::Host), "a missing Host");
        assert_eq!(get(&loopback(), &[("host", "localhost"), ("host", "evil.example")]), Err(Refusal::Host));
        let beyond = Guard::default();
        assert_eq!(get(&beyond, &[("host", "hangar.internal:8000")]), Ok(()), "not bound to loopback");
    }

    #[test]
    fn origins_must_be_the_hangars_own_loopback_or_allowed() {
        let host = ("host", "127.0.0.1:8000");
        for origin in ["http://localhost:6274", "https://[::1]", "http://127.0.0.1:8000", "http://127.9.9.9"] {
            assert_eq!(get(&loopback(), &[host, ("origin", origin)]), Ok(()), "{origin}");
        }
        for origin in [
            "null",
            "https://evil.example.com",
            "http://localhost.evil.example",
            "file://",
            "chrome-extension://abc",
            "http://localhost:6274/path",
            "localhost:6274",
            "",
        ] {
            assert_eq!(get(&loopback(), &[host, ("origin", origin)]), Err(Refusal::Origin), "{origin}");
        }
        assert_eq!(
            get(&loopback(), &[host, ("origin", "http://localhost"), ("origin", "http://localhost")]),
            Err(Refusal::Origin),
            "a repeated Origin"
        );

        // Beyond loopback: the own origin (same authority as Host) and allowed ones only.
        let allowed = parse_allowed_origin("https://Tools.Example.com/").unwrap();
        let beyond = Guard { loopback_only: false, allowed_origins: Arc::from([allowed]) };
        let hangar = ("host", "hangar.internal:8000");
        assert_eq!(get(&beyond, &[hangar, ("origin", "http://hangar.internal:8000")]), Ok(()));
        assert_eq!(get(&beyond, &[("host", "hangar.internal"), ("origin", "https://hangar.internal")]), Ok(()));
        assert_eq!(get(&beyond, &[hangar, ("origin", "https://tools.example.com:443")]), Ok(()));
        assert_eq!(get(&beyond, &[hangar, ("origin", "http://tools.example.com")]), Err(Refusal::Origin), "scheme");
        assert_eq!(get(&beyond, &[hangar, ("origin", "http://hangar.internal:9000")]), Err(Refusal::Origin), "port");
        assert_eq!(get(&beyond, &[hangar, ("origin", "http://localhost:6274")]), Err(Refusal::Origin));
        assert!(parse_allowed_origin("null").is_err());
        assert!(parse_allowed_origin("https://x.example/path").is_err());
        assert!(parse_allowed_origin("ftp://x.example").is_err());
    }

    #[test]
    fn state_changing_requests_need_json() {
        let host = ("host", "localhost:8000");
        let post = |pairs: &[(&'static str, &'static str)]| {
            loopback().check(&Method::POST, &Uri::from_static("/api"), &headers(pairs))
        };
        for json in ["application/json", "Application/JSON; charset=utf-8", " application/json ;x=y"] {
            assert_eq!(post(&[host, ("content-type", json)]), Ok(()), "{json}");
        }
        for simple in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonx",
            "",
        ] {
            assert_eq!(post(&[host, ("content-type", simple)]), Err(Refusal::ContentType), "{simple}");
        }
        assert_eq!(post(&[host]), Err(Refusal::ContentType), "no Content-Type");
        for method in [Method::GET, Method::HEAD, Method::OPTIONS, Method::DELETE] {
            assert_eq!(loopback().check(&method, &Uri::from_static("/api"), &headers(&[host])), Ok(()), "{method}");
        }
        for method in [Method::PUT, Method::PATCH] {
            assert_eq!(
                loopback().check(&method, &Uri::from_static("/api"), &headers(&[host])),
                Err(Refusal::ContentType),
                "{method}"
            );
        }
    }

    #[test]
    fn an_absolute_target_must_name_the_host_and_cross_site_fetches_need_an_origin() {
        let host = ("host", "127.0.0.1:8000");
        let at = |target: &'static str, pairs: &[(&'static str, &'static str)]| {
            loopback().check(&Method::GET, &Uri::from_static(target), &headers(pairs))
        };
        assert_eq!(at("http://127.0.0.1:8000/api", &[host]), Ok(()));
        assert_eq!(at("http://evil.example/api", &[host]), Err(Refusal::Host));
        assert_eq!(at("http://evil.example:8000/api", &[("host", "evil.example:8000")]), Err(Refusal::Host));
        assert_eq!(at("http://127.0.0.1:9/api", &[host]), Err(Refusal::Host), "another port");
        assert_eq!(at("http://127.0.0.1:8000/api", &[]), Err(Refusal::Host));

        assert_eq!(at("/api", &[host, ("sec-fetch-site", "cross-site")]), Err(Refusal::Origin));
        assert_eq!(at("/api", &[host, ("sec-fetch-site", "Cross-Site")]), Err(Refusal::Origin));
        for site in ["same-origin", "same-site", "none"] {
            assert_eq!(at("/api", &[host, ("sec-fetch-site", site)]), Ok(()), "{site}");
        }
        let local_tool = [host, ("sec-fetch-site", "cross-site"), ("origin", "http://localhost:6274")];
        assert_eq!(at("/api", &local_tool), Ok(()), "a loopback tool's cross-site fetch says its Origin");
    }
}
